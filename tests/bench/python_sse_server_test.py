#!/usr/bin/env python3
"""pagoda-bench against a second, independent OpenAI-compatible server: a
few lines of Python http.server streaming SSE (CRLF line ends, a comment
line, no usage chunk, so the client counts tokens with the tokenizer; the
body ends when the connection closes). The server fails some requests on
purpose: max_tokens 13 gets HTTP 500, max_tokens 11 is cut off mid-stream.
Checks the counts, the per-request timings against the server's own, and
exit status 0.

Usage: python_sse_server_test.py PAGODA_BENCH_BIN MODEL_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEEN = {}  # response id -> {"max_tokens", "ttft", "e2e", "outcome"} (server clock, seconds;
#           from reading the request to just before writing the chunk)
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends at close

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        t0 = time.monotonic()
        n = int(body["max_tokens"])
        chat = self.path.endswith("/chat/completions")
        with LOCK:
            rid = "cmpl-fake-%d" % len(SEEN)
            SEEN[rid] = {"max_tokens": n, "outcome": "ok"}
        if n == 13:
            SEEN[rid]["outcome"] = "500"
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "boom"}}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b": a comment line the client skips\r\n\r\n")
        for i in range(n):
            if n == 11 and i == 5:
                SEEN[rid]["outcome"] = "cut"
                self.wfile.flush()
                self.connection.shutdown(2)  # the connection drops mid-stream
                return
            if chat:
                delta = {"role": "assistant", "content": " la"} if i == 0 else {"content": " la"}
                chunk = {"id": rid, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
            else:
                chunk = {"id": rid, "object": "text_completion", "choices": [{"index": 0, "text": " la"}]}
            # The clock is read before the write: the chunk cannot reach the
            # client before then, while a reading after the write can come
            # late (this thread waits for the GIL) and pass the client's.
            t = time.monotonic()
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")
            self.wfile.flush()
            if i == 0:
                SEEN[rid]["ttft"] = t - t0
            SEEN[rid]["e2e"] = t - t0
            time.sleep(0.002)
        self.wfile.write(b"data: [DONE]\r\n\r\n")


class Server(ThreadingHTTPServer):
    request_queue_size = 256  # listen backlog: 5 would drop SYNs in a burst (a 1 s retry)


def run(bench, model_dir, backend, out_path):
    cmd = [bench, "serve", "--backend", backend, "--base-url", "http://127.0.0.1:%d" % PORT,
           "--model", "fake-model", "--tokenizer", model_dir, "--dataset-name", "random",
           "--random-input-len", "16", "--random-output-len", "10", "--random-range-ratio", "0.3",
           "--num-prompts", "40", "--request-rate", "200", "--seed", "3", "--disable-tqdm",
           "--skip-initial-test", "--result-filename", out_path]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    print(p.stdout)
    assert p.returncode == 0, (p.returncode, p.stderr)
    return p.stdout, json.load(open(out_path))


def check(stdout, result, before):
    new = {k: v for k, v in SEEN.items() if k not in before}
    failed_on_purpose = sum(1 for v in new.values() if v["outcome"] != "ok")
    assert len(new) == 40, len(new)
    assert 0 < failed_on_purpose < 40, failed_on_purpose
    assert result["completed"] == 40 - failed_on_purpose, (result["completed"], failed_on_purpose)
    assert result["failed"] == failed_on_purpose
    assert "Failed requests:                         %d" % failed_on_purpose in stdout
    worst = 0.0
    for r in result["requests"]:
        if not r["success"]:
            assert r["error"], r
            continue
        s = new[r["request_id"]]
        assert s["outcome"] == "ok"
        assert len(r["itl"]) == s["max_tokens"] - 1, (r, s)  # one chunk per token
        assert r["output_len"] > 0  # counted by the tokenizer: no usage chunk
        # The client's span contains the server's: it starts before the
        # server reads the request and ends after it writes the last chunk.
        for client, server in ((r["ttft"], s["ttft"]), (r["latency"], s["e2e"])):
            assert client >= server, (r, s)
            worst = max(worst, client - server)
    # Same machine, loopback: what lies between is the Python server's accept
    # and thread start, a few ms when idle; bounded loosely so a busy CI
    # machine passes, while a 1 s connect retry (a dropped SYN) does not.
    print("worst client - server span: %.1f ms" % (worst * 1e3))
    assert worst < 0.250, worst
    errors = [r["error"] for r in result["requests"] if not r["success"]]
    assert any(e.startswith("HTTP 500") for e in errors), errors
    assert any(not e.startswith("HTTP 500") for e in errors), errors  # the cut stream


if __name__ == "__main__":
    bench, model_dir = sys.argv[1], sys.argv[2]
    server = Server(("127.0.0.1", 0), Handler)
    PORT = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("openai", "openai-chat"):
            before = dict(SEEN)
            stdout, result = run(bench, model_dir, backend, os.path.join(tmp, backend + ".json"))
            check(stdout, result, before)
            print("%s: OK" % backend)
    server.shutdown()
