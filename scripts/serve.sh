#!/usr/bin/env bash
# Installs, builds and serves a model (default: the bundled stories260K) on
# port 8000 — on the GPU when one is present, else on the CPU.
#   scripts/serve.sh [MODEL_DIR] [pagoda serve flags...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PAGODA_BUILD_TARGET=pagoda "$root/scripts/build.sh" "$root/build" >&2
exec "$root/build/pagoda" serve "$@"
