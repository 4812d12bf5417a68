#!/usr/bin/env bash
# Runs one libFuzzer target for ctest (tests/fuzz/CMakeLists.txt):
#   run_fuzzer.sh BINARY NAME SEED_CORPUS WORK_DIR SECONDS [-dict=FILE]
# SECONDS 0: replays every file of SEED_CORPUS once (the regression run).
# SECONDS > 0: fuzzes that long from SEED_CORPUS, writing new inputs to
# WORK_DIR/corpus/NAME and a crashing input to WORK_DIR/artifacts/NAME-*.
# Exit status: libFuzzer's (0 clean; non-zero on a crash, leak, timeout or
# out-of-memory, whose input and stack trace are printed).
set -euo pipefail
bin="$1" name="$2" seeds="$3" work="$4" seconds="$5"; shift 5
mkdir -p "$work/corpus/$name" "$work/artifacts"
# -timeout: one input running this long is a hang (the chat template's
# budget and the parsers' limits are far below it, even under ASan on a
# loaded 2-core machine). -rss_limit_mb: a bounded parser never nears it.
common=(-timeout=30 -rss_limit_mb=2560 -artifact_prefix="$work/artifacts/$name-" "$@")
if [ "$seconds" = 0 ]; then
  exec "$bin" "${common[@]}" -runs=0 "$seeds"
fi
exec "$bin" "${common[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work/corpus/$name" "$seeds"
