// libFuzzer target: the model directory's JSON parsers on arbitrary text:
// config.json (ModelConfig::from_json_text), generation_config.json
// (GenerationConfig::from_dir) and tokenizer_config.json
// (TokenizerConfig::from_dir), the latter two through a temporary
// directory. The first byte picks the parser. Invariants: no crash or
// sanitizer report; only std::runtime_error escapes (the documented error;
// std::invalid_argument and the like derive from logic_error and are bugs).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

const std::string& temp_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/pagoda_fuzz_config_XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  return dir;
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::abort();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        (void)pagoda::ModelConfig::from_json_text(text, "config.json");
        break;
      case 1: {
        const std::string file = temp_dir() + "/generation_config.json";
        write_file(file, text);
        (void)pagoda::GenerationConfig::from_dir(temp_dir());
        std::remove(file.c_str());
        break;
      }
      default: {
        const std::string file = temp_dir() + "/tokenizer_config.json";
        write_file(file, text);
        (void)pagoda::TokenizerConfig::from_dir(temp_dir());
        std::remove(file.c_str());
        break;
      }
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
