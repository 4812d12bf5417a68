# Beam-search references from HF transformers (run on the device machine,
# CPU float32): tests/data/beam_search_reference.json. See "how" below.
import json, random, sys
import torch, transformers
from transformers import LlamaForCausalLM

torch.manual_seed(0)
MODELS = [("stories260K", "models/stories260K"),
          ("tiny-random-llama", ".devcarry/shared/models/tiny-random-llama")]
cases = []
for name, path in MODELS:
    try:
        model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)
    except TypeError:
        model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    model.eval()
    cfg = model.config
    eos = cfg.eos_token_id if isinstance(cfg.eos_token_id, int) else cfg.eos_token_id[0]
    rng = random.Random(11)
    vocab = cfg.vocab_size
    prompts = [[1] + [rng.randrange(3, min(vocab, 500)) for _ in range(n)] for n in (3, 9, 20)]
    for pi, ids in enumerate(prompts):
        inp = torch.tensor([ids])
        with torch.no_grad():
            g = model.generate(inp, do_sample=False, num_beams=1, max_new_tokens=4, eos_token_id=None,
                               pad_token_id=0)
        greedy = g[0, len(ids):].tolist()
        extra = greedy[2] if greedy[2] != eos else greedy[1]
        eos_ids = [eos, extra]
        for es in (True, False, "never"):
            for lp in (1.0, 0.5):
                with torch.no_grad():
                    out = model.generate(inp, do_sample=False, num_beams=4, num_return_sequences=4,
                                         max_new_tokens=12, early_stopping=es, length_penalty=lp,
                                         eos_token_id=eos_ids, pad_token_id=0, output_scores=True,
                                         return_dict_in_generate=True, temperature=None, top_p=None,
                                         top_k=None)
                beams = []
                for b in range(4):
                    gen = out.sequences[b, len(ids):].tolist()
                    cut = []
                    for t in gen:
                        cut.append(t)
                        if t in eos_ids:
                            break
                    beams.append({"token_ids": cut, "score": float(out.sequences_scores[b])})
                cases.append({"model": name, "prompt_ids": ids, "eos_token_ids": eos_ids, "num_beams": 4,
                              "max_new_tokens": 12, "length_penalty": lp, "early_stopping": es,
                              "beams": beams})
json.dump({"how": ("HF transformers %s (torch %s, CPU, float32) LlamaForCausalLM.generate(input_ids, "
                   "do_sample=False, num_beams=4, num_return_sequences=4, max_new_tokens=12, early_stopping=ES, "
                   "length_penalty=LP, eos_token_id=[config eos, X]) on models/stories260K and "
                   "../shared/models/tiny-random-llama; X is the third token of the prompt's greedy "
                   "continuation (so beams finish early); prompts: BOS + random ids (random.Random(11)); "
                   "token_ids: the generated tokens up to and including the first EOS (HF pads after it); "
                   "score: sequences_scores (sum of log-softmax logprobs / generated_length ** LP). "
                   "Script: tests/data/beam_search_reference.py, run from the repository root on the device "
                   "machine.") % (transformers.__version__, torch.__version__),
           "cases": cases}, sys.stdout, indent=1)
