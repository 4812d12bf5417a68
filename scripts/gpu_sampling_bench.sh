#!/usr/bin/env bash
# Issue 11's measurement through the whole stack: `pagoda generate` on the
# Qwen2-7B-Instruct shape (preset config, dummy bf16 weights, the Qwen2
# tokenizer), N prompts x 128/128 ignore_eos, greedy against the seeds'
# settings (temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05).
# Rows go to $OUT/sampling.md. Needs BUILD_DIR/pagoda and PAGODA_SHARED_DIR.
set -u -o pipefail
OUT=${OUT:-/tmp/pagoda_gpu_out}
BUILD=${BUILD_DIR:-build-gpu}
SHARED=${PAGODA_SHARED_DIR:-$PWD/../shared}
N=${N:-1000}
M=/tmp/qwen2-7b-dummy
mkdir -p "$M" "$OUT"
cp "$SHARED/models/presets/qwen2-7b-instruct/config.json" "$SHARED"/tokenizers/qwen2/* "$M/"
# 128-token prompts: repeated words, a different first word per prompt.
python3 -c "
import sys
words = ['hello', 'world', 'story', 'river', 'green', 'house', 'music', 'light']
for i in range(int(sys.argv[1])):
    print(' '.join([words[i % 8]] + ['hello'] * 126))
" "$N" > /tmp/qwen2-prompts.txt
rc=0
run() {  # name, generate flags...
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$BUILD/pagoda" generate "$M" --load-format dummy --device cuda --dtype bfloat16 --prompts-file /tmp/qwen2-prompts.txt \
    --max-tokens 128 --ignore-eos --max-num-seqs 256 --max-num-batched-tokens 8192 "$@" \
    > "$OUT/gen-$name.jsonl" 2> "$OUT/gen-$name.log"
  local g=$?
  t1=$(date +%s.%N)
  python3 - "$OUT/gen-$name.jsonl" "$t0" "$t1" "$N" "$g" "$name $*" <<'PY' >> "$OUT/sampling.md" || rc=1
import json, sys
path, t0, t1, n, g, what = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rows = [json.loads(l) for l in open(path) if l.strip()]
out = sum(r.get("usage", {}).get("completion_tokens", 0) for r in rows)
print(f"| generate Qwen2-7B-Instruct shape, {n} x 128/128, {what} (rc={g}, {len(rows)} results) | "
      f"{out} output tokens in {t1 - t0:.1f} s wall incl. load: {out / (t1 - t0):.0f} output tok/s |")
sys.exit(0 if g == 0 and len(rows) == n and out == 128 * n else 1)
PY
  grep -E "throughput" "$OUT/gen-$name.log" | tail -1
}
run greedy --temperature 0
run seeds --temperature 0.7 --top-p 0.8 --top-k 20 --repetition-penalty 1.05
cat "$OUT/sampling.md"
exit $rc
