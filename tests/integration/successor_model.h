// A hand-made Qwen2 checkpoint whose greedy output is a chosen token chain,
// for end-to-end tests of what the server does with particular output ids
// (byte-level tokens that split a character, ids past the tokenizer): one
// layer with every attention and MLP weight zero, so the last hidden state
// is the last token's embedding; chain[i]'s embedding is the unit vector
// e_i, lm_head's row chain[i+1] is 10·e_i (untied), every other row and
// embedding is zero. After chain[i], the logits are 10·sqrt(hidden) for
// chain[i+1] and 0 for every other id, so greedy decoding from a prompt
// ending in chain[0] gives chain[1], chain[2], ... The tokenizer files are
// copied from a real model directory.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda::testing_http {

class SuccessorModel {
 public:
  static constexpr int64_t kHidden = 32;

  // Writes the model into a fresh temporary directory (removed by the
  // destructor). chain: distinct ids < vocab_size, at most kHidden of them.
  SuccessorModel(const std::string& tokenizer_dir, const std::vector<int32_t>& chain, int64_t vocab_size) {
    namespace fs = std::filesystem;
    if (chain.size() > static_cast<size_t>(kHidden)) throw std::invalid_argument("chain longer than hidden size");
    dir_ = fs::temp_directory_path() / ("pagoda_successor_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(fs::path(tokenizer_dir) / f, dir_ / f);
    nlohmann::json config = {{"architectures", nlohmann::json::array({"Qwen2ForCausalLM"})},
                             {"model_type", "qwen2"},
                             {"hidden_size", kHidden},
                             {"intermediate_size", kHidden},
                             {"num_hidden_layers", 1},
                             {"num_attention_heads", 4},
                             {"num_key_value_heads", 2},
                             {"vocab_size", vocab_size},
                             {"max_position_embeddings", 256},
                             {"rms_norm_eps", 1e-6},
                             {"rope_theta", 1000000.0},
                             {"tie_word_embeddings", false},
                             {"torch_dtype", "float32"},
                             {"use_sliding_window", false},
                             {"hidden_act", "silu"}};
    std::ofstream(dir_ / "config.json") << config.dump(1);

    const int64_t H = kHidden, D = H / 4, kv = 2 * D;
    std::vector<float> embed(static_cast<size_t>(vocab_size * H), 0.f), lm_head(embed.size(), 0.f);
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain[i] < 0 || chain[i] >= vocab_size) throw std::invalid_argument("chain id out of range");
      embed[static_cast<size_t>(chain[i]) * H + i] = 1.f;
      if (i + 1 < chain.size()) lm_head[static_cast<size_t>(chain[i + 1]) * H + i] = 10.f;
    }
    add("model.embed_tokens.weight", {vocab_size, H}, std::move(embed));
    add("lm_head.weight", {vocab_size, H}, std::move(lm_head));
    add("model.norm.weight", {H}, std::vector<float>(static_cast<size_t>(H), 1.f));
    const std::string l = "model.layers.0.";
    add(l + "input_layernorm.weight", {H}, std::vector<float>(static_cast<size_t>(H), 1.f));
    add(l + "post_attention_layernorm.weight", {H}, std::vector<float>(static_cast<size_t>(H), 1.f));
    add(l + "self_attn.q_proj.weight", {H, H}, {});
    add(l + "self_attn.q_proj.bias", {H}, {});
    add(l + "self_attn.k_proj.weight", {kv, H}, {});
    add(l + "self_attn.k_proj.bias", {kv}, {});
    add(l + "self_attn.v_proj.weight", {kv, H}, {});
    add(l + "self_attn.v_proj.bias", {kv}, {});
    add(l + "self_attn.o_proj.weight", {H, H}, {});
    add(l + "mlp.gate_proj.weight", {H, H}, {});
    add(l + "mlp.up_proj.weight", {H, H}, {});
    add(l + "mlp.down_proj.weight", {H, H}, {});
    write(dir_ / "model.safetensors");
  }
  ~SuccessorModel() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SuccessorModel(const SuccessorModel&) = delete;
  SuccessorModel& operator=(const SuccessorModel&) = delete;

  std::string dir() const { return dir_.string(); }

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;  // empty: zeros
  };
  void add(std::string name, std::vector<int64_t> shape, std::vector<float> data) {
    entries_.push_back({std::move(name), std::move(shape), std::move(data)});
  }
  // The safetensors format: u64 little-endian header size, JSON header
  // (padded with spaces to 8 bytes), then the F32 data back to back.
  void write(const std::filesystem::path& file) const {
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    std::vector<uint64_t> sizes;
    for (const Entry& e : entries_) {
      uint64_t n = 1;
      for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
      sizes.push_back(n);
      header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {offset, offset + n * 4}}};
      offset += n * 4;
    }
    std::string h = header.dump();
    while (h.size() % 8 != 0) h += ' ';
    std::ofstream out(file, std::ios::binary);
    uint64_t len = h.size();
    unsigned char len_le[8];
    for (int i = 0; i < 8; ++i) len_le[i] = static_cast<unsigned char>(len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_le), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (size_t i = 0; i < entries_.size(); ++i) {
      std::vector<float> zeros;
      const std::vector<float>* d = &entries_[i].data;
      if (d->empty()) {
        zeros.assign(static_cast<size_t>(sizes[i]), 0.f);
        d = &zeros;
      }
      out.write(reinterpret_cast<const char*>(d->data()), static_cast<std::streamsize>(d->size() * sizeof(float)));
    }
    if (!out) throw std::runtime_error("cannot write " + file.string());
  }

  std::filesystem::path dir_;
  std::vector<Entry> entries_;
};

}  // namespace pagoda::testing_http
