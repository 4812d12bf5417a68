#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/seed-* (run from
anywhere; re-run after editing). Bodies are taken from the unit and
integration tests' requests; crash inputs found by fuzzing live beside them
as crash-* files and are not touched here."""
import json, os, struct

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)
    # request_json: the same body against the Qwen2 (BPE) model (bit 7).
    if target == "request_json" and not name.startswith("qwen2-"):
        write(target, "qwen2-" + name, bytes([data[0] | 0x80]) + data[1:])


completions = [
    '{"model": "stories", "prompt": "Hi"}',
    '{"prompt": [5, 6, 7], "max_tokens": 4}',
    '{"prompt": [[5, 6], [7]], "n": 2, "best_of": 2}',
    '{"prompt": ["A", "B"], "echo": true, "logprobs": 3}',
    '{"prompt": "x", "stop": ["END", "\\n"], "temperature": 0, "top_k": -1, "seed": 7}',
    '{"prompt": "x", "top_p": 1e-300, "repetition_penalty": 1e-300, "max_tokens": 1e999}',
    '{"prompt": "x", "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}}',
    '{"prompt": "x", "logit_bias": {"5": -100}, "bad_words": ["a"], "truncate_prompt_tokens": 3}',
    '{"prompt": "x", "max_tokens": 18446744073709551616, "prompt_logprobs": 2}',
    '{"prompt": "x",',
]
chats = [
    '{"messages": [{"role": "user", "content": "Hello"}]}',
    '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "max_completion_tokens": 5}',
    '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial"}], "continue_final_message": true, "add_generation_prompt": false}',
    '{"messages": [{"role": "user", "content": "q"}], "chat_template": "{% for m in messages %}{{ m.content | upper }}{% endfor %}", "chat_template_kwargs": {"enable_thinking": false}, "documents": [{"title": "a", "text": "b"}]}',
    '{"messages": [{"role": "user", "content": "q"}], "logprobs": true, "top_logprobs": 2, "n": 2, "stream": true}',
    '{"messages": [{"role": "user", "content": null}], "tools": [], "response_format": {"type": "text"}}',
]
generates = [
    '{"prompt": "Once upon a time", "max_tokens": 8, "stream": false}',
    '{"prompt": "x", "stream": true, "temperature": 0.5, "n": 2}',
]
tokenizes = [
    '{"prompt": "Hello world", "add_special_tokens": true}',
    '{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}',
    '{"prompt": "x", "return_token_strs": true}',
]
detokenizes = [
    '{"tokens": [1, 5, 6, 7]}',
    '{"tokens": [300, -1]}',
    '{"tokens": []}',
]
for i, b in enumerate(completions):
    write("request_json", f"completion-{i}", b"\x00" + b.encode())
for i, b in enumerate(chats):
    write("request_json", f"chat-{i}", b"\x01" + b.encode())
for i, b in enumerate(generates):
    write("request_json", f"generate-{i}", b"\x02" + b.encode())
for i, b in enumerate(tokenizes):
    write("request_json", f"tokenize-{i}", b"\x03" + b.encode())
for i, b in enumerate(detokenizes):
    write("request_json", f"detokenize-{i}", b"\x04" + b.encode())

ws = [
    '{"type":"chat","id":"a","messages":[{"role":"user","content":"hi"}],"resumable":false,"stream":false}',
    '{"type":"completion","id":"b","prompt":"x","max_tokens":3,"logprobs":1}',
    '{"type":"completion","id":"b","prompt":["x","y"],"n":2}',
    '{"type":"cancel","id":"b"}',
    '{"type":"resume","id":"b","after":7}',
    '{"type":"subscribe_stats","interval_ms":250}',
    '{"type":"unsubscribe_stats"}',
    '{"type":"chat","id":7}',
    '{"type":"completion","id":"a","prompt":"x","prompt":"y"}',
    '{"type":"completion","id":"a","prompt":"x","x":1e999}',
]
for i, b in enumerate(ws):
    write("ws_message", str(i), b)

# json_fast_path: every request and message body above, and the corners the
# fast path declines or converts (numbers, escapes, UTF-8, nesting).
corners = [
    '[0,-0,1,-1,18446744073709551615,18446744073709551616,-9223372036854775809,1.5e-3,1E+2,1e-400,4.9e-324]',
    '["\\u00e9\\ud83d\\ude00\\"\\\\\\/\\b\\f\\n\\r\\t","\\ud800","caf\u00e9 \u20ac \U0001F600"]',
    '\ufeff{"a":[[[[{"b":null}]]]],"c":true,"d":false}',
]
for i, b in enumerate(completions + chats + ws + corners):
    write("json_fast_path", str(i), b)


def http(method, target, body=None, headers=()):
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost"] + list(headers)
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body.encode())}"]
    return "\r\n".join(lines) + "\r\n\r\n" + (body or "")


auth = "Authorization: Bearer k"
reqs = {
    "health": http("GET", "/health"),
    "models": http("GET", "/v1/models", headers=[auth]),
    "metrics": http("GET", "/metrics"),
    "completion": http("POST", "/v1/completions", completions[0], [auth]),
    "completion-noauth": http("POST", "/v1/completions", completions[1]),
    "chat": http("POST", "/v1/chat/completions", chats[0], [auth, "Origin: http://a.example"]),
    "chat-template": http("POST", "/v1/chat/completions", chats[3], [auth]),
    "generate": http("POST", "/generate", generates[0], [auth]),
    "tokenize": http("POST", "/tokenize", tokenizes[0], [auth]),
    "detokenize": http("POST", "/detokenize", detokenizes[0], [auth]),
    "preflight": http("OPTIONS", "/v1/completions", None,
                      ["Origin: http://a.example", "Access-Control-Request-Method: POST",
                       "Access-Control-Request-Headers: authorization, content-type"]),
    "ws-upgrade": http("GET", "/v1/ws?api_key=k", None,
                       ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]),
    "wrong-method": http("GET", "/v1/completions", None, [auth]),
    "not-found": http("GET", "/nope?x=1", None, [auth]),
    "pipelined": http("GET", "/health") + http("POST", "/tokenize", tokenizes[1], [auth]) + http("GET", "/version"),
    "chunked": "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
               "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n11\r\nmpt\": \"Hi\", \"n\":2}\r\n0\r\n\r\n",
    "http10": "GET /health HTTP/1.0\r\n\r\n",
}
for name, r in reqs.items():
    write("http_session", name, r)

texts = {
    "english": "Once upon a time, there was a little girl named Lily.",
    "special": "<s>[INST] hi [/INST]</s><unk> x",
    "unicode": "中文 héllo 🙂 \u200b\t\n  spaces",
    "invalid-utf8": b"\xff\xfe\xc3(\xe2\x82\xf0\x9f\x99",
    "empty": "",
    "qwen-special": "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
    "digits": "1234567890 3.14159 ''' \"\" --- ...",
}
for name, t in texts.items():
    data = t if isinstance(t, bytes) else t.encode()
    for tgt in ("tokenizer_sentencepiece", "tokenizer_bpe"):
        write(tgt, "text-" + name, b"\x00" + data)
ids = struct.pack("<16H", *[i * 4093 % 65536 for i in range(16)])
for tgt in ("tokenizer_sentencepiece", "tokenizer_bpe"):
    write(tgt, "ids", b"\x01" + ids)
    write(tgt, "ids-skip", b"\x03" + ids)

templates = {
    "llama2": "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] | trim }} [/INST]"
              "{% else %} {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}",
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "namespace": "{%- set ns = namespace(n=0) -%}{%- for m in messages -%}{%- set ns.n = ns.n + 1 -%}"
                 "{{ loop.index }}/{{ loop.length }} {{ m.role | capitalize }}: {{ m.content[:10] }}{% if not loop.last %}, {% endif %}"
                 "{%- endfor -%}{{ ns.n }}{{ tools | tojson }}",
    "macro": "{% macro render(m, depth=0) %}{{ m.role ~ ':' ~ m.content | replace('a', 'b') }}{% endmacro %}"
             "{% for m in messages | reverse %}{{ render(m) }}{% endfor %}{{ messages | length }}{{ '%d' % 3 }}",
    "raise": "{% if messages[0]['role'] != 'system' %}{{ raise_exception('first must be system') }}{% endif %}",
    "filters": "{{ messages | map(attribute='role') | join(',') }}{{ (messages | selectattr('role', 'equalto', 'user') | list | length) }}"
               "{{ 'abc'.split('b') }}{{ 'x'.startswith('x') }}{{ range(3) | list }}{{ {'a': 1}.items() | list }}"
               "{{ 'Hi' * 3 }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ none is none }}{{ 'a' in 'abc' }}{{ messages[-1].content.strip() }}",
    "whitespace": "{%- for m in messages %}\n  {%- if m.role == 'user' %}\n    U{{ m.content }}\n  {%- endif %}\n{%- endfor %}\n{# comment #}{% raw %}{{ x }}{% endraw %}",
}
msgs = json.dumps([{"role": "system", "content": "You are nice."}, {"role": "user", "content": "Hello"},
                   {"role": "assistant", "content": "Hi!", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}])
for name, t in templates.items():
    write("chat_template", name, t.encode() + b"\x00" + msgs.encode())

def safetensors(tensors, metadata=None, data=b""):
    header = dict(tensors)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data

write("safetensors", "one", safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}},
                                         {"format": "pt"}, bytes(range(16))))
write("safetensors", "mixed", safetensors({
    "a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
    "b": {"dtype": "F16", "shape": [], "data_offsets": [6, 8]},
    "c": {"dtype": "I8", "shape": [2, 4], "data_offsets": [8, 16]},
}, None, bytes(16)))
write("safetensors", "bad-offsets", safetensors({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 4]}}, None, bytes(8)))
write("safetensors", "empty-header", struct.pack("<Q", 2) + b"{}")

cfgs = [os.path.join(root, "models/stories260K/config.json")]
shared = os.path.join(os.path.dirname(root), "shared", "models")
for m in ("tiny-random-qwen2-chat", "tiny-random-chinese-llama"):
    p = os.path.join(shared, m, "config.json")
    if os.path.exists(p):
        cfgs.append(p)
for i, p in enumerate(cfgs):
    write("config_json", f"config-{i}", b"\x00" + open(p, "rb").read())
write("config_json", "config-rope", b"\x00" + json.dumps({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 128,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64}, "eos_token_id": [1, 2], "tie_word_embeddings": True}).encode())
write("config_json", "generation", b"\x01" + open(os.path.join(root, "models/stories260K/generation_config.json"), "rb").read())
write("config_json", "generation-list", b"\x01" + b'{"eos_token_id": [1, 2], "temperature": 0.7, "top_k": 20, "max_length": 1e999}')
write("config_json", "tokenizer", b"\x02" + open(os.path.join(root, "models/stories260K/tokenizer_config.json"), "rb").read())
write("config_json", "tokenizer-templates", b"\x02" + json.dumps({
    "chat_template": [{"name": "default", "template": "{{ x }}"}, {"name": "tool_use", "template": "y"}],
    "bos_token": {"content": "<s>", "__type": "AddedToken"}, "add_bos_token": False}).encode())
