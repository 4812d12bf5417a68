// The GPT-style families' config.json fields (model_config_gpt.h), with
// transformers' defaults.
#include "engine/model/model_config_gpt.h"

#include <cmath>

namespace pagoda {

bool is_gpt_family(const std::string& a) {
  return a == "GPTNeoXForCausalLM" || a == "GPT2LMHeadModel" || a == "FalconForCausalLM" ||
         a == "GPTJForCausalLM" || a == "BloomForCausalLM";
}

namespace {

// hidden_act names of these configs onto the two the backends know.
std::string activation_name(const ConfigReader& r, const char* field, const std::string& act) {
  if (act == "gelu") return "gelu";
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return "gelu_new";
  r.fail(field, "unsupported activation '" + act +
                    "' (supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)");
}

void refuse_true(const ConfigReader& r, const char* field, const std::string& what) {
  if (r.get_bool(field, false)) r.fail(field, what + " is not supported");
}

}  // namespace

void parse_gpt_family(const ConfigReader& r, ModelConfig& c) {
  const std::string& a = c.architecture;
  c.layer_norm = true;
  c.gated_mlp = false;
  if (r.has("rope_scaling")) r.fail("rope_scaling", "rope scaling is not supported for " + a);
  if (a == "GPT2LMHeadModel" || a == "GPTJForCausalLM") {
    const bool gpt2 = a == "GPT2LMHeadModel";
    c.family = gpt2 ? "gpt2" : "gptj";
    c.hidden_size = r.get_positive("n_embd", 768);
    c.num_attention_heads = r.get_positive("n_head", 12);
    c.num_hidden_layers = r.get_positive("n_layer", 12);
    c.max_position_embeddings = r.get_positive("n_positions", gpt2 ? 1024 : 2048);
    c.intermediate_size = r.get_positive("n_inner", 4 * c.hidden_size);
    c.rms_norm_eps = r.get_double("layer_norm_epsilon", 1e-5);
    c.hidden_act =
        activation_name(r, "activation_function", r.get_string("activation_function", "gelu_new"));
    c.mlp_bias = true;
    c.tie_word_embeddings = r.get_bool("tie_word_embeddings", gpt2);
    if (gpt2) {
      c.learned_positions = true;
      c.rotary_dim = 0;
      c.attention_bias = true;
      c.o_bias = true;
      if (!r.get_bool("scale_attn_weights", true))
        r.fail("scale_attn_weights", "false is not supported");
      refuse_true(r, "scale_attn_by_inverse_layer_idx",
                  "scaling attention by the inverse layer index");
      refuse_true(r, "reorder_and_upcast_attn", "reorder_and_upcast_attn");
      refuse_true(r, "add_cross_attention", "cross-attention");
    } else {
      c.parallel_residual = true;
      c.rope_interleaved = true;
      c.lm_head_bias = true;
      c.rotary_dim = r.get_positive("rotary_dim", 64);
    }
  } else if (a == "GPTNeoXForCausalLM") {
    c.family = "gpt_neox";
    c.hidden_size = r.get_positive("hidden_size", std::nullopt);
    c.num_attention_heads = r.get_positive("num_attention_heads", std::nullopt);
    c.num_hidden_layers = r.get_positive("num_hidden_layers", std::nullopt);
    c.intermediate_size = r.get_positive("intermediate_size", std::nullopt);
    c.max_position_embeddings = r.get_positive("max_position_embeddings", 2048);
    c.rms_norm_eps = r.get_double("layer_norm_eps", 1e-5);
    c.hidden_act = activation_name(r, "hidden_act", r.get_string("hidden_act", "gelu"));
    c.attention_bias = r.get_bool("attention_bias", true);
    c.o_bias = c.attention_bias;
    c.mlp_bias = true;
    c.parallel_residual = r.get_bool("use_parallel_residual", true);
    c.parallel_two_norms = c.parallel_residual;
    c.tie_word_embeddings = r.get_bool("tie_word_embeddings", false);
    const double pct = r.get_double("rotary_pct", r.get_double("partial_rotary_factor", 0.25));
    c.rope_theta = r.get_double("rotary_emb_base", r.get_double("rope_theta", 10000.0));
    c.head_dim = c.hidden_size / c.num_attention_heads;
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * pct);
    if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
      r.fail("rotary_pct",
             "gives rotary dims " + std::to_string(c.rotary_dim) + " (must be even and positive)");
  } else if (a == "FalconForCausalLM") {
    c.family = "falcon";
    c.hidden_size = r.get_positive("hidden_size", 4544);
    c.num_attention_heads = r.get_positive("num_attention_heads", 71);
    c.num_hidden_layers = r.get_positive("num_hidden_layers", 32);
    c.intermediate_size = r.get_positive("ffn_hidden_size", 4 * c.hidden_size);
    c.max_position_embeddings = r.get_positive("max_position_embeddings", 2048);
    c.rms_norm_eps = r.get_double("layer_norm_epsilon", 1e-5);
    c.hidden_act = activation_name(r, "activation", r.get_string("activation", "gelu"));
    refuse_true(r, "new_decoder_architecture", "Falcon's new decoder architecture");
    refuse_true(r, "alibi", "Falcon with ALiBi");
    const bool bias = r.get_bool("bias", false);
    c.attention_bias = c.o_bias = c.mlp_bias = bias;
    c.parallel_residual = r.get_bool("parallel_attn", true);
    c.num_key_value_heads = r.get_bool("multi_query", true) ? 1 : c.num_attention_heads;
    c.tie_word_embeddings = r.get_bool("tie_word_embeddings", true);
    c.rope_theta = r.get_double("rope_theta", 10000.0);
  } else {  // BloomForCausalLM
    c.family = "bloom";
    c.hidden_size = r.get_positive("hidden_size", r.get_positive("n_embed", 64));
    c.num_attention_heads = r.get_positive("n_head", 8);
    c.num_hidden_layers = r.get_positive("n_layer", 2);
    c.intermediate_size = 4 * c.hidden_size;
    c.rms_norm_eps = r.get_double("layer_norm_epsilon", 1e-5);
    c.hidden_act = "gelu_new";  // BloomGelu: the tanh approximation
    refuse_true(r, "apply_residual_connection_post_layernorm",
                "apply_residual_connection_post_layernorm");
    refuse_true(r, "slow_but_exact", "slow_but_exact");
    c.alibi = true;
    c.rotary_dim = 0;
    c.embedding_norm = true;
    c.attention_bias = c.o_bias = c.mlp_bias = true;
    c.tie_word_embeddings = r.get_bool("tie_word_embeddings", true);
    c.max_position_embeddings = 4096;  // ALiBi: no table; the engine's default bound
  }
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  c.vocab_size = r.get_positive("vocab_size", std::nullopt);
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads", "does not divide hidden size " + std::to_string(c.hidden_size));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.rotary_dim > c.head_dim || (c.rotary_dim > 0 && c.rotary_dim % 2 != 0))
    r.fail("rotary_dim", std::to_string(c.rotary_dim) + " must be even and at most head_dim " +
                             std::to_string(c.head_dim));
  if (!(c.rms_norm_eps > 0)) r.fail("layer_norm_epsilon", "must be positive");
  c.layer_sliding_window.assign(static_cast<size_t>(c.num_hidden_layers), 0);
}

}  // namespace pagoda
