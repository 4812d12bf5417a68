// Safetensors reader (format spec: github.com/huggingface/safetensors,
// "Format" section): an 8-byte little-endian u64 N, then N bytes of JSON
// header {name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
// optional "__metadata__": {str: str}}, then the byte buffer; offsets are
// relative to the start of the byte buffer. Files are mmap'd read-only and
// tensors are returned as pointers into the mapping (no copy).
//
// Errors: std::runtime_error whose message names the file (and the tensor
// where one is involved) for a missing/unreadable file, a truncated file, a
// malformed JSON header, data_offsets out of range or inconsistent with
// dtype × shape, and (on access through get()) an unsupported dtype.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace pagoda {

// One tensor's header entry plus its bytes inside the mapping.
struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;       // the file's dtype string ("F32", "BF16", "I8", ...)
  bool float_dtype = false;     // dtype is F32, F16 or BF16 (the ones we load)
  DType dtype = DType::F32;     // valid when float_dtype
  std::vector<int64_t> shape;   // may be empty (a scalar)
  const void* data = nullptr;   // into the mmap'd file; valid while the reader lives
  size_t nbytes = 0;
  std::string file;             // path of the file holding it

  int64_t numel() const;
  std::string shape_str() const;  // "[64, 128]"
};

// One .safetensors file, mmap'd for the reader's lifetime.
class SafetensorsFile {
 public:
  // Opens and validates the whole header. Throws std::runtime_error (see above).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // The entry for `name`; nullptr when absent. Any dtype.
  const SafetensorsTensor* find(const std::string& name) const;
  // The entry for `name`; throws std::runtime_error naming file and tensor
  // when absent or when its dtype is not F32/F16/BF16.
  const SafetensorsTensor& get(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model directory's weights: either <dir>/model.safetensors or the shards
// named by <dir>/model.safetensors.index.json ({"weight_map": {tensor: shard}}).
class SafetensorsModel {
 public:
  // Throws std::runtime_error naming the file when neither exists, the index
  // is malformed, or a shard is missing/invalid.
  explicit SafetensorsModel(const std::string& model_dir);
  // Same as SafetensorsFile::find / get, across all shards; get() names the
  // file (index or single file) in which the tensor was expected.
  const SafetensorsTensor* find(const std::string& name) const;
  const SafetensorsTensor& get(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;  // sorted
  // The file tensor lookups are answered from (for error messages).
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;  // tensor -> its file
};

// Tensor-parallel shard reads straight from the mapping (no copy of the
// whole tensor). `t` must be 2-D ([rows, cols], row-major) for the column
// form; the row form also takes 1-D tensors (a bias). Both throw
// std::runtime_error naming the file and tensor when the range is outside
// the tensor.
//
// Rows [begin, begin+n): one contiguous range; returns a pointer into the
// mapping (valid while the reader lives), n * row bytes long.
const void* safetensors_rows(const SafetensorsTensor& t, int64_t begin, int64_t n);
// Columns [begin, begin+n) of every row: rows strided reads of n elements,
// packed into `out` ([rows, n] in the file's dtype; resized).
void safetensors_columns(const SafetensorsTensor& t, int64_t begin, int64_t n, std::vector<unsigned char>& out);

}  // namespace pagoda
