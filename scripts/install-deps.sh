#!/usr/bin/env bash
# Installs Pagoda's build and test dependencies from Debian 12 packages.
# Idempotent: packages already present are left as they are.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  ccache                    # compiler cache (CMake uses it when found)
  clang-14                  # sanitizer + libFuzzer build and the TSan build (scripts/test.sh)
  libclang-rt-14-dev        # clang's sanitizer and libFuzzer runtimes
  llvm-14                   # llvm-symbolizer: sanitizer stack traces with file:line
  libboost1.81-dev          # Asio, Beast, Lockfree (header-only parts)
  nlohmann-json3-dev
  libsentencepiece-dev
  libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  libcli11-dev
  libpcre2-dev              # byte-level BPE pre-tokenizer regex (optional)
  libutf8proc-dev           # NFC normalizer of BPE tokenizers (optional)
  python3
  python3-dev pybind11-dev  # the pagoda Python module (python/; optional in CMake)
  python3-pytest            # its tests (tests/python)
  python3-jsonschema        # the guided-decoding acceptance tests validate outputs with it
  chromium                  # headless UI test (tests/web: playwright-core from npm)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Node.js + npm for tests/js (the official openai npm client). Only when npm
# is missing: a NodeSource nodejs (which bundles npm) must not be replaced.
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
