#include "engine/tokenizer/bpe_loader.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/tokenizer/bpe_regex.h"

namespace pagoda {
namespace {

using nlohmann::json;

json parse_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file);
  try {
    return json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("malformed " + file + ": " + e.what());
  }
}

[[noreturn]] void unsupported(const std::string& file, const std::string& what) {
  throw std::runtime_error("unsupported byte-level BPE tokenizer " + file + ": " + what);
}

std::string type_of(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool has_byte_level(const json& j) {
  if (type_of(j) == "ByteLevel") return true;
  if (type_of(j) == "Sequence") {
    for (const char* key : {"pretokenizers", "decoders"}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_array()) continue;
      for (const auto& e : *it) {
        if (has_byte_level(e)) return true;
      }
    }
  }
  return false;
}

// PCRE2 literal for a String split pattern.
std::string quote_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

void read_normalizer(const json& n, const std::string& file, BpeSpec& spec) {
  if (n.is_null()) return;
  const std::string t = type_of(n);
  if (t == "NFC") {
    spec.nfc = true;
  } else if (t == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const auto& e : n["normalizers"]) read_normalizer(e, file, spec);
  } else {
    unsupported(file, "normalizer " + n.dump());
  }
}

void read_pre_tokenizer(const json& p, const std::string& file, BpeSpec& spec, int& regexes) {
  if (p.is_null()) return;
  const std::string t = type_of(p);
  if (t == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
    for (const auto& e : p["pretokenizers"]) read_pre_tokenizer(e, file, spec, regexes);
  } else if (t == "Split") {
    const json& pat = p.value("pattern", json());
    if (p.value("behavior", "") != "Isolated" || p.value("invert", false)) {
      unsupported(file, "Split pre-tokenizer other than behavior Isolated, invert false");
    }
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      spec.pattern = pat["Regex"].get<std::string>();
    } else if (pat.contains("String") && pat["String"].is_string()) {
      spec.pattern = quote_literal(pat["String"].get<std::string>());
    } else {
      unsupported(file, "Split pattern " + pat.dump());
    }
    ++regexes;
  } else if (t == "ByteLevel") {
    if (p.value("add_prefix_space", false)) unsupported(file, "ByteLevel add_prefix_space=true");
    if (p.value("use_regex", true)) {
      spec.pattern = std::string(bpe::kGpt2Pattern);
      ++regexes;
    }
  } else {
    unsupported(file, "pre_tokenizer " + p.dump());
  }
}

BpeAddedToken added_token(const json& a, int32_t id) {
  BpeAddedToken t;
  t.id = id;
  t.content = a.at("content").get<std::string>();
  t.special = a.value("special", false);
  t.lstrip = a.value("lstrip", false);
  t.rstrip = a.value("rstrip", false);
  t.normalized = a.value("normalized", false);
  t.single_word = a.value("single_word", false);
  return t;
}

std::pair<std::string, std::string> split_merge(const std::string& line, const std::string& file) {
  const size_t sp = line.find(' ');
  if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
    throw std::runtime_error("malformed " + file + ": merge \"" + line +
                             "\" is not two tokens separated by one space");
  }
  return {line.substr(0, sp), line.substr(sp + 1)};
}

void read_vocab(const json& v, const std::string& file, BpeSpec& spec) {
  if (!v.is_object()) throw std::runtime_error("malformed " + file + ": vocab is not an object");
  spec.vocab.reserve(v.size());
  for (const auto& [tok, id] : v.items()) {
    if (!id.is_number_integer()) {
      throw std::runtime_error("malformed " + file + ": id of \"" + tok + "\" is not an integer");
    }
    spec.vocab.emplace(tok, id.get<int32_t>());
  }
}

}  // namespace

std::optional<BpeSpec> read_bpe_tokenizer_json(const std::string& file) {
  const json j = parse_file(file);
  if (!j.is_object() || type_of(j.value("model", json())) != "BPE") return std::nullopt;
  if (!has_byte_level(j.value("decoder", json())) &&
      !has_byte_level(j.value("pre_tokenizer", json()))) {
    return std::nullopt;
  }
  BpeSpec spec;
  try {
    const json& m = j.at("model");
    if (!m.value("dropout", json()).is_null() && m["dropout"].get<double>() != 0.0) {
      unsupported(file, "BPE dropout");
    }
    if (m.value("byte_fallback", false)) unsupported(file, "BPE byte_fallback");
    if (!m.value("continuing_subword_prefix", json()).is_null() &&
        !m["continuing_subword_prefix"].get<std::string>().empty()) {
      unsupported(file, "BPE continuing_subword_prefix");
    }
    if (!m.value("end_of_word_suffix", json()).is_null() &&
        !m["end_of_word_suffix"].get<std::string>().empty()) {
      unsupported(file, "BPE end_of_word_suffix");
    }
    spec.ignore_merges = m.value("ignore_merges", false);
    read_vocab(m.at("vocab"), file, spec);
    const json& merges = m.at("merges");
    spec.merges.reserve(merges.size());
    for (const auto& e : merges) {
      if (e.is_string()) {
        spec.merges.push_back(split_merge(e.get<std::string>(), file));
      } else if (e.is_array() && e.size() == 2) {
        spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        throw std::runtime_error("malformed " + file + ": merge " + e.dump());
      }
    }
    read_normalizer(j.value("normalizer", json()), file, spec);
    int regexes = 0;
    read_pre_tokenizer(j.value("pre_tokenizer", json()), file, spec, regexes);
    if (regexes > 1) unsupported(file, "more than one regex pre-tokenizer");
    if (regexes == 0) spec.pattern = R"([\s\S]+)";  // no split: each segment is one word
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const auto& a : j["added_tokens"]) {
        spec.added_tokens.push_back(added_token(a, a.at("id").get<int32_t>()));
      }
    }
  } catch (const json::exception& e) {
    throw std::runtime_error("malformed " + file + ": " + e.what());
  }
  return spec;
}

BpeSpec read_bpe_vocab_merges(const std::string& vocab_file, const std::string& merges_file,
                              const std::string& config_file) {
  BpeSpec spec;
  spec.pattern = std::string(bpe::kQwen2Pattern);
  spec.nfc = true;
  read_vocab(parse_file(vocab_file), vocab_file, spec);

  std::ifstream in(merges_file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + merges_file);
  bool first = true;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const bool version = first && line.rfind("#version", 0) == 0;
    first = false;
    if (version || line.empty()) continue;
    spec.merges.push_back(split_merge(line, merges_file));
  }

  if (std::filesystem::exists(config_file)) {
    const json c = parse_file(config_file);
    try {
      if (c.contains("added_tokens_decoder") && c["added_tokens_decoder"].is_object()) {
        for (const auto& [id, a] : c["added_tokens_decoder"].items()) {
          spec.added_tokens.push_back(added_token(a, static_cast<int32_t>(std::stol(id))));
        }
      }
    } catch (const std::exception& e) {
      throw std::runtime_error("malformed " + config_file + ": added_tokens_decoder: " + e.what());
    }
  }
  return spec;
}

}  // namespace pagoda
