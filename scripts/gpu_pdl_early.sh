#!/usr/bin/env bash
# One device call: the decode step with programmatic dependent launch as
# built by default (each kernel releases the next after its wait) against a
# PAGODA_PDL_EARLY build (release before the wait; gpu/pdl.cuh) and one with
# PAGODA_PDL_EARLY_QUANT=OFF (the int4 linears wait first). Builds the three
# trees (Release, sm_90a), runs the GPU tests on each, then for each
# build the batch-1 decode rows (Llama-2-7B bf16, its GPTQ int4 in fp16,
# Qwen2-7B GPTQ int4 in fp16) and the decode tables (Llama-2-7B bf16 and
# GPTQ). Logs and tables go to $OUT (default /tmp/pagoda_gpu_out).
#   scripts/gpu_pdl_early.sh            everything (about 15 minutes)
#   STAGE=build scripts/gpu_pdl_early.sh  the three builds (side by side) + tests
#   STAGE=bench scripts/gpu_pdl_early.sh  the benchmarks on those builds
# (the device tool stops a call at 10 minutes: run the two stages as two
# calls on the same warm machine, which keeps the build folders).
# Test assets: PAGODA_SHARED_DIR (default .devcarry/shared, a copy of
# ../shared carried to the device); the image's missing PCRE2 / utf8proc:
# scripts/stage_device_deps.sh into .devcarry/deps.
set -u -o pipefail
OUT=${OUT:-/tmp/pagoda_gpu_out}
mkdir -p "$OUT"
SHARED=${PAGODA_SHARED_DIR:-$PWD/.devcarry/shared}
P=$SHARED/models/presets
T=$SHARED/tokenizers
DEPS=${PAGODA_DEPS_DIR:-$PWD/.devcarry/deps}
[ -d "$DEPS/lib/pkgconfig" ] && export PKG_CONFIG_PATH="$DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
STAGE=${STAGE:-all}
BUILDS="build-gpu build-gpu-early build-gpu-early-nq"
build_one() {  # build-dir PDL_EARLY
  local t0=$(date +%s)
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DPAGODA_SHARED_DIR="$SHARED" -DPAGODA_PDL_EARLY=$2 > "$OUT/configure-$1.log" 2>&1 \
    || { tail -30 "$OUT/configure-$1.log"; return 1; }
  ninja -C "$1" -j"$(( $(nproc) / 3 + 1 ))" pagoda_gpu_tests pagoda_gpu_bench > "$OUT/build-$1.log" 2>&1 \
    || { grep -E "error|FAILED" -A3 "$OUT/build-$1.log" | head -40; return 1; }
  echo "build $1: $(( $(date +%s) - t0 )) s"
}
if [ "$STAGE" != bench ]; then
  build_one build-gpu OFF & p1=$!
  build_one build-gpu-early ON & p2=$!
  build_one build-gpu-early-nq "ON -DPAGODA_PDL_EARLY_QUANT=OFF" & p3=$!
  wait $p1 || exit 1
  wait $p2 || exit 1
  wait $p3 || exit 1
  for b in $BUILDS; do
    timeout 200 $b/tests/pagoda_gpu_tests > "$OUT/tests-$b.log" 2>&1
    echo "tests ($b): rc=$?"
    grep -E "^\[  FAILED  \]|^\[  PASSED  \]|Failure" "$OUT/tests-$b.log" | head -20
  done
fi
[ "$STAGE" = build ] && exit 0
# The builds alternate row by row, so a cut-off call still has pairs; REPS
# (default 1) repeats the batch-1 rows.
for rep in $(seq "${REPS:-1}"); do
for row in "llama-2-7b llama2 bfloat16" "llama-2-7b-gptq-int4 llama2 float16" \
           "qwen2-7b-instruct-gptq-int4 qwen2 float16"; do
  set -- $row
  for b in $BUILDS; do
    timeout 150 "$b/pagoda_gpu_bench" --only engine --model-dir "$P/$1" --tokenizer-dir "$T/$2" --dtype "$3" \
      --requests 0 --no-prefill --out "$OUT/engine-$b-$1.md" > "$OUT/engine-$b-$1.log" 2>&1
    echo "$rep $b $1 $3: rc=$? $(grep -E "batch-1 decode" "$OUT/engine-$b-$1.md" | sed -E 's/.*\| ([0-9.]+ tok\/s) \|.*/\1/')"
  done
done
done
for m in llama-2-7b llama-2-7b-gptq-int4; do
  for b in $BUILDS; do
    timeout 200 "$b/pagoda_gpu_bench" --only decode-table --model-dir "$P/$m" --label "$m ($b)" \
      --out "$OUT/decode-table-$b-$m.md" > "$OUT/decode-table-$b-$m.log" 2>&1
    echo "$b decode table $m: rc=$?"
    grep -E "context 512" "$OUT/decode-table-$b-$m.md" | sed -E 's/.*batch ([0-9]+), context 512 \| ([0-9.]+) .*: ([0-9]+)% of it.*/  batch \1: \2 ms (\3%)/'
  done
done
