"""The pagoda Python module (python/): vLLM's LLM API over the C++ LLM class,
on the bundled stories260K. Run by tests/python/run.sh (ctest: python_offline)."""

import json
import os
import re
import subprocess
import sys
import threading

import pytest

from pagoda import LLM, CompletionOutput, Logprob, RequestOutput, SamplingParams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("PAGODA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
MODEL = os.path.join(ROOT, "models", "stories260K")


@pytest.fixture(scope="module")
def llm():
    return LLM(model=MODEL, device="cpu")


def greedy_cases():
    with open(os.path.join(SHARED, "testvectors", "stories260K_greedy.json")) as f:
        return json.load(f)["cases"]


def test_generate_reproduces_the_greedy_reference(llm):
    cases = greedy_cases()
    prompts, params = [], []
    for c in cases:
        sp = SamplingParams(temperature=0, max_tokens=len(c["greedy_ids"]))
        prompts += [c["prompt"], {"prompt_token_ids": c["prompt_ids"]}]
        params += [sp, sp]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    assert len(outputs) == len(prompts)
    for i, out in enumerate(outputs):
        c = cases[i // 2]
        assert isinstance(out, RequestOutput)
        assert out.prompt_token_ids == c["prompt_ids"]
        assert isinstance(out.outputs[0], CompletionOutput)
        assert out.outputs[0].token_ids == c["greedy_ids"]
        assert out.outputs[0].finish_reason == "length"
        assert out.outputs[0].finished()
        assert out.finished
    assert outputs[2].prompt == "Once upon a time"
    assert outputs[3].outputs[0].text == outputs[2].outputs[0].text


def run_script(name):
    env = dict(os.environ)
    return subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", name)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_vllm_classic_example_runs_unchanged_but_for_the_import():
    r = run_script("vllm_offline_example.py")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    for line, prompt in zip(lines, ["Hello, my name is", "The president of the United States is",
                                    "The capital of France is", "The future of AI is"]):
        assert line.startswith(prompt + " "), line
        assert len(line) > len(prompt) + 1
    # vLLM's progress bar (stderr is a pipe: its final line).
    assert "Processed prompts: 100%|██████████| 4/4 [" in r.stderr, r.stderr
    assert "est. speed input: " in r.stderr and " toks/s, output: " in r.stderr


def test_second_seed_script_chat_and_generate():
    r = run_script("qwen2_offline_chat.py")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    assert lines[0].startswith("Prompt: '<s>[INST] <<SYS>>\\nYou are a helpful assistant."), lines[0]
    assert lines[1].startswith("Prompt: 'Once upon a time', Generated text: '"), lines[1]
    assert r.stderr.count("Processed prompts: 100%") == 2, r.stderr


def test_sampling_params_names_and_defaults():
    sp = SamplingParams(temperature=0.8, top_p=0.95)
    assert sp.temperature == 0.8 and sp.top_p == 0.95
    assert sp.max_tokens == 16 and sp.n == 1 and sp.top_k == 0  # vLLM's defaults
    assert sp.to_dict() == {"temperature": 0.8, "top_p": 0.95}
    with pytest.raises(TypeError, match="max_token"):
        SamplingParams(max_token=3)


def test_best_of_above_one_with_greedy_sampling_raises_value_error():
    # vLLM's SamplingParams._verify_greedy_sampling: the best_of candidates
    # of greedy sampling would all be one sequence. Beam search takes them.
    with pytest.raises(ValueError, match="best_of must be 1 when using greedy sampling, got 2"):
        SamplingParams(temperature=0, best_of=2)
    SamplingParams(temperature=0, best_of=2, use_beam_search=True)
    SamplingParams(temperature=0.5, best_of=2)


def test_n_above_one_with_greedy_sampling_raises_value_error():
    # vLLM's SamplingParams._verify_greedy_sampling: the n choices of
    # greedy sampling would all be one sequence.
    with pytest.raises(ValueError, match="n must be 1 when using greedy sampling, got 2"):
        SamplingParams(temperature=0, n=2)
    SamplingParams(temperature=0, n=2, use_beam_search=True)
    SamplingParams(temperature=0.5, n=2)


def test_invalid_requests_raise_value_error_naming_prompt_and_field(llm):
    # What needs the model (the vocabulary) is checked when generate() runs,
    # naming the prompt; the rest when SamplingParams is built.
    with pytest.raises(ValueError, match=r"prompt 1: .*stop_token_ids"):
        llm.generate(["a", "b"], [SamplingParams(), SamplingParams(stop_token_ids=[10**6])],
                     use_tqdm=False)
    with pytest.raises(ValueError, match="lengths of prompts and params"):
        llm.generate(["a", "b", "c"], [SamplingParams(), SamplingParams()], use_tqdm=False)
    with pytest.raises(ValueError, match="out of vocabulary"):
        llm.generate({"prompt_token_ids": [1, 10**6]}, use_tqdm=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        LLM(model=MODEL, bogus=1)


def test_logprobs_n_and_stop_in_vllms_shape(llm):
    # n > 1 samples (greedy takes n 1, as vLLM's SamplingParams).
    sampled = SamplingParams(temperature=0.8, seed=7, max_tokens=6, logprobs=2, n=2)
    (several,) = llm.generate("Once upon a time", sampled, use_tqdm=False)
    assert [c.index for c in several.outputs] == [0, 1]
    assert all(len(c.logprobs) == len(c.token_ids) == 6 for c in several.outputs)
    sp = SamplingParams(temperature=0, max_tokens=6, logprobs=2, prompt_logprobs=1)
    (out,) = llm.generate("Once upon a time", sp, use_tqdm=False)
    c = out.outputs[0]
    assert len(c.logprobs) == len(c.token_ids) == 6
    for tok, pos in zip(c.token_ids, c.logprobs):
        assert isinstance(pos[tok], Logprob)
        assert pos[tok].rank == 1
        assert isinstance(pos[tok].decoded_token, str)
    assert c.cumulative_logprob == pytest.approx(sum(p[t].logprob for t, p in zip(c.token_ids, c.logprobs)),
                                                 abs=1e-3)
    assert out.prompt_logprobs[0] is None
    assert out.prompt_token_ids[1] in out.prompt_logprobs[1]
    stop = c.text[3:5]
    (stopped,) = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=6, stop=[stop]),
                              use_tqdm=False)
    assert stopped.outputs[0].finish_reason == "stop"
    assert stopped.outputs[0].stop_reason == stop


def test_chat_without_a_template_says_so(llm):
    with pytest.raises(ValueError, match="no chat template") as e:
        llm.chat([{"role": "user", "content": "Hi"}], use_tqdm=False)
    # Offline wording: no server to start, no endpoint.
    assert "chat_template" in str(e.value) and "/v1/chat/completions" not in str(e.value)


def test_chat_batch_of_conversations(llm):
    with open(os.path.join(ROOT, "configs", "chat_templates", "llama-2-chat.jinja")) as f:
        template = f.read()
    conv = [{"role": "user", "content": "Tell me a story"}]
    outs = llm.chat([conv, conv], SamplingParams(temperature=0, max_tokens=5), use_tqdm=False,
                    chat_template=template)
    assert len(outs) == 2
    assert "[INST] Tell me a story [/INST]" in outs[0].prompt
    assert outs[0].outputs[0].token_ids == outs[1].outputs[0].token_ids


def test_generate_releases_the_gil(llm, monkeypatch):
    # Another Python thread keeps running while the C++ call generates:
    # with the GIL held for the whole call it could run only before it
    # (at most one switch interval), never in the call's second half.
    import time
    stop = threading.Event()
    stamps = []

    def ticker():
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.001)

    inner = llm._llm
    span = []

    class Timed:
        def generate(self, *args):
            t0 = time.monotonic()
            try:
                return inner.generate(*args)
            finally:
                span.extend([t0, time.monotonic()])

    monkeypatch.setattr(llm, "_llm", Timed())
    t = threading.Thread(target=ticker)
    t.start()
    try:
        llm.generate(["Once upon a time"] * 8, SamplingParams(max_tokens=200, ignore_eos=True),
                     use_tqdm=False)
    finally:
        stop.set()
        t.join()
    t0, t1 = span
    assert t1 - t0 > 0.05, "too short a call to tell"
    assert any((t0 + t1) / 2 < s < t1 for s in stamps)


