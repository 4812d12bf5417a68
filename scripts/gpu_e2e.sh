#!/usr/bin/env bash
# End to end on a GPU machine, with the real `pagoda` binary on the CUDA
# backend (called by scripts/gpu_run.sh after the kernel tests and benches):
#  1. `pagoda serve --device cuda --dtype float32` on the bundled stories260K:
#     greedy /v1/completions text equals llama2.c's reference text.
#  2. Offline throughput: `pagoda generate` with dummy Llama-2-7B weights
#     (bf16), N prompts of 128 tokens, 128 output tokens each, ignore_eos.
# Appends rows to $OUT/e2e.md. Env: BUILD_DIR, PAGODA_SHARED_DIR, OUT,
# E2E_REQUESTS (default 1000).
set -u -o pipefail
OUT=${OUT:-/tmp/pagoda_gpu_out}
SHARED=${PAGODA_SHARED_DIR:-$PWD/../shared}
BUILD=${BUILD_DIR:-build-gpu}
N=${E2E_REQUESTS:-1000}
ninja -C "$BUILD" pagoda > "$OUT/build-pagoda.log" 2>&1 || { tail -30 "$OUT/build-pagoda.log"; exit 1; }
rc=0
echo "| end-to-end check | result |" > "$OUT/e2e.md"
echo "|---|---|" >> "$OUT/e2e.md"

# 1. HTTP server on CUDA, fp32: llama2.c's greedy text.
"$BUILD/pagoda" serve --device cuda --dtype float32 --host 127.0.0.1 --port 0 \
  > "$OUT/serve.out" 2> "$OUT/serve.log" &
pid=$!
for _ in $(seq 1 300); do grep -q "Pagoda listening" "$OUT/serve.out" && break; sleep 0.1; done
url=$(grep -o "http://[0-9.:]*" "$OUT/serve.out" | head -1)
curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 252, "temperature": 0}' \
  > "$OUT/completion.json"
kill -TERM $pid; wait $pid
python3 - "$OUT/completion.json" "$SHARED/testvectors/stories260K_runc_greedy_once_upon_a_time.txt" <<'PY' >> "$OUT/e2e.md" || rc=1
import json, sys
got = "Once upon a time" + json.load(open(sys.argv[1]))["choices"][0]["text"] + "\n"
want = open(sys.argv[2]).read()
ok = got == want
print(f"| serve --device cuda --dtype float32, stories260K greedy text == llama2.c | {'PASS' if ok else 'FAIL'} ({len(got)} chars) |")
sys.exit(0 if ok else 1)
PY
grep -E "GPU blocks|KV cache|backend" "$OUT/serve.log" | head -5

# 2. Offline throughput, dummy Llama-2-7B, bf16.
M=/tmp/llama-2-7b-dummy
mkdir -p "$M"
cp "$SHARED/models/presets/llama-2-7b/config.json" "$SHARED/tokenizers/llama2/tokenizer.model" "$M/"
python3 -c "
import sys
n = int(sys.argv[1])
# BOS + 127 x '▁hello' = 128 prompt tokens with the Llama 2 tokenizer; vary the
# first word so no two prompts are identical.
words = ['hello', 'world', 'story', 'river', 'green', 'house', 'music', 'light']
for i in range(n):
    print(' '.join([words[i % 8]] + ['hello'] * 126))
" "$N" > /tmp/prompts.txt
t0=$(date +%s.%N)
"$BUILD/pagoda" generate "$M" --load-format dummy --device cuda --dtype bfloat16 \
  --prompts-file /tmp/prompts.txt --max-tokens 128 --ignore-eos --temperature 0 \
  --max-num-seqs 256 --max-num-batched-tokens 8192 > "$OUT/generate.jsonl" 2> "$OUT/generate.log"
grc=$?
t1=$(date +%s.%N)
python3 - "$OUT/generate.jsonl" "$t0" "$t1" "$N" "$grc" <<'PY' >> "$OUT/e2e.md" || rc=1
import json, sys
path, t0, t1, n, grc = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = [json.loads(l) for l in open(path) if l.strip()]
def count(r, k):
    u = r.get("usage", {})
    return u.get(k, 0)
out = sum(count(r, "completion_tokens") for r in rows)
prompt = sum(count(r, "prompt_tokens") for r in rows)
wall = t1 - t0
print(f"| generate, dummy Llama-2-7B bf16, {n} x 128/128 ignore_eos (rc={grc}, {len(rows)} results) | "
      f"{out} output + {prompt} prompt tokens in {wall:.1f} s wall incl. load: {out / wall:.0f} output tok/s |")
sys.exit(0 if grc == 0 and len(rows) == n else 1)
PY
grep -E "throughput|GPU blocks|Loaded|load" "$OUT/generate.log" | tail -6
cat "$OUT/e2e.md"
exit $rc
