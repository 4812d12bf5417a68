#!/usr/bin/env python3
"""Reference renderings of offline LLM.chat(messages, tools=...) with the
Qwen2.5 chat template.

Writes tests/data/offline_tools_reference.json: for each case, the messages
and tools as a script hands them to vLLM's LLM.chat, and the text the
template renders.

How: the renderer of tests/data/qwen25_tools_reference.py (python3-jinja2
set up as transformers' apply_chat_template), imported from it. vLLM's
LLM.chat passes `tools` to apply_hf_chat_template as given (no pydantic
model, so no fields added or reordered, unlike the server's
ChatCompletionToolsParam.model_dump()), and each dict keeps the order it was
written in, as Python dicts do; the messages go through vLLM's
parse_chat_messages, which turns tool-call arguments given as JSON text into
dicts (in the text's key order) and keeps dict arguments as given. The
tools and arguments here are written out of sorted order on purpose, so a
renderer that sorts keys renders something else.

Run from the repository root: python3 tests/data/offline_tools_reference.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qwen25_tools_reference import TEMPLATE, environment, for_transformers  # noqa: E402

import jinja2  # noqa: E402

# Keys in an order json's sorting would change: "type" after "function",
# "required" before "properties", a field the server's model would not know.
WEATHER = {
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "required": ["city"],
            "properties": {
                "unit": {"enum": ["celsius", "fahrenheit"], "type": "string"},
                "city": {"type": "string", "description": "The city, e.g. Paris"},
            },
        },
        "description": "Get the current weather in a city",
    },
    "type": "function",
    "x-owner": "tests",
}
TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"properties": {"zone": {"type": "string"}},
                                                    "type": "object"}},
}

# (name, messages, tools)
CASES = [
    ("tools_user", [{"role": "user", "content": "What's the weather in Paris?"}], [WEATHER]),
    ("call_arguments_as_text_and_as_dict",
     [{"role": "user", "content": "Weather and time in Zürich?"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "c1", "type": "function",
           "function": {"name": "get_weather",
                        "arguments": "{\"unit\": \"celsius\", \"city\": \"Z\u00fcrich\"}"}},
          {"id": "c2", "type": "function",
           "function": {"name": "get_time", "arguments": {"zone": "Europe/Zurich", "dst": True}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
      {"role": "tool", "tool_call_id": "c2", "content": "14:05"}],
     [WEATHER, TIME]),
    ("empty_tools_list", [{"role": "user", "content": "Hi"}], []),
]


def main():
    with open(TEMPLATE, encoding="utf-8") as f:
        source = f.read()
    template = environment().from_string(source)
    cases = []
    for name, messages, tools in CASES:
        rendered = template.render(messages=for_transformers(messages), tools=tools, documents=None,
                                   add_generation_prompt=True, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
        cases.append({"name": name, "messages": messages, "tools": tools, "rendered": rendered})
    out = {
        "renderer": f"python3-jinja2 {jinja2.__version__} as transformers' apply_chat_template; "
                    "tests/data/offline_tools_reference.py",
        "template": "shared/chat_templates/qwen2.5-instruct.jinja",
        "template_source": source,
        "cases": cases,
    }
    with open(os.path.join(HERE, "offline_tools_reference.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
