// Test double for the protocol tests: a byte-level tokenizer (id = byte + 3;
// 0 <unk>, 1 <s>, 2 </s>; vocab 259) whose encodings are obvious by hand,
// and a ServingModel around it. The real SentencePiece tokenizer is covered
// by the tokenizer tests and the integration tests.
#pragma once
#include <memory>
#include <string>

#include "server/serving_model.h"

namespace pagoda::testing_protocol {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int32_t> ids;
    if (add_special_tokens) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
    return ids;
  }
  // Special-token text is not split out: "<s>" is its three bytes (the
  // protocol tests count bytes; the real tokenizers' splitting has its own tests).
  std::vector<int32_t> encode_with_special_text(std::string_view text) const override {
    return encode(text, false);
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 3) {
        if (!skip_special_tokens) s += id == 1 ? "<s>" : id == 2 ? "</s>" : "<unk>";
        continue;
      }
      s += static_cast<char>(id - 3);
    }
    return s;
  }
  std::string id_to_piece(int32_t id) const override { return decode(std::span(&id, 1), false); }
  bool is_special(int32_t id) const override { return id < 3; }
  int64_t vocab_size() const override { return 259; }
  std::optional<int32_t> bos_token_id() const override { return 1; }
  std::optional<int32_t> eos_token_id() const override { return 2; }
};

// max_model_len 64, served as "tiny"; chat renders "<s>[role]content..."
// (BOS written by the "template", as real templates do), then "{k=v}" for
// each extra template variable; a request's own chat_template is rendered
// as "<tmpl:SOURCE>" followed by the same.
inline ServingModel make_test_model(bool with_chat = true) {
  ServingModel m;
  m.served_model_name = "tiny";
  m.model_dir = "/models/tiny";
  m.max_model_len = 64;
  m.tokenizer = std::make_shared<ByteTokenizer>();
  if (with_chat) {
    m.has_chat_template = true;
    m.chat_renderer = [](const nlohmann::ordered_json& messages, const ChatRenderOptions& o) {
      std::string out = "<s>";
      if (!o.chat_template.empty()) {
        out += "<tmpl:";
        out += o.chat_template;
        out += '>';
      }
      for (const auto& msg : messages) {
        // Appended piecewise: GCC 12's -Wrestrict misfires on "[" + string.
        out += '[';
        out += msg["role"].get<std::string>();
        out += ']';
        if (msg["content"].is_string()) out += msg["content"].get<std::string>();
      }
      for (const auto& [k, v] : o.variables.items()) {
        out += '{';
        out += k;
        out += '=';
        out += v.dump();
        out += '}';
      }
      if (o.add_generation_prompt) out += "[assistant]";
      return out;
    };
  }
  return m;
}

}  // namespace pagoda::testing_protocol
