// generation_config.json as HF transformers' GenerationConfig writes it.
#include "engine/model/generation_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace pagoda {

GenerationConfig GenerationConfig::from_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  const std::string path = (fs::path(model_dir) / "generation_config.json").string();
  GenerationConfig g;
  if (!fs::exists(path)) return g;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("generation config " + path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& ex) {
    throw std::runtime_error("generation config " + path + ": bad JSON: " + ex.what());
  }
  if (!j.is_object()) throw std::runtime_error("generation config " + path + ": not a JSON object");
  auto fail = [&](const char* f, const std::string& what) {
    throw std::runtime_error("generation config " + path + ": field '" + f + "': " + what);
  };
  auto has = [&](const char* f) { return j.contains(f) && !j[f].is_null(); };
  auto to_i32 = [&](const char* f, const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      fail(f, "must be a non-negative 32-bit integer, got " + v.dump());
    return static_cast<int32_t>(v.get<int64_t>());
  };
  auto num = [&](const char* f) {
    if (!j[f].is_number()) fail(f, "must be a number, got " + j[f].dump());
    return j[f].get<double>();
  };
  if (has("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_array()) {
      for (const json& v : e) g.eos_token_ids.push_back(to_i32("eos_token_id", v));
    } else {
      g.eos_token_ids.push_back(to_i32("eos_token_id", e));
    }
  }
  if (has("bos_token_id")) g.bos_token_id = to_i32("bos_token_id", j["bos_token_id"]);
  if (has("temperature")) g.temperature = static_cast<float>(num("temperature"));
  if (has("top_p")) g.top_p = static_cast<float>(num("top_p"));
  if (has("top_k")) {
    if (!j["top_k"].is_number_integer()) fail("top_k", "must be an integer");
    g.top_k = static_cast<int>(j["top_k"].get<int64_t>());
  }
  if (has("repetition_penalty")) g.repetition_penalty = static_cast<float>(num("repetition_penalty"));
  // vLLM passes them on to SamplingParams, which refuses a min_p outside
  // [0, 1] and a max_tokens below 1 in every request: refused here at load.
  if (has("min_p")) {
    const double v = num("min_p");
    if (!(v >= 0.0 && v <= 1.0)) fail("min_p", "must be in [0, 1], got " + j["min_p"].dump());
    g.min_p = static_cast<float>(v);
  }
  if (has("max_new_tokens")) {
    const json& v = j["max_new_tokens"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      fail("max_new_tokens", "must be a positive integer, got " + v.dump());
    g.max_new_tokens = v.get<int64_t>();
  }
  if (has("max_length")) {
    if (!j["max_length"].is_number_integer()) fail("max_length", "must be an integer");
    g.max_length = j["max_length"].get<int64_t>();
  }
  return g;
}

}  // namespace pagoda
