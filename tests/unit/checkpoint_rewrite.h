// Test checkpoints written at test time: a safetensors file read into
// memory (names, dtypes, shapes, bytes), its tensors renamed / fused /
// replaced, and written back with a config.json into a temporary model
// directory (removed when the TempModelDir goes away). The format follows
// the safetensors spec (an 8-byte little-endian header length, the JSON
// header, the byte buffer) and engine/weights/safetensors.h reads it back.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace pagoda::test {

struct RawTensor {
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // The values as floats (F32 or BF16).
  std::vector<float> floats() const {
    std::vector<float> out(static_cast<size_t>(numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      if (dtype == "F32") {
        std::memcpy(&out[i], bytes.data() + 4 * i, 4);
      } else if (dtype == "BF16") {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &u, 4);
      } else {
        throw std::runtime_error("RawTensor::floats: dtype " + dtype);
      }
    }
    return out;
  }
  static RawTensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
    RawTensor t{"F32", std::move(shape), {}};
    if (static_cast<int64_t>(v.size()) != t.numel())
      throw std::invalid_argument("RawTensor::f32: size");
    t.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return t;
  }
};

using RawCheckpoint = std::map<std::string, RawTensor>;

inline RawCheckpoint read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(static_cast<size_t>(n), '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  RawCheckpoint out;
  const nlohmann::json h = nlohmann::json::parse(header);
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    const auto b = e["data_offsets"][0].get<size_t>(), end = e["data_offsets"][1].get<size_t>();
    out[name] = RawTensor{e["dtype"].get<std::string>(), e["shape"].get<std::vector<int64_t>>(),
                          data.substr(b, end - b)};
  }
  return out;
}

inline void write_safetensors(const std::string& path, const RawCheckpoint& ck) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : ck) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h << data;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Rows of `parts` (same dtype and columns) stacked in order: the fused
// tensor a checkpoint like Baichuan's W_pack (q, k, v rows) holds.
inline RawTensor concat_rows(const std::vector<const RawTensor*>& parts) {
  RawTensor out{parts.at(0)->dtype, parts.at(0)->shape, {}};
  out.shape[0] = 0;
  for (const RawTensor* p : parts) {
    if (p->dtype != out.dtype || p->shape.size() != 2 || p->shape[1] != out.shape[1])
      throw std::invalid_argument("concat_rows: mismatched parts");
    out.shape[0] += p->shape[0];
    out.bytes += p->bytes;
  }
  return out;
}

// A fresh directory under the system's temporary directory, removed (with
// what it holds) by the destructor.
class TempModelDir {
 public:
  explicit TempModelDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("pagoda_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempModelDir(const TempModelDir&) = delete;
  TempModelDir& operator=(const TempModelDir&) = delete;
  std::string str() const { return path_.string(); }
  // Writes config.json and model.safetensors.
  void write(const nlohmann::json& config, const RawCheckpoint& ck) const {
    std::ofstream(path_ / "config.json") << config.dump(1);
    write_safetensors((path_ / "model.safetensors").string(), ck);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace pagoda::test
