#!/usr/bin/env bash
# One call on a GPU machine: configure + build (Release, sm_90a, ninja), run
# the GPU tests, run the benchmarks, print a short table last. Logs go to
# $OUT (the device tool's output folder) or /tmp/pagoda_gpu_out.
#   scripts/gpu_run.sh [--no-bench] [--model-dir DIR]
# then scripts/gpu_e2e.sh (set E2E=0 to skip): the pagoda binary serving and
# generating on CUDA. With 2+ GPUs also the tensor-parallel benches (TP=0
# skips): NCCL all-reduce per step, Llama-2-13B at TP=1 and TP=2, 7B at TP=2.
# SINGLE=0 skips the single-GPU benches (kernels, ops, engine, HF peer) when
# only the multi-GPU figures are wanted.
# Test assets: PAGODA_SHARED_DIR (default ../shared). The device tool does not
# send the ../shared beside a checkout: copy it into an ignored folder (e.g.
# .devcarry/shared), carry that folder, and point PAGODA_SHARED_DIR (and
# PRESETS_DIR, BENCH_TOKENIZERS) there.
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
    --model-dir) MODEL_DIR="${2:?--model-dir needs a directory}"; shift ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
  shift
done

{ date -u; git rev-parse HEAD 2>/dev/null || cat COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; } 2>&1 | tee "$OUT/env.txt"

# Libraries the GPU image lacks (PCRE2, utf8proc for Qwen2's tokenizer),
# staged by scripts/stage_device_deps.sh and carried in .devcarry/deps.
DEPS=${PAGODA_DEPS_DIR:-$PWD/.devcarry/deps}
[ -d "$DEPS/lib/pkgconfig" ] && export PKG_CONFIG_PATH="$DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

BENCH_RC=0
note_rc() {  # rc label...: prints "label: rc=N"; a failed benchmark fails the run
  local r=$1; shift
  echo "$*: rc=$r"
  [ "$r" = 0 ] || BENCH_RC=1
}

t0=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DPAGODA_SHARED_DIR="$SHARED" > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -j"$(nproc)" pagoda_gpu_tests pagoda_gpu_bench pagoda > "$OUT/build.log" 2>&1 \
  || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

t1=$(date +%s)
timeout "${TEST_TIMEOUT:-300}" "$BUILD/tests/pagoda_gpu_tests" > "$OUT/tests.log" 2>&1
TEST_RC=$?
echo "tests: rc=$TEST_RC in $(( $(date +%s) - t1 )) s"
grep -E "^\[  FAILED  \]|Failure|Expected|Which is|error|seed" "$OUT/tests.log" | head -60
grep -E "^\[  PASSED  \]|^\[  FAILED  \].*tests?, listed|tests ran" "$OUT/tests.log"

SINGLE=${SINGLE:-1}
if [ "$BENCH" = 1 ] && [ "$SINGLE" = 1 ]; then
  ARGS=(--out "$OUT/bench.md")
  [ -n "$MODEL_DIR" ] && ARGS+=(--model-dir "$MODEL_DIR")
  "$BUILD/pagoda_gpu_bench" "${ARGS[@]}" > "$OUT/bench.log" 2>&1
  note_rc $? "bench"
  grep -vE "^\|" "$OUT/bench.log" | tail -5
  echo
  echo "== tests: rc=$TEST_RC; $(grep -cE '^\[       OK \]' "$OUT/tests.log") ok, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$OUT/tests.log") failed lines"
  cat "$OUT/bench.md" 2>/dev/null
fi

