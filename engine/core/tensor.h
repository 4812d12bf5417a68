// Tensor: a typed, shaped view of memory that a Backend owns (host or device).
// A Tensor does not own its bytes; Backend::alloc / Backend::free do.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace pagoda {

// Element types. Names and byte sizes follow safetensors' dtype strings.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
  }
  return "?";
}

enum class Device : uint8_t { CPU, CUDA };

// Up to 4 dimensions, row-major, contiguous. shape[0] is the outermost.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, 4> shape{0, 0, 0, 0};

  Tensor() = default;
  Tensor(void* d, DType t, Device dev, std::initializer_list<int64_t> dims)
      : data(d), dtype(t), device(dev) {
    if (dims.size() > 4) throw std::invalid_argument("Tensor: more than 4 dims");
    for (int64_t v : dims) shape[static_cast<size_t>(ndim++)] = v;
  }

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
    return ndim == 0 ? 0 : n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? ndim + i : i)]; }
  // Rows of a 2-D view: product of all dims but the last.
  int64_t rows() const { return ndim == 0 ? 0 : numel() / shape[static_cast<size_t>(ndim - 1)]; }
  int64_t cols() const { return ndim == 0 ? 0 : shape[static_cast<size_t>(ndim - 1)]; }
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // A view of the first n rows (outermost dim) of this tensor; same memory.
  Tensor first_rows(int64_t n) const {
    Tensor t = *this;
    t.shape[0] = n;
    return t;
  }
  // A view of rows [begin, begin+n) along the outermost dim; same memory.
  Tensor slice_rows(int64_t begin, int64_t n) const {
    Tensor t = *this;
    int64_t row_elems = shape[0] == 0 ? 0 : numel() / shape[0];
    t.data = static_cast<char*>(data) +
             static_cast<size_t>(begin * row_elems) * dtype_size(dtype);
    t.shape[0] = n;
    return t;
  }
  // Same memory, new shape with the same number of elements.
  Tensor view(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, device, dims);
    if (t.numel() != numel()) throw std::invalid_argument("Tensor::view: element count differs");
    return t;
  }
  std::string shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) {
      if (i) s += ", ";
      s += std::to_string(shape[static_cast<size_t>(i)]);
    }
    return s + "]";
  }
};

}  // namespace pagoda
