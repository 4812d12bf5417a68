// ModelConfig parsing: field names and defaults as in HF transformers'
// LlamaConfig / Qwen2Config (configuration_llama.py, configuration_qwen2.py).
#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/model/config_reader.h"
#include "engine/model/model_config_gpt.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

using Reader = ConfigReader;

DType parse_torch_dtype(const Reader& r, const char* field, const std::string& s) {
  if (s == "float32" || s == "float") return DType::F32;
  if (s == "bfloat16") return DType::BF16;
  if (s == "float16" || s == "half") return DType::F16;
  r.fail(field, "unsupported dtype '" + s + "' (expected float32, bfloat16 or float16)");
}

RopeScaling parse_rope_scaling(const Reader& r, const char* field, const json& rs) {
  RopeScaling out;
  if (rs.is_null()) return out;
  if (!rs.is_object()) r.fail(field, "must be null or an object");
  std::string type;
  if (rs.contains("rope_type") && rs["rope_type"].is_string())
    type = rs["rope_type"];
  else if (rs.contains("type") && rs["type"].is_string())
    type = rs["type"];
  if (type.empty() || type == "default") return out;
  auto num = [&](const char* k, double def) {
    if (!rs.contains(k) || rs[k].is_null()) return def;
    if (!rs[k].is_number()) r.fail(std::string(field) + "." + k, "must be a number");
    return rs[k].get<double>();
  };
  // A position count: an integer in [1, 2^31) (no float-to-integer cast of
  // an arbitrary double); `def` when absent.
  auto positions = [&](const char* k, int64_t def) {
    if (!rs.contains(k) || rs[k].is_null()) return def;
    const int64_t v = rs[k].is_number_integer() ? rs[k].get<int64_t>() : 0;
    if (v <= 0 || v >= (int64_t{1} << 31))
      r.fail(std::string(field) + "." + k,
             "must be a positive integer below 2^31, got " + rs[k].dump());
    return v;
  };
  if (type == "linear") {
    out.rope_type = "linear";
    if (!rs.contains("factor"))
      r.fail(std::string(field) + ".factor", "missing (required for linear)");
    out.factor = num("factor", 1.0);
  } else if (type == "llama3") {
    out.rope_type = "llama3";
    for (const char* k :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!rs.contains(k)) r.fail(std::string(field) + "." + k, "missing (required for llama3)");
    out.factor = num("factor", 1.0);
    out.low_freq_factor = num("low_freq_factor", 1.0);
    out.high_freq_factor = num("high_freq_factor", 4.0);
    out.original_max_position_embeddings = positions("original_max_position_embeddings", 8192);
    if (out.high_freq_factor <= out.low_freq_factor)
      r.fail(std::string(field) + ".high_freq_factor", "must exceed low_freq_factor");
  } else if (type == "yarn") {
    out.rope_type = "yarn";
    if (!rs.contains("factor"))
      r.fail(std::string(field) + ".factor", "missing (required for yarn)");
    // DeepSeek's variant (mscale, mscale_all_dim) also rescales attention;
    // a switched-off truncation changes the correction range.
    for (const char* k : {"mscale", "mscale_all_dim"})
      if (rs.contains(k) && !rs[k].is_null())
        r.fail(std::string(field) + "." + k, "is not supported (DeepSeek's yarn variant)");
    if (rs.contains("truncate") && rs["truncate"] != true)
      r.fail(std::string(field) + ".truncate", "only true (the default) is supported");
    out.factor = num("factor", 1.0);
    out.original_max_position_embeddings = positions("original_max_position_embeddings", 0);
    out.beta_fast = num("beta_fast", 32.0);
    out.beta_slow = num("beta_slow", 1.0);
    out.attention_factor = num("attention_factor", 0.0);
    if (!(out.beta_fast > 0) || !(out.beta_slow > 0))
      r.fail(std::string(field) + ".beta_fast", "beta_fast and beta_slow must be positive");
    if (out.attention_factor < 0)
      r.fail(std::string(field) + ".attention_factor", "must be positive");
  } else if (type == "dynamic") {
    // vLLM's DynamicNTKScalingRotaryEmbedding: one fixed table for
    // max_position_embeddings * factor positions (rope.cpp). HF transformers
    // instead recomputes the frequencies from each forward's length (equal
    // to the unscaled rotary up to max_position_embeddings); Pagoda follows
    // vLLM, whose users this serves.
    out.rope_type = "dynamic";
    if (!rs.contains("factor"))
      r.fail(std::string(field) + ".factor", "missing (required for dynamic)");
    if (rs.contains("alpha") && !rs["alpha"].is_null())
      r.fail(std::string(field) + ".alpha", "is not supported (dynamic NTK-alpha)");
    out.factor = num("factor", 1.0);
    if (!(out.factor >= 1.0)) r.fail(std::string(field) + ".factor", "must be >= 1 for dynamic");
  } else {
    r.fail(field,
           "unsupported rope type '" + type + "' (supported: linear, dynamic, llama3, yarn)");
  }
  // Bounded so that a derived context length stays a sane integer.
  if (!(out.factor > 0 && out.factor <= 1024))
    r.fail(std::string(field) + ".factor", "must be in (0, 1024]");
  return out;
}

