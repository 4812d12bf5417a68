#!/usr/bin/env bash
# ctest entry for the OpenAI SDK tests: tests/js/run.sh PAGODA_BIN CHAT_TEMPLATE.
# Installs the pinned `openai` package into tests/js/node_modules when
# missing; exits 77 (ctest SKIP_RETURN_CODE) only when node/npm or the npm
# registry is unavailable.
set -u
cd "$(dirname "$0")"
export PAGODA_BIN="$1" PAGODA_CHAT_TEMPLATE="$2"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node/npm not installed (scripts/install-deps.sh installs them)"; exit 77
fi
if [ ! -d node_modules/openai ]; then
  if [ -f package-lock.json ]; then cmd=(npm ci); else cmd=(npm install); fi
  if ! timeout 300 "${cmd[@]}" --no-audit --no-fund; then
    echo "SKIP: '${cmd[*]}' failed (no network to the npm registry?)"; exit 77
  fi
fi
exec node --test --test-concurrency=1 ./*.test.mjs
