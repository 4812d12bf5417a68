#include "engine/weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pagoda {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error("safetensors: " + file + ": " + what);
}

// Element size of every dtype string the spec defines; 0 for unknown.
size_t element_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

int64_t SafetensorsTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "truncated file (" + std::to_string(size) + " bytes; the 8-byte header length is missing)");
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) fail(path, std::string("mmap failed: ") + std::strerror(e));
  map_ = m;
  map_size_ = size;

  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
    if (n > size - 8)
      fail(path, "truncated file: header length " + std::to_string(n) + " exceeds the " +
                     std::to_string(size - 8) + " bytes after it");
    json header;
    try {
      header = json::parse(bytes + 8, bytes + 8 + n);
    } catch (const json::exception& ex) {
      fail(path, std::string("bad JSON header: ") + ex.what());
    }
    if (!header.is_object()) fail(path, "bad JSON header: not an object");
    const unsigned char* buffer = bytes + 8 + n;
    const size_t buffer_size = size - 8 - static_cast<size_t>(n);
    struct Span {
      uint64_t begin, end;
      const std::string* name;
    };
    std::vector<Span> spans;

    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const json& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) fail(path, "__metadata__ is not an object");
        for (auto m2 = v.begin(); m2 != v.end(); ++m2)
          if (m2.value().is_string()) metadata_[m2.key()] = m2.value().get<std::string>();
        continue;
      }
      auto bad = [&](const std::string& what) { fail(path, "tensor '" + name + "': " + what); };
      if (!v.is_object()) bad("entry is not an object");
      if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string dtype");
      if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array shape");
      if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
          v["data_offsets"].size() != 2)
        bad("missing data_offsets [begin, end]");
      SafetensorsTensor t;
      t.name = name;
      t.file = path;
      t.dtype_name = v["dtype"].get<std::string>();
      size_t esize = element_size(t.dtype_name);
      if (esize == 0) bad("unknown dtype '" + t.dtype_name + "'");
      if (t.dtype_name == "F32") {
        t.float_dtype = true;
        t.dtype = DType::F32;
      } else if (t.dtype_name == "F16") {
        t.float_dtype = true;
        t.dtype = DType::F16;
      } else if (t.dtype_name == "BF16") {
        t.float_dtype = true;
        t.dtype = DType::BF16;
      }
      uint64_t numel = 1;
      for (const json& d : v["shape"]) {
        if (!d.is_number_unsigned()) bad("shape entries must be non-negative integers");
        uint64_t dim = d.get<uint64_t>();
        if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / dim)
          bad("shape too large");
        numel *= dim;
        t.shape.push_back(static_cast<int64_t>(dim));
      }
      const json& off = v["data_offsets"];
      if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        bad("data_offsets must be non-negative integers");
      uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
      if (begin > end || end > buffer_size)
        bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            "] out of range (byte buffer is " + std::to_string(buffer_size) +
            " bytes; file truncated?)");
      if (end - begin != numel * esize)
        bad("data_offsets span " + std::to_string(end - begin) + " bytes but dtype " +
            t.dtype_name + " x shape " + t.shape_str() + " needs " +
            std::to_string(numel * esize));
      t.data = buffer + begin;
      t.nbytes = static_cast<size_t>(end - begin);
      spans.push_back({begin, end, &it.key()});
      tensors_.emplace(name, std::move(t));
    }
    // As the reference implementation (huggingface/safetensors, Metadata::
    // validate and read_metadata): the tensors, in offset order, tile the
    // byte buffer from 0 to its end: no overlap, no gap, no trailing bytes.
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t at = 0;
    const std::string* prev = nullptr;
    for (const Span& s : spans) {
      if (s.begin != at)
        fail(path, "tensor '" + *s.name + "': data_offsets [" + std::to_string(s.begin) + ", " +
                       std::to_string(s.end) + "] " +
                       (s.begin < at ? "overlap tensor '" + *prev + "' (which ends at byte " +
                                           std::to_string(at) + ")"
                                     : "leave bytes [" + std::to_string(at) + ", " +
                                           std::to_string(s.begin) + ") of the buffer unused") +
                       "; tensors must tile the byte buffer in offset order");
      at = s.end;
      prev = s.name;
    }
    if (at != buffer_size)
      fail(path, "the tensors' data ends at byte " + std::to_string(at) + " of the " +
                     std::to_string(buffer_size) +
                     "-byte buffer: trailing bytes (an incomplete or corrupt file)");
  } catch (...) {
    ::munmap(map_, map_size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafetensorsTensor& SafetensorsFile::get(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) fail(path_, "tensor '" + name + "' not found");
  if (!t->float_dtype)
    fail(path_, "tensor '" + name + "' has unsupported dtype " + t->dtype_name +
                    " (supported: F32, F16, BF16)");
  return *t;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

SafetensorsModel::SafetensorsModel(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    source_ = index.string();
    std::ifstream in(index);
    if (!in) fail(source_, "cannot open");
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& ex) {
      fail(source_, std::string("bad JSON: ") + ex.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      fail(source_, "missing object field 'weight_map'");
    std::map<std::string, const SafetensorsFile*> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        fail(source_, "weight_map['" + it.key() + "'] is not a file name");
      std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard == ".." || shard.empty())
        fail(source_, "weight_map['" + it.key() + "']: bad shard name '" + shard + "'");
      auto s = shards.find(shard);
      if (s == shards.end()) {
        files_.push_back(std::make_unique<SafetensorsFile>((dir / shard).string()));
        s = shards.emplace(shard, files_.back().get()).first;
      }
      if (!s->second->contains(it.key()))
        fail(s->second->path(), "tensor '" + it.key() + "' listed in " + source_ +
                                    " is not in this shard");
      where_[it.key()] = s->second;
    }
  } else if (fs::exists(single)) {
    source_ = single.string();
    files_.push_back(std::make_unique<SafetensorsFile>(source_));
    for (const std::string& n : files_.back()->names()) where_[n] = files_.back().get();
  } else {
    throw std::runtime_error("safetensors: no model.safetensors or model.safetensors.index.json in " +
                             model_dir);
  }
}

