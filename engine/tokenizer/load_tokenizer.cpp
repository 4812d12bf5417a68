// load_tokenizer: picks the tokenizer implementation from the files present.
#include <filesystem>
#include <stdexcept>

#include "engine/tokenizer/bpe_loader.h"
#include "engine/tokenizer/bpe_regex.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {
namespace {

void require_bpe_support(const std::string& model_dir) {
  if (!bpe::regex_available()) {
    throw std::runtime_error("the tokenizer of " + model_dir +
                             " is byte-level BPE, but Pagoda was built without PCRE2 "
                             "(install libpcre2-dev and reconfigure)");
  }
}

}  // namespace

std::shared_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error("tokenizer directory " + model_dir + " does not exist");
  }
  const TokenizerConfig config = TokenizerConfig::from_dir(model_dir);
  const auto json_file = dir / "tokenizer.json";
  if (std::filesystem::exists(json_file)) {
    if (auto spec = read_bpe_tokenizer_json(json_file.string())) {
      require_bpe_support(model_dir);
      return std::make_shared<BpeTokenizer>(std::move(*spec), config);
    }
  }
  const auto spm = dir / "tokenizer.model";
  if (std::filesystem::exists(spm)) {
    return std::make_shared<SentencePieceTokenizer>(spm.string(), config);
  }
  const auto vocab = dir / "vocab.json", merges = dir / "merges.txt";
  if (std::filesystem::exists(vocab) && std::filesystem::exists(merges)) {
    require_bpe_support(model_dir);
    return std::make_shared<BpeTokenizer>(
        read_bpe_vocab_merges(vocab.string(), merges.string(),
                              (dir / "tokenizer_config.json").string()),
        config);
  }
  if (std::filesystem::exists(json_file)) {
    throw std::runtime_error("tokenizer " + json_file.string() +
                             " is not byte-level BPE and there is no tokenizer.model");
  }
  throw std::runtime_error("no supported tokenizer file (tokenizer.json, tokenizer.model, "
                           "vocab.json + merges.txt) in " + model_dir);
}

}  // namespace pagoda