# Per-op times of one step, and the whole engine (startup, batch-1 decode
# with CUDA graphs, prefill 8 x 2048, offline N x 128/128 with KV use) on
# the Llama-2-7B shape and the issue-6 shapes (dummy bf16 weights).
# BENCH_TOKENIZERS: a folder with llama2/, qwen2/, chinese-llama-2/
# tokenizers (default $SHARED/tokenizers); shapes without one decode ids
# to placeholders.
PRESETS=${PRESETS_DIR:-$SHARED/models/presets}
TOKS=${BENCH_TOKENIZERS:-$SHARED/tokenizers}
N=${E2E_REQUESTS:-1000}
: > "$OUT/engine.md"
# engine_bench TABLE TAG LABEL PRESET TOKENIZER [extra pagoda_gpu_bench args...]:
# one engine bench (logs in $OUT/engine-TAG.{md,log}), its rows appended to
# $OUT/TABLE.
engine_bench() {
  local table=$1 tag=$2 label=$3 preset=$4 tok=$5; shift 5
  local targs=()
  [ -d "$TOKS/$tok" ] && targs=(--tokenizer-dir "$TOKS/$tok")
  timeout 180 "$BUILD/pagoda_gpu_bench" --only engine --model-dir "$PRESETS/$preset" --label "$label" "${targs[@]}" \
    --requests "$N" --out "$OUT/engine-$tag.md" "$@" > "$OUT/engine-$tag.log" 2>&1
  note_rc $? "engine bench $label $* (tokenizer: ${targs[1]:-ids only})"
  grep -E "^\| [^b-]" "$OUT/engine-$tag.md" | grep -v "^| benchmark" >> "$OUT/$table"
}
if [ "$BENCH" = 1 ] && [ "$SINGLE" = 1 ] && [ -d "$PRESETS" ]; then
  "$BUILD/pagoda_gpu_bench" --only ops --model-dir "$PRESETS/llama-2-7b" --out "$OUT/ops.md" > "$OUT/ops.log" 2>&1
  note_rc $? "ops bench"
  engine_bench engine.md llama-2-7b Llama-2-7B llama-2-7b llama2
  # Qwen2-7B also with the seeds' sampling settings and logprobs=5 (issue 11).
  engine_bench engine.md qwen2-7b-instruct Qwen2-7B-Instruct qwen2-7b-instruct qwen2 --no-prefill --sampling-variants
  "$BUILD/pagoda_gpu_bench" --only sampler --model-dir "$PRESETS/qwen2-7b-instruct" --out "$OUT/sampler.md" \
    > "$OUT/sampler.log" 2>&1
  note_rc $? "sampler bench"
  grep -E "^\| GpuSampler" "$OUT/sampler.md" >> "$OUT/engine.md"
  engine_bench engine.md chinese-alpaca-2-7b Chinese-Alpaca-2-7B chinese-alpaca-2-7b chinese-llama-2 --no-prefill
  # Issue 14's table: the served decode step at batch 1..256, contexts 512 / 2048, against its roofline.
  for p in "llama-2-7b Llama-2-7B" "qwen2-7b-instruct Qwen2-7B"; do
    set -- $p
    timeout 240 "$BUILD/pagoda_gpu_bench" --only decode-table --model-dir "$PRESETS/$1" --label "$2" \
      --out "$OUT/decode-table-$1.md" > "$OUT/decode-table-$1.log" 2>&1
    note_rc $? "decode table $2"
  done
  echo
  echo "== decode step against its roofline (weights + KV bytes / copy bandwidth)"
  cat "$OUT"/decode-table-*.md 2>/dev/null | grep -E "decode step|ceiling"
  echo
  echo "== per-op time of one step (Llama-2-7B shape, bf16, CUDA events)"
  cat "$OUT/ops.md"
fi

# A peer on the same machine and shape: HF transformers (eager), PEER=0 skips.
if [ "$BENCH" = 1 ] && [ "$SINGLE" = 1 ] && [ "${PEER:-1}" = 1 ] && [ -d "$PRESETS" ]; then
  PY=python3; [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
  "$PY" scripts/bench_peer_hf.py --config "$PRESETS/llama-2-7b/config.json" > "$OUT/peer.md" 2> "$OUT/peer.log"
  note_rc $? "peer bench (HF transformers)"
fi

# Tensor parallelism (issue 7), 2+ GPUs: the all-reduce cost of one step and
# whole-engine figures at TP=1 vs TP=2 (same benches as above).
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
: > "$OUT/tp.md"
if [ "$BENCH" = 1 ] && [ "${TP:-1}" = 1 ] && [ "$GPUS" -ge 2 ] && [ -d "$PRESETS" ]; then
  for preset in llama-2-13b llama-2-7b; do
    timeout 120 "$BUILD/pagoda_gpu_bench" --only allreduce --tensor-parallel-size 2 --model-dir "$PRESETS/$preset" \
      --out "$OUT/allreduce-$preset.md" > "$OUT/allreduce-$preset.log" 2>&1
    note_rc $? "all-reduce bench $preset"
    grep -E "^\| NCCL|FAILED" "$OUT/allreduce-$preset.md" >> "$OUT/tp.md"
  done
  engine_bench tp.md llama-2-13b-tp1 Llama-2-13B llama-2-13b llama2 --tensor-parallel-size 1 --no-prefill
  engine_bench tp.md llama-2-13b-tp2 Llama-2-13B llama-2-13b llama2 --tensor-parallel-size 2 --no-prefill
  engine_bench tp.md llama-2-7b-tp2 Llama-2-7B llama-2-7b llama2 --tensor-parallel-size 2 --no-prefill
  echo
  echo "== tensor parallelism (2 GPUs)"
  cat "$OUT/tp.md"
fi

E2E_RC=0
if [ "${E2E:-1}" = 1 ]; then
  echo
  echo "== end to end (pagoda binary on CUDA)"
  BUILD_DIR="$BUILD" PAGODA_SHARED_DIR="$SHARED" OUT="$OUT" bash scripts/gpu_e2e.sh
  E2E_RC=$?
fi
if [ "$BENCH" = 1 ]; then
  echo
  echo "== summary (tests rc=$TEST_RC, e2e rc=$E2E_RC, benches rc=$BENCH_RC)"
  echo "| benchmark | ms | figure | note |"
  echo "|---|---:|---:|---|"
  grep -E "ceiling:|batch 1, CUDA graph|batch 1, ctx|prefill attn 8 x 2048, 32/32 heads D128 bf16 \|" "$OUT/bench.md" 2>/dev/null
  cat "$OUT/engine.md"
  cat "$OUT/tp.md"
  grep -E "^\| generate|FAIL" "$OUT/e2e.md" 2>/dev/null
  grep -E "^\| HF" "$OUT/peer.md" 2>/dev/null
fi
# Everything under one archive too (the device tool returns a few files only).
[ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
[ "$TEST_RC" = 0 ] && [ "$E2E_RC" = 0 ] && [ "$BENCH_RC" = 0 ]
