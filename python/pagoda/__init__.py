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

import copy
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from ._pagoda import LLMError, _LLM, check_sampling_params

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
    # Beam search (vLLM's SamplingParams before v0.6.3; BeamSearchParams since).
    "use_beam_search": False,
    "length_penalty": 1.0,
    "early_stopping": False,
    # False: the outputs' text is empty (token ids only); stop strings refused.
    "detokenize": True,
}

# vLLM keywords accepted for compatibility that change nothing here.
_SAMPLING_NO_EFFECT = {"output_kind", "extra_args"}

# Fields vLLM's SamplingParams takes as Python ints only ("n must be an int,
# but is of type <class 'float'>"); None passes where the default is None
# (and max_tokens=None). A bool is refused too: JSON would send true.
_SAMPLING_INTS = {"n", "best_of", "max_tokens", "min_tokens", "top_k", "seed", "logprobs",
                  "prompt_logprobs", "truncate_prompt_tokens"}
_SAMPLING_INT_LISTS = {"stop_token_ids", "allowed_token_ids"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int_field(key: str, value: Any) -> None:
    if value is None:
        return
    if key in _SAMPLING_INTS and not _is_int(value):
        raise ValueError(f"{key} must be an int, but is of type {type(value)}")
    if key in _SAMPLING_INT_LISTS and (not isinstance(value, (list, tuple))
                                       or not all(_is_int(v) for v in value)):
        raise ValueError(f"{key} must be a list of ints, got {value!r}")

# Fields sent when None (vLLM's None is not "unset" there): max_tokens=None
# generates until the context is full.
_SAMPLING_SEND_NONE = {"max_tokens"}


def _check_finite(name: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        # The engine's own message (request_model.cpp) for what JSON cannot
        # carry: every front end refuses inf and nan alike.
        raise ValueError(f"{name} must be a finite number, got {value!r}")


class SamplingParams:
    """vLLM's SamplingParams: keyword arguments by vLLM's names.

    Every field is an attribute (vLLM's defaults for those not given) and is
    read when generate() runs, so changing one after construction counts.
    Fields equal to vLLM's defaults are not sent (not the model's
    generation_config.json either: LLM.generate without sampling_params
    applies those, as vLLM's get_default_sampling_params). Values are checked
    by the engine's request validation when generate() runs (ValueError
    naming the field); integer fields (n, best_of, max_tokens, min_tokens,
    top_k, seed, logprobs, prompt_logprobs, truncate_prompt_tokens, and the
    items of stop_token_ids / allowed_token_ids) must be Python ints, as
    vLLM's "n must be an int" (ValueError). max_tokens=None generates until
    max_model_len, as vLLM's.
    """

    def __init__(self, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in _SAMPLING_DEFAULTS and key not in _SAMPLING_NO_EFFECT:
                raise TypeError(f"SamplingParams got an unexpected keyword argument '{key}'")
        for key, default in _SAMPLING_DEFAULTS.items():
            setattr(self, key, kwargs.get(key, default))
        for key in _SAMPLING_NO_EFFECT:
            if key in kwargs:
                setattr(self, key, kwargs[key])
        # vLLM's __post_init__: invalid values raise ValueError here, by the
        # engine's own field checks (types, ranges, beam search's fields).
        check_sampling_params(json.dumps(self.to_dict()))

    def clone(self) -> "SamplingParams":
        """A deep copy (vLLM's SamplingParams.clone)."""
        return copy.deepcopy(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SamplingParams):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in _SAMPLING_DEFAULTS)

    __hash__ = None  # type: ignore[assignment]  # mutable, as vLLM's

    def to_dict(self) -> Dict[str, Any]:
        """The fields that differ from vLLM's defaults (what the engine
        receives), read from the attributes now."""
        out: Dict[str, Any] = {}
        for key, default in _SAMPLING_DEFAULTS.items():
            value = getattr(self, key)
            _check_int_field(key, value)
            if value is None and key not in _SAMPLING_SEND_NONE:
                continue
            if type(value) is type(default) and value == default:
                continue
            _check_finite(key, value)
            if key == "stop" and isinstance(value, (list, tuple)):
                for v in value:
                    _check_finite(key, v)
            if isinstance(value, tuple):
                value = list(value)
            out[key] = value
        return out

    def __repr__(self) -> str:
        shown = {k: getattr(self, k) for k in _SAMPLING_DEFAULTS}
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
                 outputs: List[CompletionOutput], finished: bool,
                 num_cached_tokens: Optional[int] = None) -> None:
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.prompt_logprobs = prompt_logprobs
        self.outputs = outputs
        self.finished = finished
        # Prompt tokens read from the prefix cache (vLLM v1's
        # num_cached_tokens).
        self.num_cached_tokens: Optional[int] = num_cached_tokens

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
                   outputs, o["finished"], o.get("num_cached_tokens"))

    def __repr__(self) -> str:
        return (f"RequestOutput(request_id={self.request_id}, prompt={self.prompt!r}, "
                f"prompt_token_ids={self.prompt_token_ids}, "
                f"prompt_logprobs={self.prompt_logprobs}, outputs={self.outputs}, "
                f"finished={self.finished}, num_cached_tokens={self.num_cached_tokens})")