def test_use_tqdm_false_prints_no_bar(llm, capfd):
    llm.generate("Once upon a time", SamplingParams(max_tokens=2), use_tqdm=False)
    assert "Processed prompts" not in capfd.readouterr().err
    llm.generate("Once upon a time", SamplingParams(max_tokens=2))
    assert "Processed prompts: 100%|██████████| 1/1 [" in capfd.readouterr().err


def test_scheduling_engine_args_change_the_schedule_not_the_greedy_text():
    # vLLM's swap_space / preemption_mode / long_prefill_token_threshold are
    # real engine arguments here (no "no effect" warning): under a KV pool
    # small enough to preempt and 8-token prefill chunks, greedy output is
    # the reference's.
    import warnings
    cases = greedy_cases()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = LLM(model=MODEL, device="cpu", swap_space=0.01, preemption_mode="swap",
                    long_prefill_token_threshold=8, num_gpu_blocks_override=0,
                    kv_cache_memory=40 * 20480)  # 40 blocks: one 512-token sequence needs 32
    prompts = [{"prompt_token_ids": c["prompt_ids"]} for c in cases]
    params = [SamplingParams(temperature=0, max_tokens=len(c["greedy_ids"])) for c in cases]
    outs = small.generate(prompts, params, use_tqdm=False)
    for c, out in zip(cases, outs):
        assert out.outputs[0].token_ids == c["greedy_ids"]
    with pytest.raises(Exception, match="preemption"):
        LLM(model=MODEL, device="cpu", preemption_mode="evict")


