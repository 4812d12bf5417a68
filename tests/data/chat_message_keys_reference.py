#!/usr/bin/env python3
"""Reference renderings of chats whose messages carry keys beyond role and content.

Writes tests/data/chat_message_keys_reference.json: for each case, the
messages as a client sends them, the content format, and what Jinja2
renders from the conversation vLLM builds of them (or, under "error", the
message of the 400 vLLM answers).

The conversation is built by the rules of vLLM's chat parsing
(vllm/renderers/chat_utils/parse_chat_message_content.py,
_parse_chat_message_content, and parse_chat_message.py,
_postprocess_messages; vllm/entrypoints/chat_utils.py before the move):
each message is rebuilt as {role, content}, then
  - assistant: tool_calls when present and not None; reasoning (not None)
    as both "reasoning" and "reasoning_content" (a client's
    "reasoning_content" key is not read);
  - tool: tool_call_id when present;
  - any role: name and task when they are strings;
  - developer: tools (None when absent);
every other key is dropped. Then each assistant tool_calls list: empty is
dropped; an entry that is not an object, or whose type is not "function"
(the default) or whose function is not an object, is a 400; arguments that
are falsy (missing, None, "", ...) become {}, a dict stays, a string is
json.loads'ed, and anything that is not then a dict (bad JSON, a list, a
number) becomes {}.

How: Python's jinja2 (3.1.x) set up as transformers' apply_chat_template
(ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), transformers' tojson, raise_exception), with
add_generation_prompt False and bos_token / eos_token "".

Run from the repository root: python3 tests/data/chat_message_keys_reference.py
"""
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

# Prints each message dict (Python's repr: its keys in order) and each tool
# call's arguments as JSON.
TEMPLATE = ("{% for m in messages %}{{ m }}\n"
            "{% for tc in m.tool_calls or [] %}  {{ tc.function.name }}: "
            "{{ tc.function.arguments | tojson }}\n{% endfor %}{% endfor %}")


class Refused(Exception):
    pass


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


def content_of(content, fmt, role):
    if content is None:
        texts = []
    elif isinstance(content, str):
        texts = [content]
    else:
        texts = [p if isinstance(p, str) else p["text"] for p in content]
    if fmt == "openai" and role != "tool":
        return [{"type": "text", "text": t} for t in texts]
    return "\n".join(texts)


def arguments(value):
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    parsed = value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
    return parsed if isinstance(parsed, dict) else {}


def conversation(messages, fmt):
    out = []
    for m in messages:
        role = m["role"]
        msg = {"role": role, "content": content_of(m.get("content"), fmt, role)}
        if role == "assistant":
            if m.get("tool_calls") is not None:
                msg["tool_calls"] = [dict(c) if isinstance(c, dict) else c
                                     for c in m["tool_calls"]]
            if m.get("reasoning") is not None:
                msg["reasoning"] = m["reasoning"]
                msg["reasoning_content"] = m["reasoning"]
        elif role == "tool" and "tool_call_id" in m:
            msg["tool_call_id"] = m["tool_call_id"]
        for key in ("name", "task"):
            if isinstance(m.get(key), str):
                msg[key] = m[key]
        if role == "developer":
            msg["tools"] = m.get("tools")
        out.append(msg)
    for msg in out:
        calls = msg.get("tool_calls")
        if msg["role"] != "assistant" or not isinstance(calls, list):
            continue
        if not calls:
            del msg["tool_calls"]
            continue
        for i, call in enumerate(calls):
            if not isinstance(call, dict):
                raise Refused("assistant tool_calls entries must be objects.")
            fn = call.get("function")
            if call.get("type", "function") != "function" or not isinstance(fn, dict):
                raise Refused("chat completions only support assistant tool_calls of type "
                              "'function'.")
            calls[i] = dict(call, function=dict(fn, arguments=arguments(fn.get("arguments"))))
    return out


TOOLS = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]


def call(args, **extra):
    fn = {"name": "get"}
    if args != "MISSING":
        fn["arguments"] = args
    return dict({"id": "c1", "type": "function", "function": fn}, **extra)


CASES = [
    ("extra_keys_dropped", "string", [
        {"role": "system", "content": "Be brief.", "name": 5, "weird": 1},
        {"role": "user", "content": "Hi", "name": "alice", "metadata": {"a": 1}, "task": "t1"},
        {"role": "assistant", "content": "Yo", "reasoning": "think", "reasoning_content": "other",
         "refusal": None, "audio": None},
        {"role": "assistant", "content": "Again", "reasoning_content": "not read"},
        {"role": "developer", "content": "Dev", "tools": TOOLS, "x": 1},
        {"role": "developer", "content": "Dev2"},
        {"role": "user", "content": "Hey", "tool_calls": [call("{}")], "tool_call_id": "u1"},
    ]),
    ("tool_message_keys", "openai", [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}], "extra": True},
        {"role": "assistant", "content": None, "tool_calls": [call('{"q": "x"}', index=0)]},
        {"role": "tool", "tool_call_id": "c1", "name": "get", "content": "18 C", "is_error": False},
        {"role": "tool", "content": [{"type": "text", "text": "no id"}], "tool_call_id": None},
    ]),
    ("tool_call_arguments", "string", [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("MISSING"), call(None), call(""), call('{"a": 1, "b": [true, null]}'),
            call("not json"), call("[1, 2]"), call("5"), call({"b": 2}), call({}), call([1]),
            {"id": "c2", "function": {"name": "untyped", "arguments": '{"z": 0}'}}]},
        {"role": "assistant", "content": "none", "tool_calls": []},
        {"role": "assistant", "content": "null", "tool_calls": None},
    ]),
    ("tool_call_not_an_object", "string", [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": ["get()"]},
    ]),
    ("tool_call_not_a_function", "string", [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "custom", "function": {"name": "get", "arguments": "{}"}}]},
    ]),
]


def main():
    env = environment()
    out = []
    for name, fmt, messages in CASES:
        case = {"name": name, "content_format": fmt, "messages": messages}
        try:
            case["rendered"] = env.from_string(TEMPLATE).render(
                messages=conversation(messages, fmt), add_generation_prompt=False, bos_token="",
                eos_token="")
        except Refused as e:
            case["error"] = str(e)
        out.append(case)
    with open(os.path.join(HERE, "chat_message_keys_reference.json"), "w",
              encoding="utf-8") as f:
        json.dump({"template": TEMPLATE, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
