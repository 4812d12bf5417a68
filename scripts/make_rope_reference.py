#!/usr/bin/env python3
"""transformers' own rotary frequencies for the rope_scaling configs of
tests/unit/model_rope_test.cpp (Qwen2.5-7B's head shape), written as JSON:
the reference those tests compare their properties against today. Needs
torch and transformers (the device machine has them):

    python3 scripts/make_rope_reference.py tests/data/rope_reference.json
"""
import json
import sys

import torch  # noqa: F401  (transformers' rope functions build torch tensors)
import transformers
from transformers import Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

CASES = [
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 32768),
    ({"type": "yarn", "factor": 4.0}, 32768),
    ({"type": "yarn", "factor": 4.0, "attention_factor": 1.5}, 32768),
    ({"type": "yarn", "factor": 8.0, "beta_fast": 16, "beta_slow": 2}, 4096),
    ({"type": "linear", "factor": 2.0}, 32768),
]


def main(path):
    out = {"transformers": transformers.__version__, "cases": []}
    for rope_scaling, max_pos in CASES:
        cfg = Qwen2Config(hidden_size=3584, intermediate_size=18944, num_attention_heads=28,
                          num_key_value_heads=4, rope_theta=1000000.0,
                          max_position_embeddings=max_pos, rope_scaling=dict(rope_scaling))
        kind = rope_scaling["type"]
        inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[kind](cfg, "cpu")
        out["cases"].append({"rope_scaling": rope_scaling, "max_position_embeddings": max_pos,
                             "inv_freq": [float(x) for x in inv_freq],
                             "attention_factor": float(attention_factor)})
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
