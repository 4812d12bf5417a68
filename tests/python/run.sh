#!/usr/bin/env bash
# Runs the Python module's tests (pytest) against the built package:
#   run.sh PYTHON BUILD_DIR
# Exit 77 (ctest: skipped) with a message when the module was not built or
# pytest is missing.
set -u
PY="$1"; BUILD="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! ls "$BUILD"/python/pagoda/_pagoda*.so >/dev/null 2>&1; then
  echo "skipped: the pagoda Python module was not built (needs pybind11-dev and python3-dev; scripts/install-deps.sh)"
  exit 77
fi
if ! "$PY" -c "import pytest" 2>/dev/null; then
  echo "skipped: pytest is missing for $PY (Debian: python3-pytest)"
  exit 77
fi
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m pytest -q -p no:cacheprovider "$HERE"
