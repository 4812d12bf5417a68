#!/usr/bin/env bash
# Installs dependencies (Debian 12 packages), configures and builds Pagoda.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]
# The CUDA backend is built when /usr/local/cuda/bin/nvcc (or nvcc on PATH)
# exists; pass -DPAGODA_CUDA=OFF to skip it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"; shift || true
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build" -j "$(nproc)"