# vLLM's LLM(...) engine arguments Pagoda has (server/engine_args.h).
_ENGINE_ARGS = {
    "served_model_name", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
    "seed", "chat_template", "device", "dtype", "load_format", "gpu_memory_utilization",
    "num_gpu_blocks_override", "kv_cache_memory", "enforce_eager", "enable_prefix_caching",
    "disable_log_stats", "tensor_parallel_size", "quantization", "long_prefill_token_threshold",
    "swap_space", "preemption_mode", "max_logprobs",
}
# vLLM's that change nothing here: performance knobs (the outputs are the
# same), and hub access that a local model directory does not use (vLLM
# ignores revision and hf_token for a local path too). A non-default value
# warns that it has no effect.
_ENGINE_ARGS_NO_EFFECT = {
    "revision", "tokenizer_revision", "hf_token",
    "cpu_offload_gb", "max_seq_len_to_capture", "disable_custom_all_reduce",
    "disable_async_output_proc", "compilation_config",
}
# vLLM's whose other values change what vLLM does, which Pagoda cannot do:
# the values that are Pagoda's own behaviour pass silently, any other is a
# ValueError naming the argument (trust_remote_code: below).
_ENGINE_ARGS_VALUES = {
    # Generation only: vLLM's embed / classify / score / reward / transcription
    # tasks run other model heads and APIs.
    "task": ("auto", "generate"),
    # The model directory's tokenizer.json (HF's fast tokenizer, "auto"'s
    # choice): "slow" runs the Python tokenizer, "mistral" mistral_common's.
    "tokenizer_mode": ("auto", "hf"),
}


def _defines_remote_code(model: str) -> bool:
    """Whether the model directory maps classes to its own Python code
    (auto_map in config.json or tokenizer_config.json), which vLLM runs
    with trust_remote_code=True."""
    for name in ("config.json", "tokenizer_config.json"):
        try:
            with open(os.path.join(model, name), encoding="utf-8") as f:
                if "auto_map" in json.load(f):
                    return True
        except (OSError, ValueError):
            continue
    return False


def _is_default_engine_arg(key: str, value: Any) -> bool:
    return value in (None, False, 0, "") or (key == "compilation_config" and value == {})


def _prompt_request(p: Any) -> Dict[str, Any]:
    if isinstance(p, str):
        return {"prompt": p}
    if isinstance(p, dict):
        form = "prompt_token_ids" if "prompt_token_ids" in p else "prompt" if "prompt" in p else None
        if form is not None:
            # vLLM's TextPrompt / TokensPrompt keys Pagoda lacks
            # (multi_modal_data, mm_processor_kwargs, ...) are an error, not
            # dropped. cache_salt (vLLM's: only prompts with the same salt
            # share prefix-cache blocks) is checked by the request pipeline.
            extra = sorted(k for k in p if k not in (form, "cache_salt"))
            if extra:
                raise ValueError(f"prompt key(s) {extra} are not supported by Pagoda (a prompt "
                                 "is {'prompt': str} or {'prompt_token_ids': [int, ...]}, "
                                 "with an optional 'cache_salt': str)")
            request: Dict[str, Any] = (
                {"prompt_token_ids": list(p["prompt_token_ids"])} if form == "prompt_token_ids"
                else {"prompt": p["prompt"]})
            # vLLM's renderer takes the salt only when it is true ("if
            # cache_salt := prompt.get('cache_salt')"): "" or None is no salt.
            salt = p.get("cache_salt")
            if salt:
                if not isinstance(salt, str):
                    raise ValueError(f"'cache_salt' must be a string, got {type(salt).__name__}")
                request["cache_salt"] = salt
            return request
    raise TypeError("a prompt is a string, {'prompt': str} or {'prompt_token_ids': [int, ...]}; "
                    f"got {type(p).__name__}")