def test_max_tokens_past_the_context_stops_at_max_model_len(llm):
    # vLLM's LLM refuses only a prompt that fills the context; otherwise it
    # generates until max_model_len ("length"). max_tokens=None: until then.
    max_len = llm._llm.max_model_len
    for sp in [SamplingParams(max_tokens=max_len + 88, ignore_eos=True),
               SamplingParams(max_tokens=None, ignore_eos=True)]:
        (out,) = llm.generate("Once", sp, use_tqdm=False)
        assert len(out.prompt_token_ids) + len(out.outputs[0].token_ids) == max_len
        assert out.outputs[0].finish_reason == "length"
    (out,) = llm.generate("Once", SamplingParams(ignore_eos=True), use_tqdm=False)
    assert len(out.outputs[0].token_ids) == 16
    with pytest.raises(ValueError, match="maximum context length"):
        llm.generate({"prompt_token_ids": [1] * max_len}, use_tqdm=False)


def test_sampling_params_attributes_changed_after_construction_count(llm):
    sp = SamplingParams(temperature=0, max_tokens=8)
    sp.max_tokens = 3
    (out,) = llm.generate("Once upon a time", sp, use_tqdm=False)
    assert len(out.outputs[0].token_ids) == 3
    assert SamplingParams(max_tokens=None).to_dict() == {"max_tokens": None}


def test_unknown_and_unsupported_keywords_are_refused(llm):
    with pytest.raises(TypeError, match="bogus"):
        llm.generate("Once", SamplingParams(max_tokens=1), use_tqdm=False, bogus=1)
    with pytest.raises(TypeError, match="bogus"):
        llm.chat([{"role": "user", "content": "Hi"}], bogus=1)
    with pytest.raises(NotImplementedError, match="lora_request"):
        llm.generate("Once", SamplingParams(max_tokens=1), use_tqdm=False, lora_request=object())
    with pytest.raises(NotImplementedError, match="priority"):
        llm.generate("Once", SamplingParams(max_tokens=1), use_tqdm=False, priority=[1])
    # The default priority and None pass.
    llm.generate("Once", SamplingParams(max_tokens=1), use_tqdm=False, priority=[0],
                 lora_request=None)
    with pytest.raises(NotImplementedError, match="lora_request"):
        llm.chat([{"role": "user", "content": "Hi"}], lora_request=object())
    with pytest.raises(ValueError, match="multi_modal_data"):
        llm.generate({"prompt": "Once", "multi_modal_data": {"image": None}}, use_tqdm=False)


