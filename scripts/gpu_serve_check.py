#!/usr/bin/env python3
"""Checks a running `pagoda serve` over HTTP (standard library only: the GPU
machine has no extra packages), one markdown row per check on stdout; exit 1
when any check fails. Called by scripts/gpu_e2e.sh.

  --reference REF.json   HF transformers' reference.json of a tiny-random
                         model (../shared/models/*/reference.json): every chat
                         and completion case at temperature 0 must give the
                         reference's prompt ids and greedy ids, and streaming
                         must give the non-streamed text. With --shape the
                         weights are dummy (a 7B shape with the reference's
                         tokenizer): prompt ids are still exact, and the
                         generation is checked for length and stream ==
                         non-stream, not for content.
  --encodings ENC.json --tokenizer NAME
                         tokenizer_encodings.json: each case's text as a
                         completion prompt gives BOS + the reference's ids
                         (sentencepiece), streamed == non-streamed.
  --ids-prompt TEXT      a completion case whose text the reference's
                         tokenizer splits differently from sentencepiece (a
                         score tie, see serve_chinese_llama_test.cpp): sent as
                         the reference's ids instead.
"""
import argparse
import json
import sys
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=180) as r:
        return json.loads(r.read())


def stream(url, body):
    """Returns (joined text, number of chunks, saw [DONE])."""
    body = dict(body, stream=True)
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    texts, done = [], False
    with urllib.request.urlopen(req, timeout=180) as r:
        for raw in r:
            line = raw.decode("utf-8").rstrip("\r\n")  # strict: a split character would raise here
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            for ch in json.loads(data).get("choices", []):
                t = ch.get("text")
                if t is None:
                    t = ch.get("delta", {}).get("content") or ""
                texts.append(t)
    return "".join(texts), len(texts), done


rows, failed = [], False


def row(name, ok, detail):
    global failed
    failed |= not ok
    rows.append(f"| {name} | {'PASS' if ok else 'FAIL'} ({detail}) |")


def check_case(base, label, endpoint, body, want_prompt, want_greedy, n_tokens):
    body = dict(body, temperature=0, max_tokens=n_tokens, ignore_eos=True, return_token_ids=True)
    r = post(base + endpoint, body)
    ch = r["choices"][0]
    text = ch["text"] if "text" in ch else ch["message"]["content"]
    problems = []
    if r["usage"]["prompt_tokens"] != len(want_prompt):
        problems.append(f"prompt_tokens {r['usage']['prompt_tokens']} != {len(want_prompt)}")
    if ch.get("prompt_token_ids") != want_prompt:
        problems.append("prompt ids differ")
    if r["usage"]["completion_tokens"] != n_tokens:
        problems.append(f"completion_tokens {r['usage']['completion_tokens']} != {n_tokens}")
    if want_greedy is not None and ch.get("token_ids") != want_greedy:
        got = ch.get("token_ids") or []
        first = next((i for i, (a, b) in enumerate(zip(got, want_greedy)) if a != b), min(len(got), len(want_greedy)))
        problems.append(f"greedy ids differ from token {first}")
    joined, chunks, done = stream(base + endpoint, body)
    if joined != text:
        problems.append("streamed text != non-streamed")
    if not done:
        problems.append("no [DONE]")
    what = "greedy ids == HF" if want_greedy is not None else f"{n_tokens} tokens"
    row(label, not problems, "; ".join(problems) or
        f"{len(want_prompt)} prompt tokens exact, {what}, {chunks} streamed chunks == text")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--shape", action="store_true")
    ap.add_argument("--encodings")
    ap.add_argument("--tokenizer")
    ap.add_argument("--bos", type=int, default=1)
    ap.add_argument("--ids-prompt", action="append", default=[])
    a = ap.parse_args()
    if a.reference:
        ref = json.load(open(a.reference))
        for c in ref["chat"]:
            greedy = None if a.shape else c["greedy_ids"]
            check_case(a.url, f"{a.label} chat '{c['name']}'", "/v1/chat/completions", {"messages": c["messages"]},
                       c["prompt_ids"], greedy, 32 if a.shape else len(c["greedy_ids"]))
        for c in ref["completion"]:
            prompt = c["prompt_ids"] if c["prompt"] in a.ids_prompt else c["prompt"]
            greedy = None if a.shape else c["greedy_ids"]
            check_case(a.url, f"{a.label} completion {json.dumps(c['prompt'], ensure_ascii=False)}",
                       "/v1/completions", {"prompt": prompt}, c["prompt_ids"], greedy,
                       32 if a.shape else len(c["greedy_ids"]))
    if a.encodings:
        cases = json.load(open(a.encodings))[a.tokenizer]["cases"]
        for c in cases[:4]:
            check_case(a.url, f"{a.label} completion {json.dumps(c['text'][:24], ensure_ascii=False)}",
                       "/v1/completions", {"prompt": c["text"]}, [a.bos] + c["ids"], None, 32)
    print("\n".join(rows))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