// The Llama family's fields (Llama, Qwen2/3, Mistral, Phi-3, Mixtral,
// Gemma 2, Qwen2-MoE): HF's LlamaConfig names and each one's additions.
void parse_llama_family(const Reader& r, ModelConfig& c) {
  const json& j = r.j;
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  const bool qwen3 = c.architecture == "Qwen3ForCausalLM";
  const bool qwen2_moe = c.architecture == "Qwen2MoeForCausalLM";
  const bool mixtral = c.architecture == "MixtralForCausalLM";
  const bool gemma2 = c.architecture == "Gemma2ForCausalLM";
  const bool phi3 = c.architecture == "Phi3ForCausalLM";
  const bool mistral = c.architecture == "MistralForCausalLM";
  // Baichuan (vLLM's baichuan.py): BaiChuanForCausalLM is Baichuan-7B
  // (rotary); BaichuanForCausalLM is Baichuan2-7B (rotary, told apart by
  // hidden_size 4096) or Baichuan-13B / Baichuan2-13B (ALiBi).
  const bool baichuan =
      c.architecture == "BaiChuanForCausalLM" || c.architecture == "BaichuanForCausalLM";

  c.hidden_size = r.get_positive("hidden_size", std::nullopt);
  c.intermediate_size = r.get_positive("intermediate_size", std::nullopt);
  c.num_hidden_layers = r.get_positive("num_hidden_layers", std::nullopt);
  c.num_attention_heads = r.get_positive("num_attention_heads", std::nullopt);
  c.num_key_value_heads = r.get_positive("num_key_value_heads", c.num_attention_heads);
  c.vocab_size = r.get_positive("vocab_size", std::nullopt);
  c.max_position_embeddings = r.get_positive("max_position_embeddings", 2048);
  if (baichuan) {
    // The 13B configs give model_max_length alone; as vLLM's
    // _get_and_verify_max_len: the smallest of the lengths present, 2048
    // when none is.
    int64_t len = 0;
    for (const char* k : {"max_position_embeddings", "model_max_length"})
      if (r.has(k)) {
        const int64_t v = r.get_positive(k, std::nullopt);
        len = len == 0 ? v : std::min(len, v);
      }
    c.max_position_embeddings = len == 0 ? 2048 : len;
  }
  if (r.has("head_dim")) {
    c.head_dim = r.get_positive("head_dim", std::nullopt);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("num_attention_heads", "hidden_size " + std::to_string(c.hidden_size) +
                                        " is not divisible by " +
                                        std::to_string(c.num_attention_heads) + " heads");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", "must be even for rotary embeddings");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", std::to_string(c.num_key_value_heads) +
                                      " does not divide num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
  c.rms_norm_eps = r.get_double("rms_norm_eps", qwen2 ? 1e-6 : 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");

  // transformers >= 5 may nest rope settings in "rope_parameters".
  const json* rope_params = nullptr;
  if (r.has("rope_parameters")) {
    if (!j["rope_parameters"].is_object()) r.fail("rope_parameters", "must be an object");
    rope_params = &j["rope_parameters"];
  }
  c.rope_theta = r.get_double("rope_theta", 10000.0);
  if (rope_params && rope_params->contains("rope_theta")) {
    if (!(*rope_params)["rope_theta"].is_number())
      r.fail("rope_parameters.rope_theta", "must be a number");
    c.rope_theta = (*rope_params)["rope_theta"].get<double>();
  }
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");
  if (r.has("rope_scaling"))
    c.rope_scaling = parse_rope_scaling(r, "rope_scaling", j["rope_scaling"]);
  else if (rope_params)
    c.rope_scaling = parse_rope_scaling(r, "rope_parameters", *rope_params);

  // Gemma 2 ties its embeddings unless told otherwise (Gemma2Config).
  c.tie_word_embeddings = r.get_bool("tie_word_embeddings", gemma2);
  if (qwen2)
    c.attention_bias = true;
  else if (qwen2_moe)
    c.attention_bias = r.get_bool("qkv_bias", true);
  else
    c.attention_bias = r.get_bool("attention_bias", false);
  c.mlp_bias = r.get_bool("mlp_bias", false);
  if (c.mlp_bias) r.fail("mlp_bias", "true is not supported");
  if (gemma2) {
    // Gemma2Config: hidden_activation (hidden_act is its legacy name).
    c.hidden_act =
        r.get_string("hidden_activation", r.get_string("hidden_act", "gelu_pytorch_tanh"));
    if (c.hidden_act != "gelu_pytorch_tanh")
      r.fail("hidden_activation",
             "unsupported activation '" + c.hidden_act + "' (supported: gelu_pytorch_tanh)");
  } else {
    c.hidden_act = r.get_string("hidden_act", "silu");
    if (c.hidden_act != "silu")
      r.fail("hidden_act", "unsupported activation '" + c.hidden_act + "' (supported: silu)");
  }
  if (r.has("partial_rotary_factor") && r.get_double("partial_rotary_factor", 1.0) != 1.0)
    r.fail("partial_rotary_factor",
           "partial rotary embeddings are not supported for " + c.architecture);
  if ((qwen2 || qwen3 || qwen2_moe) && r.get_bool("use_sliding_window", false))
    r.fail("use_sliding_window", "sliding-window attention is not supported for " + c.architecture);
  if (qwen2_moe && r.has("layer_types"))
    for (const json& t : j["layer_types"])
      if (t != "full_attention")
        r.fail("layer_types", "only full_attention layers are supported for " + c.architecture);
  if (qwen3 && r.has("layer_types"))
    for (const json& t : j["layer_types"])
      if (t != "full_attention")
        r.fail("layer_types", "only full_attention layers are supported for " + c.architecture);

  c.layer_sliding_window.assign(static_cast<size_t>(c.num_hidden_layers), 0);
  if (mistral || mixtral || phi3) {
    // Every layer (MistralModel: a sliding-window causal mask when set).
    if (r.has("sliding_window")) {
      const int64_t w = r.get_positive("sliding_window", std::nullopt);
      c.layer_sliding_window.assign(static_cast<size_t>(c.num_hidden_layers), w);
    }
  }
  c.qk_norm = qwen3;
  if (phi3) {
    c.fused_qkv = "qkv_proj";
    c.fused_gate_up = true;
  }
  if (baichuan) {
    // W_pack [3H, H]: q, k and v of every head, no grouped-query attention.
    if (c.num_key_value_heads != c.num_attention_heads)
      r.fail("num_key_value_heads", std::to_string(c.num_key_value_heads) +
                                        " differs from num_attention_heads " +
                                        std::to_string(c.num_attention_heads) +
                                        " (Baichuan's W_pack holds q, k and v of every head)");
    if (c.head_dim * c.num_attention_heads != c.hidden_size)
      r.fail("head_dim", std::to_string(c.head_dim) + " x " +
                             std::to_string(c.num_attention_heads) +
                             " heads differs from hidden_size " + std::to_string(c.hidden_size) +
                             " (Baichuan's W_pack is [3 x hidden_size, hidden_size])");
    c.fused_qkv = "W_pack";
    c.alibi = c.architecture == "BaichuanForCausalLM" && c.hidden_size != 4096;
    if (c.alibi) {
      c.rotary_dim = 0;
      if (!c.rope_scaling.rope_type.empty())
        r.fail("rope_scaling", "is not supported for " + c.architecture + " with hidden_size " +
                                   std::to_string(c.hidden_size) +
                                   " (ALiBi positions, no rotary embeddings)");
    }
    // Baichuan2 (vocabulary 125696, vLLM's test) normalises lm_head's rows.
    c.norm_head = c.vocab_size == 125696;
    if (c.norm_head && c.tie_word_embeddings)
      r.fail("tie_word_embeddings",
             "true is not supported with Baichuan2's normalised lm_head (vocab_size 125696)");
  }
  if (gemma2) {
    c.norm_one_plus = true;
    c.sandwich_norm = true;
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
    c.attn_logit_softcap = r.get_double("attn_logit_softcapping", 0.0);
    c.final_logit_softcap = r.get_double("final_logit_softcapping", 0.0);
    if (c.attn_logit_softcap < 0) r.fail("attn_logit_softcapping", "must be positive or null");
    if (c.final_logit_softcap < 0) r.fail("final_logit_softcapping", "must be positive or null");
    c.attn_scale =
        1.0 / std::sqrt(static_cast<double>(r.get_positive("query_pre_attn_scalar", 256)));
    if (r.has("use_bidirectional_attention") && r.get_bool("use_bidirectional_attention", false))
      r.fail("use_bidirectional_attention", "bidirectional attention is not supported");
    const int64_t w = r.get_positive("sliding_window", 4096);
    if (r.has("layer_types")) {
      const json& lt = j["layer_types"];
      if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.num_hidden_layers)
        r.fail("layer_types", "must list one type per layer");
      for (size_t l = 0; l < lt.size(); ++l) {
        if (lt[l] == "sliding_attention")
          c.layer_sliding_window[l] = w;
        else if (lt[l] != "full_attention")
          r.fail("layer_types", "unsupported layer type " + lt[l].dump());
      }
    } else {  // Gemma2Config's default: sliding on even layers
      for (size_t l = 0; l < c.layer_sliding_window.size(); l += 2) c.layer_sliding_window[l] = w;
    }
  }
  if (mixtral) {
    c.num_experts = r.get_positive("num_local_experts", 8);
    c.num_experts_per_tok = r.get_positive("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
  }
  if (qwen2_moe) {
    c.qwen2_moe_names = true;
    c.num_experts = r.get_positive("num_experts", 60);
    c.num_experts_per_tok = r.get_positive("num_experts_per_tok", 4);
    c.moe_intermediate_size = r.get_positive("moe_intermediate_size", 1408);
    c.shared_expert_intermediate_size = r.get_positive("shared_expert_intermediate_size", 5632);
    c.norm_topk_prob = r.get_bool("norm_topk_prob", false);
    if (r.get_int("decoder_sparse_step", 1) != 1)
      r.fail("decoder_sparse_step", "only 1 (every layer sparse) is supported");
    if (r.has("mlp_only_layers") &&
        !(j["mlp_only_layers"].is_array() && j["mlp_only_layers"].empty()))
      r.fail("mlp_only_layers", "dense layers among sparse ones are not supported");
  }
  if (c.num_experts > 0 && c.num_experts_per_tok > c.num_experts)
    r.fail("num_experts_per_tok", "exceeds the number of experts");
}

}  // namespace

ModelConfig ModelConfig::from_dir(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("config " + path +
                             ": cannot open (missing model directory or config.json?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& ex) {
    throw std::runtime_error("config " + source + ": bad JSON: " + ex.what());
  }
  if (!j.is_object()) throw std::runtime_error("config " + source + ": not a JSON object");
  Reader r{j, source};
  ModelConfig c;

  c.model_type = r.get_string("model_type", "");
  // Architectures the one model definition covers, with their model_type.
  static const std::pair<const char*, const char*> kArchs[] = {
      {"LlamaForCausalLM", "llama"},
      {"Qwen2ForCausalLM", "qwen2"},
      {"MistralForCausalLM", "mistral"},
      {"Qwen3ForCausalLM", "qwen3"},
      {"Phi3ForCausalLM", "phi3"},
      {"MixtralForCausalLM", "mixtral"},
      {"Gemma2ForCausalLM", "gemma2"},
      {"Qwen2MoeForCausalLM", "qwen2_moe"},
      {"GPTNeoXForCausalLM", "gpt_neox"},
      {"GPT2LMHeadModel", "gpt2"},
      {"FalconForCausalLM", "falcon"},
      {"GPTJForCausalLM", "gptj"},
      {"BloomForCausalLM", "bloom"},
      // Without "architectures" the last entry of a model_type is taken:
      // AquilaForCausalLM, and BaichuanForCausalLM (which picks rotary or
      // ALiBi from hidden_size, so it also reads Baichuan-7B right).
      {"AquilaModel", "aquila"},
      {"AquilaForCausalLM", "aquila"},
      {"BaiChuanForCausalLM", "baichuan"},
      {"BaichuanForCausalLM", "baichuan"}};
  std::string supported;
  for (const auto& [a, t] : kArchs) supported += std::string(supported.empty() ? "" : ", ") + a;
  if (r.has("architectures")) {
    if (!j["architectures"].is_array() || j["architectures"].empty() ||
        !j["architectures"][0].is_string())
      r.fail("architectures", "must be a non-empty list of strings");
    c.architecture = j["architectures"][0].get<std::string>();
  } else {
    for (const auto& [a, t] : kArchs)
      if (c.model_type == t) c.architecture = a;
    if (c.architecture.empty())
      r.fail("architectures",
             "missing (and model_type '" + c.model_type + "' is not one of the supported ones)");
  }
  bool known = false;
  for (const auto& [a, t] : kArchs)
    if (c.architecture == a) {
      known = true;
      if (c.model_type.empty()) c.model_type = t;
    }
  if (!known)
    r.fail("architectures",
           "unsupported architecture '" + c.architecture + "' (supported: " + supported + ")");
  if (is_gpt_family(c.architecture))
    parse_gpt_family(r, c);
  else
    parse_llama_family(r, c);

  if (r.has("torch_dtype"))
    c.torch_dtype = parse_torch_dtype(r, "torch_dtype", r.get_string("torch_dtype", ""));
  else if (r.has("dtype"))
    c.torch_dtype = parse_torch_dtype(r, "dtype", r.get_string("dtype", ""));

  if (r.has("bos_token_id")) c.bos_token_id = r.get_int("bos_token_id", std::nullopt);
  if (r.has("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) {
      c.eos_token_ids.push_back(e.get<int64_t>());
    } else if (e.is_array()) {
      for (const json& v : e) {
        if (!v.is_number_integer()) r.fail("eos_token_id", "list entries must be integers");
        c.eos_token_ids.push_back(v.get<int64_t>());
      }
    } else {
      r.fail("eos_token_id", "must be an integer or a list of integers");
    }
  }
  if (j.contains("quantization_config"))
    c.quantization = parse_quant_config(j["quantization_config"], source);
  return c;
}

int64_t derived_max_model_len(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  // Scaled in double, capped far below int64's range before the cast.
  const auto scaled = [&](int64_t n) {
    return static_cast<int64_t>(std::min(static_cast<double>(n) * s.factor, 1e15));
  };
  if (s.rope_type == "linear" || s.rope_type == "dynamic") return scaled(c.max_position_embeddings);
  if (s.rope_type == "yarn")
    return scaled(s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings
                                                         : c.max_position_embeddings);
  return c.max_position_embeddings;
}

void validate_tensor_parallel(const ModelConfig& c, int64_t tp) {
  if (tp < 1)
    throw std::runtime_error("tensor_parallel_size must be >= 1, got " + std::to_string(tp));
  auto check = [&](const char* field, int64_t v, const char* share) {
    if (v % tp != 0)
      throw std::runtime_error("tensor_parallel_size " + std::to_string(tp) + " does not divide " +
                               field + " " + std::to_string(v) + " of " + c.architecture +
                               " (each rank must hold " + share + "; choose a size dividing " +
                               field + ")");
  };
  check("num_attention_heads", c.num_attention_heads, "whole attention heads");
  check("num_key_value_heads", c.num_key_value_heads, "whole KV heads");
  if (c.num_experts == 0) {
    check("intermediate_size", c.intermediate_size, "an equal share of the MLP's columns");
  } else {
    // Every rank holds all experts, each cut to I / tp units (vLLM's
    // FusedMoE under tensor parallelism). Mixtral's expert width is its
    // intermediate_size; Qwen2-MoE's is moe_intermediate_size (its
    // intermediate_size belongs to dense layers, which it does not have
    // here: mlp_only_layers is refused), plus the shared expert's.
    check(c.qwen2_moe_names ? "moe_intermediate_size" : "intermediate_size",
          c.moe_intermediate_size, "an equal share of every expert's columns");
    if (c.shared_expert_intermediate_size > 0)
      check("shared_expert_intermediate_size", c.shared_expert_intermediate_size,
            "an equal share of the shared expert's columns");
  }
  if (tp > 1 && c.family != "llama")
    throw std::runtime_error(
        "tensor_parallel_size " + std::to_string(tp) + ": " + c.architecture +
        " runs on one rank only (its biases and parallel residual are not sharded)");
}

}  // namespace pagoda