const SafetensorsTensor* SafetensorsModel::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second->find(name);
}

const SafetensorsTensor& SafetensorsModel::get(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(source_, "tensor '" + name + "' not found");
  return it->second->get(name);
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  for (const auto& kv : where_) out.push_back(kv.first);
  return out;
}

namespace {
size_t row_bytes(const SafetensorsTensor& t) {
  size_t b = element_size(t.dtype_name);
  for (size_t i = 1; i < t.shape.size(); ++i) b *= static_cast<size_t>(t.shape[i]);
  return b;
}
void check_range(const SafetensorsTensor& t, int64_t begin, int64_t n, int64_t dim_size, const char* what) {
  if (begin < 0 || n < 0 || begin + n > dim_size)
    fail(t.file, "tensor '" + t.name + "' " + t.shape_str() + ": " + what + " [" + std::to_string(begin) + ", " +
                     std::to_string(begin + n) + ") out of range");
}
}  // namespace

const void* safetensors_rows(const SafetensorsTensor& t, int64_t begin, int64_t n) {
  if (t.shape.empty()) fail(t.file, "tensor '" + t.name + "': cannot slice rows of a scalar");
  check_range(t, begin, n, t.shape[0], "rows");
  return static_cast<const unsigned char*>(t.data) + static_cast<size_t>(begin) * row_bytes(t);
}

void safetensors_columns(const SafetensorsTensor& t, int64_t begin, int64_t n, std::vector<unsigned char>& out) {
  if (t.shape.size() != 2) fail(t.file, "tensor '" + t.name + "' " + t.shape_str() + ": column slice needs 2-D");
  check_range(t, begin, n, t.shape[1], "columns");
  const size_t es = element_size(t.dtype_name), rows = static_cast<size_t>(t.shape[0]);
  const size_t src_stride = static_cast<size_t>(t.shape[1]) * es, len = static_cast<size_t>(n) * es;
  out.resize(rows * len);
  const auto* src = static_cast<const unsigned char*>(t.data) + static_cast<size_t>(begin) * es;
  for (size_t r = 0; r < rows; ++r) std::memcpy(out.data() + r * len, src + r * src_stride, len);
}

}  // namespace pagoda
