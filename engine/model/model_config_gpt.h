// ModelConfig for the GPT-style families (GPT-2, GPT-NeoX, GPT-J, Falcon,
// BLOOM): their config.json field names (HF transformers' GPT2Config,
// GPTNeoXConfig, GPTJConfig, FalconConfig, BloomConfig) mapped onto
// ModelConfig's rows of options. Used by model_config.cpp.
#pragma once
#include <string>

#include "engine/model/config_reader.h"
#include "engine/model/model_config.h"

namespace pagoda {

// True for GPTNeoXForCausalLM, GPT2LMHeadModel, FalconForCausalLM,
// GPTJForCausalLM and BloomForCausalLM.
bool is_gpt_family(const std::string& architecture);

// Reads the sizes, norms, positions, activation and biases of c.architecture
// (already set) from r. Throws std::runtime_error naming the field for a
// missing or malformed one and for variants not supported (Falcon's
// new_decoder_architecture and alibi, rope_scaling, BLOOM's
// apply_residual_connection_post_layernorm, GPT-2's scale_attn_by_inverse_
// layer_idx / reorder_and_upcast_attn, ...).
void parse_gpt_family(const ConfigReader& r, ModelConfig& c);

}  // namespace pagoda