def test_params_list_must_match_the_prompts(llm):
    with pytest.raises(ValueError, match="The lengths of prompts and params must be the same."):
        llm.generate(["a", "b"], [SamplingParams(max_tokens=1)], use_tqdm=False)


def test_non_finite_and_mistyped_values_are_value_errors_naming_them():
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=float("nan")).to_dict()
    # The message `pagoda generate --temperature inf` and the C++ LLM give;
    # a large finite temperature is taken, as vLLM takes it.
    with pytest.raises(ValueError, match="temperature must be a finite number, got inf"):
        SamplingParams(temperature=float("inf"))
    SamplingParams(temperature=1e308)
    with pytest.raises(ValueError, match="max_model_len"):
        LLM(model=MODEL, device="cpu", max_model_len="abc")
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        LLM(model=MODEL, device="cpu", gpu_memory_utilization=1.5)
    # vLLM's bound: a swap space above 70% of the machine's memory.
    with pytest.raises(ValueError, match="Too large swap space"):
        LLM(model=MODEL, device="cpu", swap_space=1e12)


def test_token_id_prompts_have_no_prompt_text(llm):
    (out,) = llm.generate({"prompt_token_ids": [1, 403]}, SamplingParams(max_tokens=1),
                          use_tqdm=False)
    assert out.prompt is None


def test_beam_search_fields_in_sampling_params(llm):
    sp = SamplingParams(use_beam_search=True, n=2, best_of=3, temperature=0, max_tokens=4,
                        length_penalty=1.0, early_stopping=True)
    (out,) = llm.generate("Once", sp, use_tqdm=False)
    assert len(out.outputs) == 2
    # The beam's text is decoded after the prompt, as a sampled completion's
    # (the leading space kept), and carries its cumulative logprob.
    (greedy,) = llm.generate("Once", SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert out.outputs[0].token_ids == greedy.outputs[0].token_ids
    assert out.outputs[0].text == greedy.outputs[0].text
    assert out.outputs[0].text.startswith(" ")
    for c in out.outputs:
        assert isinstance(c.cumulative_logprob, float) and c.cumulative_logprob < 0
    with pytest.raises(ValueError, match="beam search"):
        llm.generate("Once", SamplingParams(use_beam_search=True, temperature=0.5, n=2),
                     use_tqdm=False)


def test_ctrl_c_interrupts_generate_promptly(llm):
    import _thread
    import time
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["Once upon a time"] * 128, SamplingParams(max_tokens=None, ignore_eos=True),
                     use_tqdm=False)
    timer.join()
    assert time.monotonic() - t0 < 5
    # The LLM still works after the aborted run.
    (out,) = llm.generate("Once", SamplingParams(max_tokens=2), use_tqdm=False)
    assert len(out.outputs[0].token_ids) == 2


