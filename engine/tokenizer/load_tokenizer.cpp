// load_tokenizer: picks the tokenizer implementation from the files present.
#include <filesystem>
#include <stdexcept>

#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace pagoda {

std::shared_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error("tokenizer directory " + model_dir + " does not exist");
  }
  const TokenizerConfig config = TokenizerConfig::from_dir(model_dir);
  const auto spm = dir / "tokenizer.model";
  if (std::filesystem::exists(spm)) {
    return std::make_shared<SentencePieceTokenizer>(spm.string(), config);
  }
  for (const char* name : {"tokenizer.json", "vocab.json"}) {
    const auto f = dir / name;
    if (std::filesystem::exists(f)) {
      throw std::runtime_error("byte-level BPE tokenizer " + f.string() +
                               " is not supported yet (only SentencePiece tokenizer.model)");
    }
  }
  throw std::runtime_error("no supported tokenizer file (tokenizer.model) in " + model_dir);
}

}  // namespace pagoda
