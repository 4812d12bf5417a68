#!/usr/bin/env bash
# Installs dependencies (Debian 12 packages), configures and builds Pagoda.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
# The CUDA backend is built when /usr/local/cuda/bin/nvcc (or nvcc on PATH)
# exists; pass -DPAGODA_CUDA=OFF to skip it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; shift || true
"$root/scripts/install-deps.sh"
# ccache (CMake uses it when found): paths under the checkout hash relative to
# the build folder, so a clone elsewhere (CI's) reuses what an earlier build
# of the same sources compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
# PAGODA_BUILD_TARGET=pagoda builds the binary alone (what serve.sh needs).
cmake --build "$build" -j "$(nproc)" ${PAGODA_BUILD_TARGET:+--target "$PAGODA_BUILD_TARGET"}
