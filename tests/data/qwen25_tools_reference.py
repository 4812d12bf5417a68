#!/usr/bin/env python3
"""Reference renderings of the Qwen2.5 chat template with tools.

Writes tests/data/qwen25_tools_reference.json: for each case, the chat as an
OpenAI client sends it (tool-call arguments as JSON text) and as HF
transformers takes it (arguments as a dict: vLLM parses the text before it
calls apply_chat_template), and the text the template renders.

How: Debian's python3-jinja2 (3.1.x) set up as transformers 4.4x's
apply_chat_template does (transformers/utils/chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[loopcontrols]), its tojson filter
(json.dumps(x, ensure_ascii=False, indent=None, separators=None,
sort_keys=False)), raise_exception and strftime_now globals, rendered with
messages, tools, documents=None, add_generation_prompt and the tokenizer's
special tokens (Qwen2.5: no bos_token, eos_token "<|im_end|>"). The tools
are given as vLLM hands them to the template (ChatCompletionToolsParam
.model_dump(): "type", then "function" with "name", "description",
"parameters"), each dict in the order written here. transformers itself is
not installed here; this is its rendering code path, not its package.

Run from the repository root: python3 tests/data/qwen25_tools_reference.py
(the template is ../shared/chat_templates/qwen2.5-instruct.jinja, the one
in shared/models/tiny-random-qwen2-chat/tokenizer_config.json).
"""
import copy
import json
import os
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "..", "..", "shared", "chat_templates", "qwen2.5-instruct.jinja")


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Die aktuelle Uhrzeit in einer Zeitzone (z. B. Zürich, 東京)",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}},
            "required": ["zone"],
        },
    },
}

# (name, messages as an OpenAI client sends them, tools, add_generation_prompt)
CASES = [
    ("tools_user", [{"role": "user", "content": "What's the weather in Paris?"}], [WEATHER], True),
    ("tools_system_user",
     [{"role": "system", "content": "You are a weather bot."},
      {"role": "user", "content": "Weather and time in Zürich?"}],
     [WEATHER, TIME], True),
    ("tool_round_trip",
     [{"role": "system", "content": "You are a weather bot."},
      {"role": "user", "content": "Weather and time in Zürich?"},
      {"role": "assistant", "content": None, "tool_calls": [
          {"id": "chatcmpl-tool-1", "type": "function",
           "function": {"name": "get_weather",
                        "arguments": "{\"city\": \"Z\u00fcrich\", \"unit\": \"celsius\"}"}},
          {"id": "chatcmpl-tool-2", "type": "function",
           "function": {"name": "get_time", "arguments": "{\"zone\": \"Europe/Zurich\"}"}}]},
      {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
      {"role": "tool", "tool_call_id": "chatcmpl-tool-2", "content": "14:05"},
      ],
     [WEATHER, TIME], True),
    ("assistant_text_and_call_then_answer",
     [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "Let me check.", "tool_calls": [
          {"id": "c1", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"unit\": \"celsius\", \"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
      {"role": "assistant", "content": "It is 18 C in Paris."},
      {"role": "user", "content": "Thanks"}],
     [WEATHER], True),
    ("tool_history_without_tools",
     [{"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [
          {"id": "c1", "type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "18 C"}],
     None, True),
]


def for_transformers(messages):
    """vLLM's preprocessing: content None -> "", arguments text -> dict."""
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for call in m.get("tool_calls", []):
            if isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def main():
    with open(TEMPLATE, encoding="utf-8") as f:
        source = f.read()
    template = environment().from_string(source)
    cases = []
    for name, messages, tools, add_generation_prompt in CASES:
        hf_messages = for_transformers(messages)
        rendered = template.render(messages=hf_messages, tools=tools, documents=None,
                                   add_generation_prompt=add_generation_prompt,
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>")
        request = {"messages": messages}
        if tools is not None:
            request["tools"] = tools
            request["tool_choice"] = "none"
        cases.append({"name": name, "request": request, "transformers_messages": hf_messages,
                      "add_generation_prompt": add_generation_prompt, "rendered": rendered})
    out = {
        "renderer": f"python3-jinja2 {jinja2.__version__} ImmutableSandboxedEnvironment(trim_blocks=True, "
                    "lstrip_blocks=True, extensions=[loopcontrols]) + transformers' tojson, "
                    "raise_exception, strftime_now; tests/data/qwen25_tools_reference.py",
        "template": "shared/chat_templates/qwen2.5-instruct.jinja",
        "cases": cases,
    }
    with open(os.path.join(HERE, "qwen25_tools_reference.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
