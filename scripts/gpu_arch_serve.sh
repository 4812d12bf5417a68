#!/usr/bin/env bash
# Issue 18's tiny architectures served on CUDA by the pagoda binary (fp32, CUDA graphs): each answers
# its reference.json prompts (token ids) with HF transformers' 24 greedy ids, non-streamed and
# streamed (the stream's token ids joined, ending with [DONE]). The same check as the integration test
# ServeArchCuda.*, without the test binary (which the device image's GCC 13 does not build).
#   BUILD_DIR=build-gpu PAGODA_SHARED_DIR=... bash scripts/gpu_arch_serve.sh   (exit 1 on a mismatch)
set -u
export PAGODA_SHARED_DIR=${PAGODA_SHARED_DIR:-$PWD/../shared}
export BUILD=${BUILD_DIR:-build-gpu}
python3 - <<'PY' 2>&1
import json, os, subprocess, time, urllib.request, re
A = os.environ["PAGODA_SHARED_DIR"] + "/models/arch/"
names = ["tiny-random-mistral","tiny-random-gemma2","tiny-random-mixtral","tiny-random-bloom","tiny-random-gpt2",
         "tiny-random-qwen3","tiny-random-qwen2-moe","tiny-random-gpt-neox","tiny-random-falcon","tiny-random-gptj"]
def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)
allok = True
for n in names:
    p = subprocess.Popen([os.environ["BUILD"] + "/pagoda","serve",A+n,"--device","cuda","--dtype","float32","--served-model-name","m",
                          "--max-model-len","512","--host","127.0.0.1","--port","0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = None
    for line in p.stdout:
        m = re.search(r"http://[0-9.:]+", line)
        if "listening" in line and m: url = m.group(0); break
    ref = json.load(open(A+n+"/reference.json"))
    res = []
    for c in ref["cases"]:
        body = {"model":"m","prompt":c["prompt_ids"],"max_tokens":24,"temperature":0,"ignore_eos":True,"return_token_ids":True}
        j = json.load(post(url+"/v1/completions", body))
        ids = j["choices"][0]["token_ids"]
        s = post(url+"/v1/completions", dict(body, stream=True)).read().decode()
        sids = []; done = "[DONE]" in s
        for l in s.splitlines():
            if l.startswith("data: {"):
                ch = json.loads(l[6:])["choices"]
                if ch and ch[0].get("token_ids"): sids += ch[0]["token_ids"]
        res.append((len(c["prompt_ids"]), ids == c["greedy_ids"], sids == c["greedy_ids"] and done))
    p.terminate(); p.wait(timeout=30)
    ok = all(a and b for _, a, b in res); allok &= ok
    print(n, "PASS" if ok else "FAIL", res, flush=True)
print("ALL PASS" if allok else "SOME FAILED")
raise SystemExit(0 if allok else 1)
PY
