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
                         the reference's ids instead, so its row checks the
                         generation only (the row says so).
Each case is one row; an HTTP error or a bad stream (e.g. a chunk that is not
valid UTF-8) is a FAIL row with the reason, and the other cases go on.
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
    """Returns (joined text, token ids, non-empty text chunks, last finish_reason, saw [DONE])."""
    body = dict(body, stream=True)
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    texts, ids, finish, done = [], [], None, False
    with urllib.request.urlopen(req, timeout=180) as r:
        for raw in r:
            line = raw.decode("utf-8").rstrip("\r\n")  # strict: a split character raises here
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
                ids += ch.get("token_ids") or []
                finish = ch.get("finish_reason") or finish
    return "".join(texts), ids, sum(1 for t in texts if t), finish, done


failed = False


def row(name, ok, detail):
    global failed
    failed |= not ok
    print(f"| {name} | {'PASS' if ok else 'FAIL'} ({detail}) |", flush=True)


def check_case(base, label, endpoint, body, want_prompt, want_greedy, n_tokens, sent_ids=False):
    try:
        check_case_or_raise(base, label, endpoint, body, want_prompt, want_greedy, n_tokens, sent_ids)
    except Exception as e:  # HTTP errors, bad UTF-8 in a chunk, bad JSON: one FAIL row, the rest go on
        row(label, False, f"{type(e).__name__}: {e}")


def check_case_or_raise(base, label, endpoint, body, want_prompt, want_greedy, n_tokens, sent_ids):
    body = dict(body, temperature=0, max_tokens=n_tokens, ignore_eos=True, return_token_ids=True)
    r = post(base + endpoint, body)
    if want_greedy is None:
        # Prefix caching: the first request computes the prompt's full blocks,
        # later ones read them; in bf16 the two paths round differently and
        # dummy weights' logits are near ties, so stream == non-stream is
        # checked between requests that both read the cache. (The fp32 cases
        # match HF's greedy ids whether or not they hit the cache.)
        r = post(base + endpoint, body)
    ch = r["choices"][0]
    text = ch["text"] if "text" in ch else ch["message"]["content"]
    problems = []
    if not sent_ids:  # a text prompt: our tokenization against the reference's
        if r["usage"]["prompt_tokens"] != len(want_prompt):
            problems.append(f"prompt_tokens {r['usage']['prompt_tokens']} != {len(want_prompt)}")
        if ch.get("prompt_token_ids") != want_prompt:
            problems.append("prompt ids differ")
    if r["usage"]["completion_tokens"] != n_tokens:
        problems.append(f"completion_tokens {r['usage']['completion_tokens']} != {n_tokens}")
    if ch.get("finish_reason") != "length":
        problems.append(f"finish_reason {ch.get('finish_reason')!r}")
    got = ch.get("token_ids") or []
    if want_greedy is not None and got != want_greedy:
        first = next((i for i, (a, b) in enumerate(zip(got, want_greedy)) if a != b), min(len(got), len(want_greedy)))
        problems.append(f"greedy ids differ from token {first}")
    joined, sids, chunks, finish, done = stream(base + endpoint, body)
    if joined != text:
        problems.append("streamed text != non-streamed")
    if sids != got:
        problems.append("streamed token ids != non-streamed")
    if finish != "length":
        problems.append(f"streamed finish_reason {finish!r}")
    if not done:
        problems.append("no [DONE]")
    what = "greedy ids == HF" if want_greedy is not None else f"{n_tokens} tokens"
    prompt = (f"prompt sent as the reference's {len(want_prompt)} ids (tokenizer tie)" if sent_ids
              else f"{len(want_prompt)} prompt tokens exact")
    row(label, not problems, "; ".join(problems) or
        f"{prompt}, {what}, streamed ids and text == non-streamed ({chunks} text chunks)")


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
            as_ids = c["prompt"] in a.ids_prompt
            prompt = c["prompt_ids"] if as_ids else c["prompt"]
            greedy = None if a.shape else c["greedy_ids"]
            check_case(a.url, f"{a.label} completion {json.dumps(c['prompt'], ensure_ascii=False)}",
                       "/v1/completions", {"prompt": prompt}, c["prompt_ids"], greedy,
                       32 if a.shape else len(c["greedy_ids"]), as_ids)
    if a.encodings:
        cases = json.load(open(a.encodings))[a.tokenizer]["cases"]
        for c in cases[:4]:
            check_case(a.url, f"{a.label} completion {json.dumps(c['text'][:24], ensure_ascii=False)}",
                       "/v1/completions", {"prompt": c["text"]}, [a.bos] + c["ids"], None, 32)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