def _params_list(sampling_params: Any, num_requests: int) -> List[Dict[str, Any]]:
    if sampling_params is None:
        return []
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params.to_dict()]
    items = list(sampling_params)
    for sp in items:
        if not isinstance(sp, SamplingParams):
            raise TypeError(f"sampling_params must hold SamplingParams, got {type(sp).__name__}")
    # vLLM's _validate_and_add_requests: a list is one per prompt.
    if len(items) != num_requests:
        raise ValueError("The lengths of prompts and params must be the same.")
    return [sp.to_dict() for sp in items]


def _refuse_unsupported(**given: Any) -> None:
    """vLLM's LLM.generate / LLM.chat keywords Pagoda does not implement:
    None (their default) passes, anything else is refused by name."""
    for name, value in given.items():
        if value is None:
            continue
        if name == "priority" and all(p == 0 for p in value):
            continue  # FCFS: the default priority
        if name == "priority":
            raise NotImplementedError("priority other than 0 is not supported by Pagoda (FCFS "
                                      "scheduling, vLLM's default policy)")
        raise NotImplementedError(f"{name} is not supported by Pagoda")


class Tokenizer:
    """The model's tokenizer, as the engine uses it (LLM.get_tokenizer)."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        return list(self._llm.encode(text, add_special_tokens))

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._llm.decode(list(token_ids), skip_special_tokens)


class LLM:
    """vLLM's LLM: a model loaded for offline generation.

    LLM(model="DIR", **engine_args) with vLLM's engine argument names
    (max_model_len, max_num_seqs, gpu_memory_utilization, tensor_parallel_size,
    quantization, dtype, seed, chat_template, enforce_eager, ...). Arguments
    vLLM has that change nothing for a local model here (performance knobs
    such as cpu_offload_gb, hub access such as revision) are accepted, with a
    warning when not at their default; those whose other values would change
    what vLLM does (task other than 'auto'/'generate', tokenizer_mode other
    than 'auto'/'hf', trust_remote_code=True for a model with its own code)
    raise ValueError naming the argument; unknown ones raise TypeError.
    """

    def __init__(self, model: str = "", tokenizer: Optional[str] = None, **kwargs: Any) -> None:
        args = {}
        for key, value in kwargs.items():
            if key in _ENGINE_ARGS:
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"LLM argument '{key}' must be a finite number, got {value!r}")
                args[key] = value
            elif key in _ENGINE_ARGS_VALUES:
                if value is not None and value not in _ENGINE_ARGS_VALUES[key]:
                    allowed = " or ".join(repr(v) for v in _ENGINE_ARGS_VALUES[key])
                    raise ValueError(f"LLM argument '{key}'={value!r} is not supported by Pagoda "
                                     f"(it would change what vLLM does; supported: {allowed})")
            elif key == "trust_remote_code":
                if value and model and _defines_remote_code(model):
                    raise ValueError("LLM argument 'trust_remote_code'=True: the model's "
                                     "config maps classes to its own code (auto_map), which "
                                     "vLLM would run and Pagoda does not")
                if value:
                    warnings.warn("pagoda.LLM: 'trust_remote_code' has no effect here (the "
                                  "model defines no code of its own)", stacklevel=2)
            elif key in _ENGINE_ARGS_NO_EFFECT:
                if not _is_default_engine_arg(key, value):
                    warnings.warn(f"pagoda.LLM: '{key}' has no effect here", stacklevel=2)
            else:
                raise TypeError(f"LLM got an unexpected keyword argument '{key}'")
        self._llm = _LLM(model, json.dumps(args, allow_nan=False))
        # The tokenizer is the model directory's own; vLLM's tokenizer=
        # naming that directory is accepted, another is not supported.
        if tokenizer is not None and (
                not os.path.isdir(tokenizer)
                or os.path.realpath(tokenizer) != os.path.realpath(self._llm.model_dir)):
            raise ValueError(f"tokenizer={tokenizer!r}: Pagoda uses the model directory's "
                             f"tokenizer ({self._llm.model_dir}); a separate tokenizer is not "
                             "supported")

    def get_tokenizer(self) -> "Tokenizer":
        """The model's tokenizer (vLLM's LLM.get_tokenizer): encode(text) →
        ids, decode(ids) → text."""
        return Tokenizer(self._llm)

    def generate(self, prompts: Any, sampling_params: Any = None, use_tqdm: bool = True,
                 lora_request: Any = None, prompt_adapter_request: Any = None,
                 guided_options_request: Any = None, priority: Optional[List[int]] = None,
                 tokenization_kwargs: Optional[Dict[str, Any]] = None) -> List[RequestOutput]:
        """vLLM's LLM.generate: prompts (a string, a list of strings, or
        {"prompt_token_ids": [...]} items), one SamplingParams for all or one
        per prompt. Returns a RequestOutput per prompt, in order. Invalid
        requests raise ValueError (naming the prompt and field) before any
        runs. vLLM's lora_request, prompt_adapter_request,
        guided_options_request, a non-zero priority and tokenization_kwargs
        raise NotImplementedError unless None."""
        _refuse_unsupported(lora_request=lora_request,
                            prompt_adapter_request=prompt_adapter_request,
                            guided_options_request=guided_options_request, priority=priority,
                            tokenization_kwargs=tokenization_kwargs)
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        requests = [_prompt_request(p) for p in prompts]
        params = _params_list(sampling_params, len(requests))
        return self._run(requests, params, use_tqdm)

    def chat(self, messages: Any, sampling_params: Any = None, use_tqdm: bool = True,
             lora_request: Any = None, chat_template: Optional[str] = None,
             chat_template_content_format: str = "auto", add_generation_prompt: bool = True,
             continue_final_message: bool = False, tools: Optional[List[Dict[str, Any]]] = None,
             chat_template_kwargs: Optional[Dict[str, Any]] = None,
             mm_processor_kwargs: Optional[Dict[str, Any]] = None,
             documents: Optional[List[Dict[str, Any]]] = None) -> List[RequestOutput]:
        """vLLM's LLM.chat: one conversation (a list of {"role", "content"})
        or a list of them, rendered with the model's chat template (or
        chat_template: its Jinja source) and generated.
        chat_template_content_format: how each message's content reaches the
        template, as in vLLM: "string" (text; a list of text parts joined
        with "\n"), "openai" (a list of {"type": "text", "text"} parts) or
        "auto" (openai when the template loops over a message's content).
        tools: the template's `tools` variable, as given; each must be a
        dict (a JSON schema), as transformers' apply_chat_template checks;
        every dict reaches the template in its own key order.
        lora_request and mm_processor_kwargs raise NotImplementedError
        unless None."""
        _refuse_unsupported(lora_request=lora_request, mm_processor_kwargs=mm_processor_kwargs)
        if chat_template_content_format not in ("auto", "string", "openai"):
            raise ValueError("chat_template_content_format must be 'auto', 'string' or 'openai', "
                             f"got {chat_template_content_format!r}")
        conversations = messages if messages and isinstance(messages[0], list) else [messages]
        options: Dict[str, Any] = {"add_generation_prompt": add_generation_prompt,
                                   "continue_final_message": continue_final_message,
                                   "chat_template_content_format": chat_template_content_format}
        if chat_template is not None:
            options["chat_template"] = chat_template
        if chat_template_kwargs:
            options["chat_template_kwargs"] = chat_template_kwargs
        if documents is not None:
            options["documents"] = documents
        if tools is not None:
            if not isinstance(tools, (str, bytes, dict)) and any(callable(t) for t in tools):
                raise NotImplementedError(
                    "tools given as Python functions (transformers' get_json_schema) are not "
                    "supported by Pagoda; pass each tool as a JSON schema dict")
            options["tools"] = list(tools) if isinstance(tools, tuple) else tools
        requests = [dict(options, messages=list(c)) for c in conversations]
        params = _params_list(sampling_params, len(requests))
        return self._run(requests, params, use_tqdm)

    def _run(self, requests: List[Dict[str, Any]], params: List[Dict[str, Any]],
             use_tqdm: bool) -> List[RequestOutput]:
        out = self._llm.generate(json.dumps(requests, allow_nan=False), json.dumps(params),
                                 bool(use_tqdm))
        return [RequestOutput._from_json(o) for o in json.loads(out)]
