#!/usr/bin/env python3
"""Reference renderings of chats whose message content is a list of parts.

Writes tests/data/content_format_reference.json: for each case, the chat as
an OpenAI client sends it, the content format it is rendered in, and what
Jinja2 renders (or that Jinja2 fails: "error").

The chat reaches the template as vLLM's parse_chat_messages hands it over
(vllm/entrypoints/chat_utils.py, _parse_chat_message_content): "string":
each content as the texts of its parts joined with "\\n" (null: ""),
"openai": each content as a list of {"type": "text", "text"} parts (a
string: one part; null: none), except a "tool" message's, which becomes the
joined string again when it has text parts only.

How: Debian's python3-jinja2 (3.1.x) set up as transformers'
apply_chat_template does (transformers/utils/chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[loopcontrols]), its tojson filter,
raise_exception; rendered with messages, add_generation_prompt, bos_token,
eos_token and the case's template kwargs. Templates: vLLM's examples
(tests/data/vllm_chat_templates, see its SOURCES.md) and, for the repr a
template prints of a list, a one-line template written here.

Run from the repository root: python3 tests/data/content_format_reference.py
"""
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "vllm_chat_templates")
# Prints each content as it is: a list of parts prints as Python's repr.
PRINT_TEMPLATE = ("{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
                  "{% endfor %}")


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def texts(content):
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content]


def conversation(messages, content_format):
    out = []
    for m in messages:
        m = dict(m)
        parts = texts(m.get("content"))
        if content_format == "openai" and m["role"] != "tool":
            m["content"] = [{"type": "text", "text": t} for t in parts]
        else:
            m["content"] = "\n".join(parts)
        out.append(m)
    return out


LLAMA32 = "tool_chat_template_llama3.2_json.jinja"
DATE = {"date_string": "26 Jul 2024"}
PARTS = [{"type": "text", "text": "Hello"}, {"type": "text", "text": " world "}]

# (name, template file or None for PRINT_TEMPLATE, format, messages,
#  add_generation_prompt, bos_token, eos_token, kwargs)
CASES = [
    ("llama32_openai_parts", LLAMA32, "openai",
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PARTS}],
     True, "<|begin_of_text|>", "<|eot_id|>", DATE),
    ("llama32_openai_string_content", LLAMA32, "openai",
     [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": None},
      {"role": "user", "content": [{"type": "text", "text": "Again"}]}],
     True, "<|begin_of_text|>", "<|eot_id|>", DATE),
    ("llama32_string_parts", LLAMA32, "string",
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PARTS}],
     True, "<|begin_of_text|>", "<|eot_id|>", DATE),
    ("llama32_openai_tool_result_parts", LLAMA32, "openai",
     [{"role": "user", "content": "Weather?"},
      {"role": "tool", "tool_call_id": "c1",
       "content": [{"type": "text", "text": "18 C"}, {"type": "text", "text": "sunny"}]}],
     True, "<|begin_of_text|>", "<|eot_id|>", DATE),
    ("dse_qwen2_vl_openai_parts", "template_dse_qwen2_vl.jinja", "openai",
     [{"role": "user", "content": PARTS}], True, "", "<|endoftext|>", {}),
    ("vlm2vec_phi3v_openai_parts", "template_vlm2vec_phi3v.jinja", "openai",
     [{"role": "user", "content": PARTS}], False, "", "", {}),
    ("chatml_string_parts", "template_chatml.jinja", "string",
     [{"role": "user", "content": PARTS}], True, "", "", {}),
    ("chatml_openai_parts", "template_chatml.jinja", "openai",
     [{"role": "user", "content": PARTS}], True, "", "", {}),
    ("print_openai_parts", None, "openai",
     [{"role": "user", "content": PARTS}, {"role": "assistant", "content": "It's \"me\""}],
     False, "", "", {}),
    ("print_string_parts", None, "string",
     [{"role": "user", "content": PARTS}], False, "", "", {}),
]


def main():
    env = environment()
    out = []
    for name, template, fmt, messages, agp, bos, eos, kwargs in CASES:
        source = PRINT_TEMPLATE
        if template:
            with open(os.path.join(TEMPLATES, template), encoding="utf-8") as f:
                source = f.read()
        case = {"name": name, "template": template, "content_format": fmt, "messages": messages,
                "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos,
                "kwargs": kwargs}
        try:
            case["rendered"] = env.from_string(source).render(
                messages=conversation(messages, fmt), add_generation_prompt=agp, bos_token=bos,
                eos_token=eos, **kwargs)
        except (TypeError, jinja2.exceptions.TemplateError) as e:
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    with open(os.path.join(HERE, "content_format_reference.json"), "w", encoding="utf-8") as f:
        json.dump({"print_template": PRINT_TEMPLATE, "cases": out}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
