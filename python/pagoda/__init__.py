"""Pagoda's offline inference, with vLLM's Python API.

    from pagoda import LLM, SamplingParams
    llm = LLM(model="models/stories260K")
    outputs = llm.generate(["Once upon a time"], SamplingParams(temperature=0.8, top_p=0.95))
    for output in outputs:
        print(output.prompt, output.outputs[0].text)

The classes mirror vllm/entrypoints/llm.py (LLM.generate, LLM.chat) and
vllm/outputs.py (RequestOutput, CompletionOutput, Logprob). Requests go
through the C++ LLM class (server/llm.h): the HTTP server's validation and
request pipeline, the same engine; generation runs with the GIL released.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._pagoda import LLMError, _LLM

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "LLMError"]

# vLLM's SamplingParams keywords that Pagoda implements, with vLLM's
# defaults (vllm/sampling_params.py). None: unset (the engine decides).
_SAMPLING_DEFAULTS: Dict[str, Any] = {
    "n": 1,
    "best_of": None,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "seed": None,
    "stop": None,
    "stop_token_ids": None,
    "bad_words": None,
    "ignore_eos": False,
    "max_tokens": 16,
    "min_tokens": 0,
    "logprobs": None,
    "prompt_logprobs": None,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "include_stop_str_in_output": False,
    "truncate_prompt_tokens": None,
    "logit_bias": None,
    "allowed_token_ids": None,
}

# vLLM keywords accepted for compatibility that change nothing here.
_SAMPLING_NO_EFFECT = {"detokenize", "output_kind", "extra_args"}


class SamplingParams:
    """vLLM's SamplingParams: keyword arguments by vLLM's names.

    Only the fields given are sent; the others keep vLLM's defaults (not the
    model's generation_config.json: LLM.generate without sampling_params
    applies those, as vLLM's get_default_sampling_params). Values are checked
    by the engine's request validation when generate() runs (ValueError
    naming the field). max_tokens=None is "unset" (16), not vLLM's "until the
    context is full".
    """

    def __init__(self, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in _SAMPLING_DEFAULTS and key not in _SAMPLING_NO_EFFECT:
                raise TypeError(f"SamplingParams got an unexpected keyword argument '{key}'")
        self._fields = {k: v for k, v in kwargs.items()
                        if k in _SAMPLING_DEFAULTS and v is not None}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return fields[name]
        if name in _SAMPLING_DEFAULTS:
            return _SAMPLING_DEFAULTS[name]
        raise AttributeError(f"'SamplingParams' object has no attribute '{name}'")

    def to_dict(self) -> Dict[str, Any]:
        """The fields set (what the engine receives)."""
        return dict(self._fields)

    def __repr__(self) -> str:
        shown = {k: self._fields.get(k, v) for k, v in _SAMPLING_DEFAULTS.items()}
        return "SamplingParams(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


@dataclass
class Logprob:
    """vLLM's Logprob: natural-log probability, 1-based rank (None: the
    sampled token was not among the top logprobs), the token decoded."""

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


def _logprob_dict(d: Optional[Dict[str, Any]]) -> Optional[Dict[int, Logprob]]:
    if d is None:
        return None
    return {int(k): Logprob(v["logprob"], v["rank"], v["decoded_token"]) for k, v in d.items()}


@dataclass
class CompletionOutput:
    """vLLM's CompletionOutput: one of a request's n completions."""

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


class RequestOutput:
    """vLLM's RequestOutput: one prompt's result."""

    def __init__(self, request_id: str, prompt: Optional[str], prompt_token_ids: List[int],
                 prompt_logprobs: Optional[List[Optional[Dict[int, Logprob]]]],
                 outputs: List[CompletionOutput], finished: bool) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished

    @classmethod
    def _from_json(cls, o: Dict[str, Any]) -> "RequestOutput":
        prompt_lps = o["prompt_logprobs"]
        outputs = [
            CompletionOutput(
                index=c["index"], text=c["text"], token_ids=list(c["token_ids"]),
                cumulative_logprob=c["cumulative_logprob"],
                logprobs=None if c["logprobs"] is None else [_logprob_dict(p) for p in c["logprobs"]],
                finish_reason=c["finish_reason"], stop_reason=c["stop_reason"])
            for c in o["outputs"]
        ]
        return cls(o["request_id"], o["prompt"], list(o["prompt_token_ids"]),
                   None if prompt_lps is None else [_logprob_dict(p) for p in prompt_lps],
                   outputs, o["finished"])

    def __repr__(self) -> str:
        return (f"RequestOutput(request_id={self.request_id}, prompt={self.prompt!r}, "
                f"prompt_token_ids={self.prompt_token_ids}, "
                f"prompt_logprobs={self.prompt_logprobs}, outputs={self.outputs}, "
                f"finished={self.finished})")


# vLLM's LLM(...) engine arguments Pagoda has (server/engine_args.h).
_ENGINE_ARGS = {
    "served_model_name", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
    "seed", "chat_template", "device", "dtype", "load_format", "gpu_memory_utilization",
    "num_gpu_blocks_override", "kv_cache_memory", "enforce_eager", "enable_prefix_caching",
    "disable_log_stats", "tensor_parallel_size", "quantization", "long_prefill_token_threshold",
    "swap_space", "preemption_mode",
}
# vLLM's that change nothing here (a local model directory, one process).
_ENGINE_ARGS_NO_EFFECT = {
    "tokenizer_mode", "trust_remote_code", "revision", "tokenizer_revision",
    "cpu_offload_gb", "max_seq_len_to_capture", "disable_custom_all_reduce",
    "disable_async_output_proc", "task", "hf_token", "compilation_config",
}


def _prompt_request(p: Any) -> Dict[str, Any]:
    if isinstance(p, str):
        return {"prompt": p}
    if isinstance(p, dict):
        if "prompt_token_ids" in p:
            return {"prompt_token_ids": list(p["prompt_token_ids"])}
        if "prompt" in p:
            return {"prompt": p["prompt"]}
    raise TypeError("a prompt is a string, {'prompt': str} or {'prompt_token_ids': [int, ...]}; "
                    f"got {type(p).__name__}")


def _params_list(sampling_params: Any) -> List[Dict[str, Any]]:
    if sampling_params is None:
        return []
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params.to_dict()]
    items = list(sampling_params)
    for sp in items:
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"sampling_params must hold SamplingParams, got {type(sp).__name__}")
    return [sp.to_dict() for sp in items]


class LLM:
    """vLLM's LLM: a model loaded for offline generation.

    LLM(model="DIR", **engine_args) with vLLM's engine argument names
    (max_model_len, max_num_seqs, gpu_memory_utilization, tensor_parallel_size,
    quantization, dtype, seed, chat_template, enforce_eager, ...). Arguments
    vLLM has that do nothing for a local model here (trust_remote_code,
    cpu_offload_gb, ...) are accepted with a warning; unknown ones raise TypeError.
    """

    def __init__(self, model: str = "", **kwargs: Any) -> None:
        args = {}
        for key, value in kwargs.items():
            if key in _ENGINE_ARGS:
                args[key] = value
            elif key in _ENGINE_ARGS_NO_EFFECT:
                warnings.warn(f"pagoda.LLM: '{key}' has no effect here", stacklevel=2)
            else:
                raise TypeError(f"LLM got an unexpected keyword argument '{key}'")
        self._llm = _LLM(model, json.dumps(args))

    def generate(self, prompts: Any, sampling_params: Any = None, use_tqdm: bool = True,
                 **_: Any) -> List[RequestOutput]:
        """vLLM's LLM.generate: prompts (a string, a list of strings, or
        {"prompt_token_ids": [...]} items), one SamplingParams for all or one
        per prompt. Returns a RequestOutput per prompt, in order. Invalid
        requests raise ValueError (naming the prompt and field) before any
        runs."""
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        requests = [_prompt_request(p) for p in prompts]
        params = _params_list(sampling_params)
        if len(params) > 1 and len(params) != len(requests):
            raise ValueError("The lengths of prompts and params must be the same.")
        return self._run(requests, params, use_tqdm)

    def chat(self, messages: Any, sampling_params: Any = None, use_tqdm: bool = True,
             chat_template: Optional[str] = None, add_generation_prompt: bool = True,
             continue_final_message: bool = False,
             chat_template_kwargs: Optional[Dict[str, Any]] = None,
             documents: Optional[List[Dict[str, Any]]] = None, **_: Any) -> List[RequestOutput]:
        """vLLM's LLM.chat: one conversation (a list of {"role", "content"})
        or a list of them, rendered with the model's chat template (or
        chat_template: its Jinja source) and generated."""
        conversations = messages if messages and isinstance(messages[0], list) else [messages]
        options: Dict[str, Any] = {"add_generation_prompt": add_generation_prompt,
                                   "continue_final_message": continue_final_message}
        if chat_template is not None:
            options["chat_template"] = chat_template
        if chat_template_kwargs:
            options["chat_template_kwargs"] = chat_template_kwargs
        if documents is not None:
            options["documents"] = documents
        requests = [dict(options, messages=list(c)) for c in conversations]
        params = _params_list(sampling_params)
        if len(params) > 1 and len(params) != len(requests):
            raise ValueError("The lengths of prompts and params must be the same.")
        return self._run(requests, params, use_tqdm)

    def _run(self, requests: List[Dict[str, Any]], params: List[Dict[str, Any]],
             use_tqdm: bool) -> List[RequestOutput]:
        out = self._llm.generate(json.dumps(requests), json.dumps(params), bool(use_tqdm))
        return [RequestOutput._from_json(o) for o in json.loads(out)]
