#!/usr/bin/env bash
# ctest `web_ui_chromium`: starts `pagoda serve` on a free port and runs
# ui_test.mjs in headless Chromium (Debian's `chromium`, driven by
# playwright-core from npm). Exit 77 (ctest: skipped) with a message only
# when chromium, node/npm or the playwright-core package cannot be had.
# Usage: run_ui_test.sh PAGODA_BIN OUT_DIR
set -uo pipefail
BIN=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  echo "SKIPPED: chromium is not installed (apt-get install chromium; see scripts/install-deps.sh)"
  exit 77
fi
if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -d "$HERE/node_modules/playwright-core" ]; then
  if ! command -v npm >/dev/null; then
    echo "SKIPPED: npm is not installed (needed for playwright-core)"
    exit 77
  fi
  (cd "$HERE" && (npm ci --no-audit --no-fund || npm install --no-audit --no-fund)) >"$OUT.npm.log" 2>&1 || {
    echo "SKIPPED: npm could not install playwright-core (see $OUT.npm.log)"
    exit 77
  }
fi
mkdir -p "$OUT"
"$BIN" serve --host 127.0.0.1 --port 0 --disable-log-stats >"$OUT/serve.out" 2>"$OUT/serve.err" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT
PORT=""
for _ in $(seq 1 1200); do  # up to 120 s for the listening line
  PORT=$(sed -n 's|^Pagoda listening on http://[^:]*:\([0-9]*\)$|\1|p' "$OUT/serve.out")
  [ -n "$PORT" ] && break
  kill -0 $PID 2>/dev/null || { echo "pagoda serve exited:"; cat "$OUT/serve.err"; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "pagoda serve did not start"; exit 1; }
CHROMIUM="$CHROMIUM" node "$HERE/ui_test.mjs" "http://127.0.0.1:$PORT/" "$OUT/chat_ui.png"