def test_sampling_params_validate_at_construction_clone_and_eq():
    with pytest.raises(ValueError, match="temperature must be non-negative"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    sp = SamplingParams(temperature=0.5, stop=["x"])
    c = sp.clone()
    assert c == sp and c is not sp and c.stop is not sp.stop
    c.stop.append("y")
    assert c != sp
    with pytest.raises(ValueError, match="detokenize"):
        SamplingParams(detokenize=False, stop=["x"])


def test_model_independent_checks_raise_at_construction():
    # vLLM's SamplingParams raises these in __post_init__; they used to wait
    # for generate(). The request pipeline's own checks, without a model.
    cases = [
        (dict(stop=""), "stop cannot contain an empty string."),
        (dict(stop=["a", ""]), "stop cannot contain an empty string."),
        (dict(min_tokens=5, max_tokens=2),
         "min_tokens must be less than or equal to max_tokens=2, got 5."),
        (dict(min_tokens=20), "min_tokens must be less than or equal to max_tokens=16, got 20."),
        (dict(truncate_prompt_tokens=0),
         "truncate_prompt_tokens must be an integer >= 1 or -1, got 0"),
        (dict(logit_bias={5: 200}), r"logit_bias\['5'\] must be in \[-100, 100\], got 200"),
        (dict(logit_bias={"x": 1}), "logit_bias keys must be token ids"),
        (dict(allowed_token_ids=[]), "allowed_token_ids is not None and empty!"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            SamplingParams(**kwargs)
    # Accepted: max_tokens None lifts the bound; ids are checked against the
    # vocabulary when a model is known.
    SamplingParams(min_tokens=20, max_tokens=None)
    SamplingParams(logit_bias={100000: 1.0})


def test_checks_across_fields_raise_at_construction():
    # vLLM's SamplingParams._verify_args / _verify_beam_search /
    # _verify_non_beam_search: these constructed and failed only in generate().
    cases = [
        (dict(n=3, best_of=2), "best_of must be greater than or equal to n, got n=3 and best_of=2."),
        (dict(best_of=0), "best_of must be greater than or equal to n, got n=1 and best_of=0."),
        (dict(use_beam_search=True, temperature=0.5), "temperature must be 0 when using beam search."),
        # vLLM's default temperature (1.0), as generate() sends it.
        (dict(use_beam_search=True), "temperature must be 0 when using beam search."),
        (dict(early_stopping="x"), 'early_stopping must be true, false or "never"'),
        (dict(use_beam_search=True, temperature=0, early_stopping="x"),
         'early_stopping must be true, false or "never"'),
        (dict(length_penalty=2.0), "length_penalty is not effective and must be the default value"),
        # Beam search asks for 2 x the beam width candidates as top logprobs:
        # more than any max_logprobs here (20).
        (dict(use_beam_search=True, temperature=0, n=11),
         "n=11 is too many beams: beam search asks the engine for 2 x 11 = 22"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            SamplingParams(**kwargs)
    SamplingParams(use_beam_search=True, temperature=0, n=10, length_penalty=2.0,
                   early_stopping="never")


def test_max_logprobs_bounds_logprobs_and_beams():
    # vLLM's LLM(max_logprobs=...): checked when generate() runs, before
    # anything does (SamplingParams does not know the engine's).
    small = LLM(model=MODEL, device="cpu", max_logprobs=4)
    (out,) = small.generate("Once", SamplingParams(max_tokens=2, logprobs=4), use_tqdm=False)
    assert all(len(p) >= 4 for p in out.outputs[0].logprobs)
    with pytest.raises(ValueError, match="logprobs must be between 0 and 4, got 5"):
        small.generate("Once", SamplingParams(max_tokens=2, logprobs=5), use_tqdm=False)
    with pytest.raises(ValueError, match="n=3 is too many beams"):
        small.generate("Once", SamplingParams(use_beam_search=True, temperature=0, n=3),
                       use_tqdm=False)
    with pytest.raises(ValueError, match="max_logprobs must be in"):
        LLM(model=MODEL, device="cpu", max_logprobs=21)


def test_a_model_path_that_is_a_file_is_not_a_directory():
    with pytest.raises(RuntimeError, match="is not a directory"):
        LLM(model=os.path.join(ROOT, "README.md"), device="cpu")


def test_detokenize_false_leaves_text_empty(llm):
    (out,) = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=4,
                                                             detokenize=False), use_tqdm=False)
    assert out.outputs[0].text == ""
    assert len(out.outputs[0].token_ids) == 4


def test_get_tokenizer_and_tokenizer_argument(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("Once upon a time")
    (out,) = llm.generate("Once upon a time", SamplingParams(max_tokens=1), use_tqdm=False)
    assert ids == out.prompt_token_ids
    assert tok.decode(ids) == "Once upon a time"
    # Earlier tests ran this prompt: its partial block may be cached, but the
    # last prompt token is always computed.
    assert 0 <= out.num_cached_tokens < len(ids)
    LLM(model=MODEL, tokenizer=MODEL, device="cpu")
    with pytest.raises(ValueError, match="tokenizer"):
        LLM(model=MODEL, tokenizer="hf-internal-testing/llama-tokenizer", device="cpu")


def test_num_cached_tokens_counts_the_prefix_cache_hits(llm):
    # 40 token ids, 2 output tokens: the second run of the same prompt reads
    # the first run's two full 16-token blocks and 7 tokens of its partly
    # filled third block: all but the last prompt token, which is computed.
    ids = list(range(100, 140))
    params = SamplingParams(max_tokens=2, temperature=0)
    (first,) = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    (second,) = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    assert first.num_cached_tokens == 0
    assert second.num_cached_tokens == 39
    assert second.outputs[0].token_ids == first.outputs[0].token_ids
    assert "num_cached_tokens=39" in repr(second)


def test_integer_sampling_fields_must_be_ints():
    # vLLM's SamplingParams._verify_args: "n must be an int, but is of type
    # <class 'float'>" (a ValueError); the same for the other integer fields
    # (the HTTP API's lax 2.0 is JSON's, not Python's).
    for key, value in [("n", 2.0), ("best_of", 3.0), ("max_tokens", 4.0), ("min_tokens", 1.0),
                       ("top_k", 5.0), ("seed", 1.5), ("logprobs", 2.0), ("prompt_logprobs", 1.0),
                       ("truncate_prompt_tokens", 8.0), ("n", True), ("n", "2")]:
        with pytest.raises(ValueError, match=f"{key} must be an int, but is of type"):
            SamplingParams(**{key: value})
    for key in ("stop_token_ids", "allowed_token_ids"):
        with pytest.raises(ValueError, match=f"{key} must be a list of ints"):
            SamplingParams(**{key: [1, 2.0]})
    # Set after construction: refused when generate() reads it.
    sp = SamplingParams(max_tokens=2)
    sp.n = 2.0
    with pytest.raises(ValueError, match="n must be an int"):
        sp.to_dict()
    # ints (and None where the field allows it) pass.
    SamplingParams(n=2, best_of=3, max_tokens=None, seed=7, top_k=-1, stop_token_ids=[1, 2])


def test_engine_args_that_would_change_vllms_behaviour_are_refused():
    import warnings
    # Non-default values vLLM acts on, which Pagoda cannot honour: an error
    # naming the argument, before the model loads.
    for kwargs, name in [(dict(task="embed"), "task"), (dict(task="classify"), "task"),
                         (dict(tokenizer_mode="mistral"), "tokenizer_mode"),
                         (dict(tokenizer_mode="slow"), "tokenizer_mode")]:
        with pytest.raises(ValueError, match=f"LLM argument '{name}'"):
            LLM(model=MODEL, device="cpu", **kwargs)
    # Their defaults (and the values that select what Pagoda does) load
    # without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LLM(model=MODEL, device="cpu", task="auto", tokenizer_mode="auto", trust_remote_code=False,
            revision=None, cpu_offload_gb=0, hf_token=None)
        LLM(model=MODEL, device="cpu", task="generate", tokenizer_mode="hf")
    # Performance knobs (and a model without remote code) change nothing:
    # a warning only.
    with pytest.warns(UserWarning, match="'cpu_offload_gb' has no effect"):
        LLM(model=MODEL, device="cpu", cpu_offload_gb=4)
    with pytest.warns(UserWarning, match="'trust_remote_code' has no effect"):
        LLM(model=MODEL, device="cpu", trust_remote_code=True)


def test_trust_remote_code_with_a_models_own_code_is_refused(tmp_path):
    # A model whose config.json maps classes to its own code (auto_map):
    # vLLM with trust_remote_code=True runs that code; Pagoda cannot.
    import shutil
    model = tmp_path / "remote"
    shutil.copytree(MODEL, model)
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_x.XConfig"}
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="LLM argument 'trust_remote_code'"):
        LLM(model=str(model), device="cpu", trust_remote_code=True)


def content_format_reference():
    with open(os.path.join(ROOT, "tests", "data", "content_format_reference.json")) as f:
        return json.load(f)


def content_format_case(ref, name):
    (case,) = [c for c in ref["cases"] if c["name"] == name]
    source = ref["print_template"]
    if case["template"]:
        with open(os.path.join(ROOT, "tests", "data", "vllm_chat_templates",
                               case["template"])) as f:
            source = f.read()
    return case, source


def test_chat_template_content_format_renders_as_jinja2(llm):
    # tests/data/content_format_reference.json: Jinja2's renderings of chats
    # with list content, handed over as vLLM's parse_chat_messages does.
    ref = content_format_reference()
    params = SamplingParams(temperature=0, max_tokens=1)
    # A template that loops over message['content'] (vLLM's vlm2vec_phi3v):
    # auto finds "openai", as vLLM's test_resolve_content_format_examples.
    case, source = content_format_case(ref, "vlm2vec_phi3v_openai_parts")
    for fmt in ("auto", "openai"):
        (out,) = llm.chat(case["messages"], params, use_tqdm=False, chat_template=source,
                          chat_template_content_format=fmt,
                          add_generation_prompt=case["add_generation_prompt"])
        assert out.prompt == case["rendered"], fmt
    # A template that prints content: "openai" hands it the list (printed
    # as Python's repr), "string" and auto (no loop over content) the text.
    case, source = content_format_case(ref, "print_openai_parts")
    (out,) = llm.chat(case["messages"], params, use_tqdm=False, chat_template=source,
                      chat_template_content_format="openai", add_generation_prompt=False)
    assert out.prompt == case["rendered"]
    case, source = content_format_case(ref, "print_string_parts")
    for fmt in ("auto", "string"):
        (out,) = llm.chat(case["messages"], params, use_tqdm=False, chat_template=source,
                          chat_template_content_format=fmt, add_generation_prompt=False)
        assert out.prompt == case["rendered"], fmt
    # A template that adds content to a string cannot take a list (Jinja2's
    # TypeError): vLLM answers the chat with an error too.
    case, source = content_format_case(ref, "chatml_openai_parts")
    assert "error" in case
    with pytest.raises(ValueError, match="[Cc]hat template"):
        llm.chat(case["messages"], params, use_tqdm=False, chat_template=source,
                 chat_template_content_format="openai")
    with pytest.raises(ValueError, match="chat_template_content_format"):
        llm.chat(case["messages"], params, use_tqdm=False, chat_template=source,
                 chat_template_content_format="list")


def test_chat_template_content_format_auto_detects_the_models_template():
    # The model's own template (here LLM(chat_template=...)) is detected once.
    ref = content_format_reference()
    case, source = content_format_case(ref, "vlm2vec_phi3v_openai_parts")
    llm = LLM(model=MODEL, device="cpu", chat_template=source)
    (out,) = llm.chat(case["messages"], SamplingParams(temperature=0, max_tokens=1),
                      use_tqdm=False, add_generation_prompt=False)
    assert out.prompt == case["rendered"]


def test_cache_salt_in_the_prompt_dict_separates_prefix_caches(llm):
    # vLLM's TextPrompt / TokensPrompt "cache_salt": prompts share cached
    # blocks only under the same salt (40 ids: 39 cached on a hit, as in
    # test_num_cached_tokens_counts_the_prefix_cache_hits).
    ids = list(range(200, 240))
    params = SamplingParams(max_tokens=2, temperature=0)
    runs = [llm.generate({"prompt_token_ids": ids, "cache_salt": salt}, params, use_tqdm=False)[0]
            for salt in ("alpha", "beta", "alpha")]
    (unsalted,) = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    assert [r.num_cached_tokens for r in runs] == [0, 0, 39]
    assert unsalted.num_cached_tokens == 0
    assert runs[2].outputs[0].token_ids == runs[0].outputs[0].token_ids
    (text,) = llm.generate({"prompt": "Once upon a time", "cache_salt": "alpha"}, params,
                           use_tqdm=False)
    assert text.prompt == "Once upon a time"
    with pytest.raises(ValueError, match="'cache_salt' must be a string, got int"):
        llm.generate({"prompt": "Once", "cache_salt": 3}, params, use_tqdm=False)


def test_an_empty_cache_salt_is_no_salt(llm):
    # vLLM's renderer keeps a prompt's cache_salt only when it is true
    # (`if cache_salt := prompt.get("cache_salt")`): "" and None are no salt,
    # so such a prompt shares the unsalted prompts' cached blocks (it used to
    # be refused).
    ids = list(range(300, 340))
    params = SamplingParams(max_tokens=2, temperature=0)
    (first,) = llm.generate({"prompt_token_ids": ids}, params, use_tqdm=False)
    assert first.num_cached_tokens == 0
    for salt in ("", None):
        (out,) = llm.generate({"prompt_token_ids": ids, "cache_salt": salt}, params,
                              use_tqdm=False)
        assert out.num_cached_tokens == 39, salt
        assert out.outputs[0].token_ids == first.outputs[0].token_ids
    (salted,) = llm.generate({"prompt_token_ids": ids, "cache_salt": "gamma"}, params,
                             use_tqdm=False)
    assert salted.num_cached_tokens == 0


def test_detokenize_false_leaves_decoded_token_none(llm):
    # vLLM gives a request with detokenize=False no tokenizer: every
    # Logprob.decoded_token is None (they used to be filled).
    sp = SamplingParams(temperature=0, max_tokens=3, logprobs=2, prompt_logprobs=1,
                        detokenize=False)
    (out,) = llm.generate("Once upon a time", sp, use_tqdm=False)
    assert out.outputs[0].text == ""
    assert out.prompt_logprobs[0] is None
    entries = [lp for pos in out.outputs[0].logprobs for lp in pos.values()]
    entries += [lp for pos in out.prompt_logprobs[1:] for lp in pos.values()]
    assert len(entries) >= 10
    assert all(lp.decoded_token is None for lp in entries)
    (shown,) = llm.generate("Once upon a time",
                            SamplingParams(temperature=0, max_tokens=3, logprobs=2,
                                           prompt_logprobs=1), use_tqdm=False)
    assert all(isinstance(lp.decoded_token, str)
               for pos in shown.outputs[0].logprobs for lp in pos.values())


def test_min_tokens_is_checked_against_max_tokens_as_given():
    # vLLM's SamplingParams holds min_tokens to max_tokens as given; the
    # context's room is not checked (generation stops at max_model_len,
    # "length"). It used to be refused against the room left.
    small = LLM(model=MODEL, device="cpu", max_model_len=32)
    (out,) = small.generate("Once upon a time",
                            SamplingParams(temperature=0, max_tokens=40, min_tokens=30),
                            use_tqdm=False)
    assert len(out.prompt_token_ids) + len(out.outputs[0].token_ids) == 32
    assert out.outputs[0].finish_reason == "length"


def test_chat_tools_reach_the_template_as_given_in_key_order():
    # tests/data/offline_tools_reference.json: Jinja2's renderings of the
    # Qwen2.5 template (the tiny Qwen2 chat model's own) with tools and
    # tool-call arguments whose keys are out of sorted order, as vLLM's
    # LLM.chat hands them over.
    with open(os.path.join(ROOT, "tests", "data", "offline_tools_reference.json")) as f:
        ref = json.load(f)
    llm = LLM(model=os.path.join(SHARED, "models", "tiny-random-qwen2-chat"), device="cpu")
    params = SamplingParams(temperature=0, max_tokens=1)
    for case in ref["cases"]:
        (out,) = llm.chat(case["messages"], params, use_tqdm=False, tools=case["tools"])
        assert out.prompt == case["rendered"], case["name"]
    # A batch of conversations shares the tools.
    first = ref["cases"][0]
    outs = llm.chat([first["messages"]] * 2, params, use_tqdm=False, tools=first["tools"])
    assert [o.prompt for o in outs] == [first["rendered"]] * 2
    with pytest.raises(ValueError, match="tools"):
        llm.chat(first["messages"], params, use_tqdm=False, tools="get_weather")
    # Each tool a dict, as transformers' apply_chat_template checks.
    with pytest.raises(ValueError, match="Tools should either be a JSON schema"):
        llm.chat(first["messages"], params, use_tqdm=False, tools=["get_weather"])

    def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: The city.
        """
        return city

    with pytest.raises(NotImplementedError, match="Python functions"):
        llm.chat(first["messages"], params, use_tqdm=False, tools=[get_weather])
