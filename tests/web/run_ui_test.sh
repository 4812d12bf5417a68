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
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
# start_server NAME ARGS...: starts `pagoda serve` on a free port; sets PORT.
start_server() {
  local name=$1
  shift
  "$BIN" serve --host 127.0.0.1 --port 0 --disable-log-stats "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  local pid=$!
  PIDS+=("$pid")
  PORT=""
  for _ in $(seq 1 1200); do  # up to 120 s for the listening line
    PORT=$(sed -n 's|^Pagoda listening on http://[^:]*:\([0-9]*\)$|\1|p' "$OUT/$name.out")
    [ -n "$PORT" ] && return 0
    kill -0 "$pid" 2>/dev/null || { echo "pagoda serve ($name) exited:"; cat "$OUT/$name.err"; exit 1; }
    sleep 0.1
  done
  echo "pagoda serve ($name) did not start"
  exit 1
}
start_server serve
OPEN_PORT=$PORT
start_server serve_key --api-key "ui/test+key=1 @"
KEY_PORT=$PORT
CHROMIUM="$CHROMIUM" node "$HERE/ui_test.mjs" "http://127.0.0.1:$OPEN_PORT/" "$OUT/chat_ui.png" \
  "http://127.0.0.1:$KEY_PORT/" "ui/test+key=1 @"
rc=$?
if [ $rc -ne 0 ]; then
  for name in serve serve_key; do
    echo "--- $name log (last 30 lines)"
    tail -n 30 "$OUT/$name.err"
  done
fi
exit $rc
