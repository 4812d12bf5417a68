#!/usr/bin/env python3
"""Peer benchmark: HF transformers on the same GPU and shape as pagoda_gpu_bench.

Random bf16 weights built from a config.json alone (the shape presets in
../shared/models/presets), no tokenizer: prompts are random token ids.
Measures, with model.generate (greedy, exactly N new tokens, eager PyTorch,
dynamic KV cache; no torch.compile, which the issue's 141 tok/s figure used):
  - batch-1 decode tokens/s (128-token prompt, 128 new tokens; time of the
    128 new tokens minus the time of a 1-new-token run = decode only),
  - offline throughput: B prompts of 128 tokens, 128 new tokens each, in one
    batch (output tokens / wall time).
Prints a markdown table. Usage:
  python3 scripts/bench_peer_hf.py --config DIR/config.json [--batch 256]
"""
import argparse
import json
import time

import torch
import transformers


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--output", type=int, default=128)
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = transformers.AutoConfig.for_model(**json.load(f))
    torch.manual_seed(0)
    t0 = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    load_s = time.perf_counter() - t0
    vocab = cfg.vocab_size
    rows = []
    with torch.inference_mode():
        ids1 = torch.randint(3, vocab, (1, a.prompt), device="cuda")
        timed_generate(model, ids1, 8)  # warm-up
        t_one = min(timed_generate(model, ids1, 1) for _ in range(2))
        t_all = min(timed_generate(model, ids1, a.output) for _ in range(2))
        tps1 = (a.output - 1) / (t_all - t_one)
        rows.append(("HF transformers eager, batch-1 decode", f"{tps1:.1f} tok/s",
                     f"{a.prompt} prompt / {a.output} new, decode only"))
        idsb = torch.randint(3, vocab, (a.batch, a.prompt), device="cuda")
        timed_generate(model, idsb[:8], 4)  # warm-up
        tb = timed_generate(model, idsb, a.output)
        rows.append((f"HF transformers eager, batch {a.batch} offline", f"{a.batch * a.output / tb:.0f} output tok/s",
                     f"{a.batch} x {a.prompt}/{a.output}, one generate call, {tb:.1f} s"))
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.cuda.get_device_name()}, random-weight init {load_s:.1f} s")
    print("| peer | figure | note |")
    print("|---|---:|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
