// shared/models/tiny-random-llama (LlamaForCausalLM: 4 heads, 4 KV heads,
// hidden 128, 3 layers, vocab 512, bf16) rewritten at test time into the
// published layouts of architectures that are mathematically Llama, so
// that its HF transformers reference (reference.json, made by someone else
// with LlamaForCausalLM) is the reference of the rewritten model too:
//  * Aquila (BAAI's AquilaForCausalLM / AquilaModel): the Llama tensor
//    names unchanged, config.json's architectures / model_type changed;
//  * Baichuan (baichuan-inc's modeling_baichuan.py): q/k/v fused into
//    model.layers.N.self_attn.W_pack.weight [3H, H] (q rows, then k, then
//    v), the rest under the Llama names, and Baichuan's config keys (no
//    num_key_value_heads, no rope_theta; model_max_length).
// BaiChuanForCausalLM (Baichuan-7B) is then the same function as the
// Llama model. BaichuanForCausalLM with this hidden size (128, not 4096)
// is the ALiBi variant (Baichuan-13B) instead: a different function, with
// no HF reference here.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit/checkpoint_rewrite.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {

inline std::string tiny_llama_dir() { return shared_model("tiny-random-llama"); }

inline nlohmann::json tiny_llama_config() {
  std::ifstream in(tiny_llama_dir() + "/config.json");
  return nlohmann::json::parse(in);
}

inline RawCheckpoint tiny_llama_weights() {
  return read_safetensors(tiny_llama_dir() + "/model.safetensors");
}

// The Llama checkpoint with every layer's q/k/v replaced by W_pack.
inline RawCheckpoint fuse_w_pack(RawCheckpoint ck, int64_t layers) {
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    ck[p + "W_pack.weight"] = concat_rows(
        {&ck.at(p + "q_proj.weight"), &ck.at(p + "k_proj.weight"), &ck.at(p + "v_proj.weight")});
    for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight"}) ck.erase(p + n);
  }
  return ck;
}

// Baichuan's config.json keys (those of the published Baichuan-7B /
// Baichuan2 configs) with tiny-random-llama's values. `length_key`:
// "max_position_embeddings" (Baichuan-7B) or "model_max_length" (the 13B
// models give only that one).
inline nlohmann::json baichuan_config(const std::string& architecture,
                                      const std::string& length_key) {
  const nlohmann::json l = tiny_llama_config();
  nlohmann::json c = {{"architectures", {architecture}},
                      {"model_type", "baichuan"},
                      {"bos_token_id", l["bos_token_id"]},
                      {"eos_token_id", l["eos_token_id"]},
                      {"pad_token_id", 0},
                      {"hidden_act", "silu"},
                      {"hidden_size", l["hidden_size"]},
                      {"initializer_range", 0.02},
                      {"intermediate_size", l["intermediate_size"]},
                      {"num_attention_heads", l["num_attention_heads"]},
                      {"num_hidden_layers", l["num_hidden_layers"]},
                      {"rms_norm_eps", l["rms_norm_eps"]},
                      {"tie_word_embeddings", l["tie_word_embeddings"]},
                      {"torch_dtype", l["torch_dtype"]},
                      {"use_cache", true},
                      {"vocab_size", l["vocab_size"]}};
  c[length_key] = l["max_position_embeddings"];
  return c;
}

// Writes tiny-random-llama in Baichuan's layout into `dir`.
inline void write_baichuan_layout(const TempModelDir& dir, const std::string& architecture,
                                  const std::string& length_key) {
  const nlohmann::json l = tiny_llama_config();
  dir.write(baichuan_config(architecture, length_key),
            fuse_w_pack(tiny_llama_weights(), l["num_hidden_layers"].get<int64_t>()));
}

// Writes tiny-random-llama in Aquila's layout (the Llama names) into `dir`.
inline void write_aquila_layout(const TempModelDir& dir, const std::string& architecture) {
  nlohmann::json c = tiny_llama_config();
  c["architectures"] = {architecture};
  c["model_type"] = "aquila";
  dir.write(c, tiny_llama_weights());
}

}  // namespace pagoda::test
