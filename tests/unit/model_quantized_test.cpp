// GPTQ / AWQ checkpoints on the CPU backend against HF transformers' float32
// logits on the dequantized weights (shared/models/quantized/<m>/
// reference.json, written by an independent quantizer: "how" says
// scale * (q - zero)), greedy continuations, tensor parallelism over CPU
// ranks, and the errors for bad checkpoints and --quantization mismatches.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/model/model_executor.h"
#include "engine/quant/quant_config.h"
#include "tests/unit/model_test_helpers.h"
#include "tests/unit/reference_cases.h"
#include "tests/unit/tp_test_helpers.h"

namespace pagoda::test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string quantized_model(const std::string& name) { return shared_model("quantized/" + name); }

json reference(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  EXPECT_TRUE(in.good()) << dir;
  return json::parse(in);
}

// Last-position logits of every prompt within 1e-4 relative L2, and the 32
// greedy ids decoded one token per step through the paged cache.
void check_quantized(const std::string& name) {
  const std::string dir = quantized_model(name);
  const json ref = reference(dir);
  CpuModel m(dir, 80, 1024);
  ASSERT_TRUE(m.config.quantization.enabled()) << name;
  EXPECT_EQ(m.model->load_stats().quantized_linears, 7 * m.config.num_hidden_layers) << name;
  int cases = 0;
  check_reference_cases(m, ref, "quantized " + name, 1e-4, 32, cases);
  EXPECT_EQ(cases, 4);
}

TEST(ModelQuantized, GptqLlama4BitMatchesTransformers) { check_quantized("tiny-gptq-llama"); }
TEST(ModelQuantized, GptqQwen2ActOrderMatchesTransformers) {
  check_quantized("tiny-gptq-qwen2-actorder");
}
TEST(ModelQuantized, GptqQwen2Int8PerChannelMatchesTransformers) {
  check_quantized("tiny-gptq-qwen2-int8");
}
TEST(ModelQuantized, AwqLlamaMatchesTransformers) { check_quantized("tiny-awq-llama"); }

