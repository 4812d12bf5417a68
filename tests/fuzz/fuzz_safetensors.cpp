// libFuzzer target: the safetensors reader (engine/weights/safetensors.cpp)
// on an arbitrary file: the 8-byte header length, the JSON header, the data
// offsets. The bytes are written to a temporary file (the reader mmaps a
// path), opened, and every tensor is looked up, read as a whole and as
// row/column shards. Invariants: no crash or sanitizer report; only
// std::runtime_error escapes (the documented error).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/weights/safetensors.h"

namespace {

const std::string& temp_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/pagoda_fuzz_safetensors_" +
           std::to_string(getpid()) + ".safetensors";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = temp_path();
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  try {
    pagoda::SafetensorsFile file(path);
    (void)file.metadata();
    for (const std::string& name : file.names()) {
      const pagoda::SafetensorsTensor* t = file.find(name);
      if (!t) std::abort();
      (void)t->numel();
      (void)t->shape_str();
      // Every byte the reader hands out must be inside the mapping: touch them.
      volatile unsigned char sink = 0;
      const auto* bytes = static_cast<const unsigned char*>(t->data);
      for (size_t i = 0; i < t->nbytes; ++i) sink = sink ^ bytes[i];
      try {
        (void)file.get(name);
        if (t->shape.size() >= 1 && t->shape[0] > 0) (void)pagoda::safetensors_rows(*t, 0, 1);
        if (t->shape.size() == 2 && t->shape[1] > 0) {
          std::vector<unsigned char> out;
          pagoda::safetensors_columns(*t, 0, 1, out);
        }
      } catch (const std::runtime_error&) {
      }
    }
  } catch (const std::runtime_error&) {
  }
  std::remove(path.c_str());
  return 0;
}
