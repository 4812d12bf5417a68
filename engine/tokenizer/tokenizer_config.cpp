// TokenizerConfig::from_dir: HF tokenizer_config.json (+ special_tokens_map.json).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/tokenizer/tokenizer.h"

namespace pagoda {
namespace {

using nlohmann::json;

std::optional<json> read_json(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  try {
    json j = json::parse(in);
    if (!j.is_object()) throw std::runtime_error("top level is not a JSON object");
    return j;
  } catch (const std::exception& e) {
    throw std::runtime_error("malformed " + file.string() + ": " + e.what());
  }
}

// A special token given as "<s>", {"content": "<s>", ...} or null.
std::optional<std::string> token_text(const json& j, const char* key,
                                      const std::filesystem::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  throw std::runtime_error("malformed " + file.string() + ": \"" + key +
                           "\" must be a string or an object with a string \"content\"");
}

bool bool_field(const json& j, const char* key, bool dflt, const std::filesystem::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) {
    throw std::runtime_error("malformed " + file.string() + ": \"" + key + "\" must be a boolean");
  }
  return it->get<bool>();
}

std::string chat_template_field(const json& j, const std::filesystem::path& file) {
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& t : *it) {
      if (t.is_object() && t.value("name", "") == "default") {
        auto tmpl = t.find("template");
        if (tmpl != t.end() && tmpl->is_string()) return tmpl->get<std::string>();
        break;
      }
    }
    throw std::runtime_error("malformed " + file.string() +
                             ": \"chat_template\" list has no {name: \"default\", template: "
                             "string} entry");
  }
  throw std::runtime_error("malformed " + file.string() +
                           ": \"chat_template\" must be a string or a list of {name, template}");
}

}  // namespace

TokenizerConfig TokenizerConfig::from_dir(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  TokenizerConfig cfg;
  std::optional<std::string> bos, eos;
  const auto cfg_file = dir / "tokenizer_config.json";
  if (auto j = read_json(cfg_file)) {
    cfg.add_bos_token = bool_field(*j, "add_bos_token", true, cfg_file);
    cfg.add_eos_token = bool_field(*j, "add_eos_token", false, cfg_file);
    cfg.legacy = bool_field(*j, "legacy", false, cfg_file);
    bos = token_text(*j, "bos_token", cfg_file);
    eos = token_text(*j, "eos_token", cfg_file);
    cfg.chat_template = chat_template_field(*j, cfg_file);
  }
  if (!bos || !eos) {
    const auto map_file = dir / "special_tokens_map.json";
    if (auto j = read_json(map_file)) {
      if (!bos) bos = token_text(*j, "bos_token", map_file);
      if (!eos) eos = token_text(*j, "eos_token", map_file);
    }
  }
  cfg.bos_token = bos.value_or("");
  cfg.eos_token = eos.value_or("");
  return cfg;
}

}  // namespace pagoda