// tp=2 over CPU ranks: column-parallel q/k/v, gate/up cut the packed
// columns; row-parallel o/down cut the packed rows and g_idx (act-order:
// every rank keeps all groups; per-channel: the one group).
void check_tp2(const std::string& name) {
  const std::string dir = quantized_model(name);
  const json ref = reference(dir);
  auto ex = cpu_executor(dir, 2);
  const auto V = ex->vocab_size();
  int cases = 0;
  for (const json& c : ref["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    if (ids.size() > 200) continue;
    std::vector<float> logits;
    ex->execute(one_seq_batch(ids, 0, 0, static_cast<int32_t>((ids.size() + 15) / 16)), logits);
    ASSERT_EQ(logits.size(), static_cast<size_t>(V));
    EXPECT_LT(rel_l2(logits.data(), c["last_logits"].get<std::vector<double>>()), 1e-4)
        << name << " tp=2, prompt of " << ids.size() << " tokens";
    EXPECT_EQ(argmax_row(logits, 0, V), c["greedy_ids"][0].get<int32_t>()) << name;
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

TEST(ModelQuantized, GptqActOrderTensorParallel2MatchesTransformers) {
  check_tp2("tiny-gptq-qwen2-actorder");
}
TEST(ModelQuantized, GptqInt8TensorParallel2MatchesTransformers) {
  check_tp2("tiny-gptq-qwen2-int8");
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// down_proj has K = 640: 320 per rank is not a multiple of group 128, so the
// groups cannot be split (vLLM refuses the same).
TEST(ModelQuantized, TensorParallelShardNotAlignedWithGroupsIsAnError) {
  const std::string m = error_of([] { cpu_executor(quantized_model("tiny-gptq-llama"), 2); });
  EXPECT_NE(m.find("mlp.down_proj"), std::string::npos) << m;
  EXPECT_NE(m.find("not aligned with the quantized weight shape (group_size 128)"),
            std::string::npos)
      << m;
}

// A copy of tiny-gptq-llama whose config.json and safetensors can be edited.
class QuantizedCheckpointCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("pagoda_quant_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(quantized_model("tiny-gptq-llama"), dir_);
    std::ifstream in(dir_ / "config.json");
    config_ = json::parse(in);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_config() { std::ofstream(dir_ / "config.json") << config_.dump(2); }
  // Rewrites model.safetensors' JSON header through `edit` (the byte buffer
  // is kept, so offsets stay valid).
  void edit_header(const std::function<void(json&)>& edit) {
    const fs::path p = dir_ / "model.safetensors";
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string file = ss.str();
    uint64_t n;
    std::memcpy(&n, file.data(), 8);
    json h = json::parse(file.substr(8, n));
    edit(h);
    const std::string header = h.dump();
    const uint64_t m = header.size();
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&m), 8);
    out << header << file.substr(8 + n);
  }
  std::string load_error() {
    return error_of([&] { CpuModel m(dir_.string(), 8, 64); });
  }

  fs::path dir_;
  json config_;
};

TEST_F(QuantizedCheckpointCopy, Bits3IsAnError) {
  config_["quantization_config"]["bits"] = 3;
  write_config();
  const std::string m = load_error();
  EXPECT_NE(m.find("'quantization_config.bits': 3 is not supported for gptq (supported: 4, 8)"),
            std::string::npos)
      << m;
}

TEST_F(QuantizedCheckpointCopy, UnknownQuantMethodIsAnError) {
  config_["quantization_config"]["quant_method"] = "bitsandbytes";
  write_config();
  const std::string m = load_error();
  EXPECT_NE(m.find("'quantization_config.quant_method': 'bitsandbytes' is not supported"),
            std::string::npos)
      << m;
}

TEST_F(QuantizedCheckpointCopy, AwqGemvAndUnsupportedGroupAreErrors) {
  config_["quantization_config"] = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}};
  write_config();
  std::string m = load_error();
  EXPECT_NE(m.find("'quantization_config.version': 'gemv' is not supported (supported: gemm)"),
            std::string::npos)
      << m;
  config_["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 96}};
  write_config();
  m = load_error();
  EXPECT_NE(m.find("'quantization_config.group_size': 96 is not supported"), std::string::npos)
      << m;
}

TEST_F(QuantizedCheckpointCopy, MissingQzerosIsAnError) {
  edit_header([](json& h) {
    h["model.layers.1.mlp.up_proj.qzeros_renamed"] = h["model.layers.1.mlp.up_proj.qzeros"];
    h.erase("model.layers.1.mlp.up_proj.qzeros");
  });
  const std::string m = load_error();
  EXPECT_NE(m.find("quantized linear 'model.layers.1.mlp.up_proj': tensor "
                   "'model.layers.1.mlp.up_proj.qzeros' is "
                   "missing"),
            std::string::npos)
      << m;
}

TEST_F(QuantizedCheckpointCopy, WrongShapesAreErrors) {
  // Same bytes, another shape: [2, 16] I32 qzeros of k_proj read as [4, 8].
  edit_header([](json& h) { h["model.layers.0.self_attn.k_proj.qzeros"]["shape"] = {4, 8}; });
  std::string m = load_error();
  EXPECT_NE(m.find("tensor 'model.layers.0.self_attn.k_proj.qzeros' has shape [4, 8], expected [2, "
                   "16] for gptq 4-bit"),
            std::string::npos)
      << m;
  fs::copy_file(quantized_model("tiny-gptq-llama") + "/model.safetensors",
                dir_ / "model.safetensors", fs::copy_options::overwrite_existing);
  edit_header([](json& h) { h["model.layers.0.mlp.gate_proj.qweight"]["shape"] = {64, 320}; });
  m = load_error();
  EXPECT_NE(
      m.find(
          "tensor 'model.layers.0.mlp.gate_proj.qweight' has shape [64, 320], expected [32, 640]"),
      std::string::npos)
      << m;
  // A config that disagrees with the packed tensors: 8 bits over a 4-bit checkpoint.
  fs::copy_file(quantized_model("tiny-gptq-llama") + "/model.safetensors",
                dir_ / "model.safetensors", fs::copy_options::overwrite_existing);
  config_["quantization_config"]["bits"] = 8;
  write_config();
  m = load_error();
  EXPECT_NE(m.find("tensor 'model.layers.0.self_attn.q_proj.qweight' has shape [32, 256], "
                   "expected [64, 256] for gptq 8-bit"),
            std::string::npos)
      << m;
}

// The same tensors split over two shards named by model.safetensors.index.json
// load as the single file does (same logits).
TEST_F(QuantizedCheckpointCopy, ShardedIndexLoadsLikeOneFile) {
  const fs::path p = dir_ / "model.safetensors";
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  in.close();
  const std::string file = ss.str();
  uint64_t n;
  std::memcpy(&n, file.data(), 8);
  const json h = json::parse(file.substr(8, n));
  const std::string data = file.substr(8 + n);
  json headers[2] = {json::object(), json::object()};
  std::string bytes[2];
  json weight_map = json::object();
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    const int f = name.find("layers.1.") != std::string::npos ? 1 : 0;
    const auto b = e["data_offsets"][0].get<size_t>(), end = e["data_offsets"][1].get<size_t>();
    json entry = e;
    entry["data_offsets"] = {bytes[f].size(), bytes[f].size() + (end - b)};
    bytes[f] += data.substr(b, end - b);
    headers[f][name] = entry;
    weight_map[name] = "model-0000" + std::to_string(f + 1) + "-of-00002.safetensors";
  }
  for (int f = 0; f < 2; ++f) {
    const std::string header = headers[f].dump();
    const uint64_t m = header.size();
    std::ofstream out(dir_ / ("model-0000" + std::to_string(f + 1) + "-of-00002.safetensors"),
                      std::ios::binary);
    out.write(reinterpret_cast<const char*>(&m), 8);
    out << header << bytes[f];
  }
  fs::remove(p);
  std::ofstream(dir_ / "model.safetensors.index.json")
      << json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump();
  const json ref = reference(quantized_model("tiny-gptq-llama"));
  CpuModel m(dir_.string(), 8, 64);
  for (const json& c : ref["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    if (ids.size() > 64) continue;
    const std::vector<float> logits = m.run(one_seq_batch(ids, 0, 0, 4));
    EXPECT_LT(rel_l2(logits.data(), c["last_logits"].get<std::vector<double>>()), 1e-4);
  }
}

TEST(QuantizationFlag, MatchesVllmRules) {
  const QuantConfig gptq = ModelConfig::from_dir(quantized_model("tiny-gptq-llama")).quantization;
  const QuantConfig awq = ModelConfig::from_dir(quantized_model("tiny-awq-llama")).quantization;
  EXPECT_NO_THROW(check_quantization_flag(gptq, "", "c"));
  EXPECT_NO_THROW(check_quantization_flag(gptq, "gptq", "c"));
  EXPECT_NO_THROW(check_quantization_flag(gptq, "gptq_marlin", "c"));
  EXPECT_NO_THROW(check_quantization_flag(awq, "awq", "c"));
  EXPECT_NO_THROW(check_quantization_flag(awq, "awq_marlin", "c"));
  std::string m = error_of([&] { check_quantization_flag(gptq, "awq", "dir/config.json"); });
  EXPECT_NE(m.find("Quantization method specified in the model config (gptq in dir/config.json) "
                   "does not match the "
                   "quantization method specified in the `quantization` argument (awq)"),
            std::string::npos)
      << m;
  m = error_of([&] { check_quantization_flag(awq, "gptq_marlin", "c"); });
  EXPECT_NE(m.find("(awq in c) does not match"), std::string::npos) << m;
  m = error_of([&] { check_quantization_flag(QuantConfig{}, "gptq", "float/config.json"); });
  EXPECT_NE(
      m.find("--quantization gptq was given but float/config.json has no quantization_config"),
      std::string::npos)
      << m;
  QuantConfig asym = gptq;
  asym.sym = false;
  m = error_of([&] { check_quantization_flag(asym, "gptq_marlin", "c"); });
  EXPECT_NE(m.find("not Marlin-compatible"), std::string::npos) << m;
  EXPECT_NO_THROW(check_quantization_flag(asym, "gptq", "c"));
  // Through the executor as well (pagoda generate / serve call it).
  ExecutorOptions o;
  o.model_dir = quantized_model("tiny-awq-llama");
  o.device = "cpu";
  o.max_model_len = 64;
  o.quantization = "gptq";
  m = error_of([&] { make_model_executor(ModelConfig::from_dir(o.model_dir), o); });
  EXPECT_NE(m.find("(awq in "), std::string::npos) << m;
}

}  // namespace
}  // namespace pagoda::test
