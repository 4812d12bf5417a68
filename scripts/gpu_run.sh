#!/usr/bin/env bash
# One call on a GPU machine: configure + build (Release, sm_90a, ninja), run
# the GPU tests, run the benchmarks, print a short table last. Logs go to
# $OUT (the device tool's output folder) or /tmp/pagoda_gpu_out.
#   scripts/gpu_run.sh [--no-bench] [--model-dir DIR]
# then scripts/gpu_e2e.sh (set E2E=0 to skip): the pagoda binary serving and
# generating on CUDA.
set -u -o pipefail
OUT=${OUT:-/tmp/pagoda_gpu_out}
mkdir -p "$OUT"
SHARED=${PAGODA_SHARED_DIR:-$PWD/../shared}
BUILD=${BUILD_DIR:-build-gpu}
BENCH=1
MODEL_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) BENCH=0 ;;
    --model-dir) MODEL_DIR="$2"; shift ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
  shift
done

{ date -u; git rev-parse HEAD 2>/dev/null || cat COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; } 2>&1 | tee "$OUT/env.txt"

t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DPAGODA_SHARED_DIR="$SHARED" > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -j"$(nproc)" pagoda_gpu_tests pagoda_gpu_bench > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

t1=$(date +%s)
"$BUILD/tests/pagoda_gpu_tests" > "$OUT/tests.log" 2>&1
TEST_RC=$?
echo "tests: rc=$TEST_RC in $(( $(date +%s) - t1 )) s"
grep -E "^\[  FAILED  \]|Failure|Expected|Which is|error|seed" "$OUT/tests.log" | head -60
grep -E "^\[  PASSED  \]|^\[  FAILED  \].*tests?, listed|tests ran" "$OUT/tests.log"

if [ "$BENCH" = 1 ]; then
  ARGS=(--out "$OUT/bench.md")
  [ -n "$MODEL_DIR" ] && ARGS+=(--model-dir "$MODEL_DIR")
  "$BUILD/pagoda_gpu_bench" "${ARGS[@]}" > "$OUT/bench.log" 2>&1
  echo "bench: rc=$?"
  grep -vE "^\|" "$OUT/bench.log" | tail -5
  echo
  echo "== tests: rc=$TEST_RC; $(grep -cE '^\[       OK \]' "$OUT/tests.log") ok, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$OUT/tests.log") failed lines"
  cat "$OUT/bench.md" 2>/dev/null
fi

E2E_RC=0
if [ "${E2E:-1}" = 1 ]; then
  echo
  echo "== end to end (pagoda binary on CUDA)"
  BUILD_DIR="$BUILD" PAGODA_SHARED_DIR="$SHARED" OUT="$OUT" bash scripts/gpu_e2e.sh
  E2E_RC=$?
fi
[ "$TEST_RC" = 0 ] && [ "$E2E_RC" = 0 ]
