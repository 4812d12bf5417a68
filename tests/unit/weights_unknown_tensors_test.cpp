// A checkpoint tensor the model has no parameter for: vLLM's loaders raise
// (AutoWeightsLoader: "There is no module or parameter named ..."; the
// Llama-style models' own load_weights: a KeyError), except for the names
// they skip (AutoWeightsLoader.ROTARY_EMBEDS_UNUSED_WEIGHTS, the head of tied
// embeddings, an extra bias). LlamaModel::load_weights used to load such a
// checkpoint without a word.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/checkpoint_rewrite.h"
#include "tests/unit/model_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;

json stories_config() {
  std::ifstream in(shared_model("stories260K") + "/config.json");
  return json::parse(in);
}

RawCheckpoint stories_weights() {
  return read_safetensors(shared_model("stories260K") + "/model.safetensors");
}

TEST(WeightsUnknownTensors, AnUnknownTensorIsAnErrorNamingIt) {
  RawCheckpoint ck = stories_weights();
  ck["model.layers.0.self_attn.extra_proj.weight"] =
      ck.at("model.layers.0.self_attn.q_proj.weight");
  TempModelDir dir("unknown_tensor");
  dir.write(stories_config(), ck);
  const std::string e = load_error(dir.str());
  EXPECT_NE(e.find("there is no module or parameter named "
                   "'model.layers.0.self_attn.extra_proj.weight' in LlamaForCausalLM"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(dir.str() + "/model.safetensors"), std::string::npos) << e;

  // A top-level name, and several: the first named, the others counted.
  RawCheckpoint more = stories_weights();
  more["extra.weight"] = RawTensor::f32({2}, {1.0f, 2.0f});
  more["zz.weight"] = RawTensor::f32({2}, {1.0f, 2.0f});
  TempModelDir dir2("unknown_tensors");
  dir2.write(stories_config(), more);
  const std::string e2 = load_error(dir2.str());
  EXPECT_NE(e2.find("named 'extra.weight' in LlamaForCausalLM (and 1 more: 'zz.weight')"),
            std::string::npos)
      << e2;
}

TEST(WeightsUnknownTensors, TheNamesVllmSkipsLoadAndChangeNothing) {
  const json cfg = stories_config();
  ASSERT_TRUE(cfg.value("tie_word_embeddings", false));
  RawCheckpoint ck = stories_weights();
  const int64_t H = cfg["hidden_size"].get<int64_t>();
  const int64_t D = H / cfg["num_attention_heads"].get<int64_t>();
  // Rotary buffers (ColossalAI / GPTQModel checkpoints), a tied model's
  // lm_head, an extra bias (vLLM: "Skip loading extra bias for GPTQ
  // models").
  ck["model.layers.0.self_attn.rotary_emb.inv_freq"] =
      RawTensor::f32({D / 2}, std::vector<float>(static_cast<size_t>(D / 2), 1.0f));
  ck["model.layers.1.self_attn.rotary_emb.cos_cached"] = RawTensor::f32({2}, {0.5f, 0.5f});
  ck["lm_head.weight"] = ck.at("model.embed_tokens.weight");
  ck["model.layers.0.self_attn.o_proj.bias"] =
      RawTensor::f32({H}, std::vector<float>(static_cast<size_t>(H), 9.0f));
  TempModelDir dir("skipped_tensors");
  dir.write(cfg, ck);
  EXPECT_EQ(load_error(dir.str()), "");
  // The same logits as the published checkpoint: nothing of them was read.
  CpuModel with(dir.str(), 4, 16), plain(shared_model("stories260K"), 4, 16);
  const std::vector<int32_t> prompt = {1, 403, 407, 261};
  EXPECT_EQ(with.run(one_seq_batch(prompt, 0, 0, 1)), plain.run(one_seq_batch(prompt, 0, 0, 1)));

  // Untied, lm_head.weight is the head (read, no error); the rotary buffer
  // name is skipped whatever the model.
  json untied = cfg;
  untied["tie_word_embeddings"] = false;
  TempModelDir dir2("untied_head");
  dir2.write(untied, ck);
  EXPECT_EQ(load_error(dir2.str()), "");
}

}  // namespace
}  // namespace pagoda::test
