// Reading, sharding and dequantizing GPTQ / AWQ linears (quantized_weight.h).
#include "engine/quant/quantized_weight.h"

#include <cstring>
#include <stdexcept>

#include "engine/cpu/half.h"
#include "engine/weights/safetensors.h"

namespace pagoda {
namespace {

// AWQ's packing order: nibble j holds column order[j]; kAwqShift[c] is the
// nibble holding column c (the inverse permutation).
constexpr int kAwqShift[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

[[noreturn]] void fail(const std::string& where, const std::string& module,
                       const std::string& what) {
  throw std::runtime_error("weights " + where + ": quantized linear '" + module + "': " + what);
}

const SafetensorsTensor& need(const SafetensorsModel& st, const std::string& module,
                              const char* part, const std::vector<int64_t>& shape, bool want_int,
                              const QuantConfig& qc) {
  const std::string name = module + "." + part;
  const SafetensorsTensor* t = st.find(name);
  if (!t)
    fail(st.source(), module,
         "tensor '" + name + "' is missing (a " + quant_method_name(qc.method) +
             " checkpoint needs qweight, qzeros and scales" +
             (qc.method == QuantMethod::GPTQ ? ", g_idx" : "") + " for every quantized linear)");
  if (want_int ? t->dtype_name != "I32" : !t->float_dtype)
    fail(t->file, module,
         "tensor '" + name + "' has dtype " + t->dtype_name + ", expected " +
             (want_int ? "I32" : "F16/BF16/F32"));
  if (t->shape != shape)
    fail(t->file, module,
         "tensor '" + name + "' has shape " + t->shape_str() + ", expected " + shape_str(shape) +
             " for " + qc.describe());
  return *t;
}

std::vector<int32_t> read_i32(const SafetensorsTensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

std::vector<float> read_float(const SafetensorsTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const auto* p = static_cast<const unsigned char*>(t.data);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h;
    switch (t.dtype) {
      case DType::F32:
        std::memcpy(&v[i], p + 4 * i, 4);
        break;
      case DType::F16:
        std::memcpy(&h, p + 2 * i, 2);
        v[i] = cpu::f16_to_f32(h);
        break;
      default:
        std::memcpy(&h, p + 2 * i, 2);
        v[i] = cpu::bf16_to_f32(h);
        break;
    }
  }
  return v;
}

// Columns [c0, c0 + n) of a row-major [rows, cols] matrix.
template <typename T>
std::vector<T> cols_of(const std::vector<T>& m, int64_t rows, int64_t cols, int64_t c0, int64_t n) {
  std::vector<T> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * n, m.data() + r * cols + c0, static_cast<size_t>(n) * sizeof(T));
  return out;
}

// Rows [r0, r0 + n) of a row-major [rows, cols] matrix.
template <typename T>
std::vector<T> rows_of(const std::vector<T>& m, int64_t cols, int64_t r0, int64_t n) {
  return std::vector<T>(m.begin() + r0 * cols, m.begin() + (r0 + n) * cols);
}

}  // namespace

size_t QuantizedWeight::packed_bytes() const {
  return 4 * (qweight.size() + qzeros.size() + (method == QuantMethod::GPTQ ? g_idx.size() : 0)) +
         2 * scales.size();
}

QuantizedWeight read_quantized_weight(const SafetensorsModel& st, const std::string& module,
                                      const QuantConfig& qc, int64_t N, int64_t K) {
  QuantizedWeight w;
  w.module = module;
  w.method = qc.method;
  w.bits = qc.bits;
  w.group_size = qc.group_size;
  w.desc_act = qc.desc_act;
  w.out_features = N;
  w.in_features = K;
  const int64_t pack = qc.pack_factor();
  const int64_t gs = qc.group_size < 0 ? K : qc.group_size;
  w.num_groups = (K + gs - 1) / gs;
  const int64_t G = w.num_groups;
  const bool gptq = qc.method == QuantMethod::GPTQ;
  if (N % pack != 0 || (gptq && K % pack != 0))
    fail(st.source(), module,
         "shape [" + std::to_string(N) + ", " + std::to_string(K) +
             "] is not divisible by the pack factor " + std::to_string(pack) + " of " +
             qc.describe());
  if (gptq) {
    w.qweight = read_i32(need(st, module, "qweight", {K / pack, N}, true, qc));
    w.qzeros = read_i32(need(st, module, "qzeros", {G, N / pack}, true, qc));
    w.scales = read_float(need(st, module, "scales", {G, N}, false, qc));
    const SafetensorsTensor* gi = st.find(module + ".g_idx");
    if (gi || qc.desc_act) {
      w.g_idx = read_i32(need(st, module, "g_idx", {K}, true, qc));
      for (int64_t k = 0; k < K; ++k)
        if (w.g_idx[static_cast<size_t>(k)] < 0 || w.g_idx[static_cast<size_t>(k)] >= G)
          fail(gi->file, module,
               "g_idx[" + std::to_string(k) +
                   "] = " + std::to_string(w.g_idx[static_cast<size_t>(k)]) + " is outside [0, " +
                   std::to_string(G) + ") groups");
    }
  } else {
    w.qweight = read_i32(need(st, module, "qweight", {K, N / pack}, true, qc));
    w.qzeros = read_i32(need(st, module, "qzeros", {G, N / pack}, true, qc));
    w.scales = read_float(need(st, module, "scales", {G, N}, false, qc));
  }
  if (w.g_idx.empty()) {
    w.g_idx.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) w.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / gs);
  }
  return w;
}

QuantizedWeight shard_quantized_weight(const QuantizedWeight& w, int dim, int64_t begin,
                                       int64_t count) {
  if (dim < 0) return w;
  const bool gptq = w.method == QuantMethod::GPTQ;
  const int64_t pack = w.pack_factor(), N = w.out_features, K = w.in_features, G = w.num_groups;
  const int64_t full = dim == 0 ? N : K;
  if (begin < 0 || count <= 0 || begin + count > full)
    throw std::invalid_argument("shard_quantized_weight: range outside the weight");
  auto misaligned = [&](const std::string& what, int64_t unit) {
    throw std::runtime_error(
        "quantized linear '" + w.module + "': the tensor-parallel shard [" + std::to_string(begin) +
        ", " + std::to_string(begin + count) + ") of its " + (dim == 0 ? "output" : "input") +
        " features (" + std::to_string(count) +
        " per partition) is not aligned with the quantized weight shape (" + what + " " +
        std::to_string(unit) + "). This can be caused by too large tensor parallel size.");
  };
  QuantizedWeight s = w;
  if (dim == 0) {  // column-parallel: output features n
    if (begin % pack != 0 || count % pack != 0) misaligned("pack factor", pack);
    s.out_features = count;
    s.scales = cols_of(w.scales, G, N, begin, count);
    s.qzeros = cols_of(w.qzeros, G, N / pack, begin / pack, count / pack);
    s.qweight = gptq ? cols_of(w.qweight, K / pack, N, begin, count)
                     : cols_of(w.qweight, K, N / pack, begin / pack, count / pack);
    return s;
  }
  // Row-parallel: input features k.
  if (gptq && (begin % pack != 0 || count % pack != 0)) misaligned("pack factor", pack);
  s.in_features = count;
  s.qweight = gptq ? rows_of(w.qweight, N, begin / pack, count / pack)
                   : rows_of(w.qweight, N / pack, begin, count);
  s.g_idx.assign(w.g_idx.begin() + begin, w.g_idx.begin() + begin + count);
  const bool keep_groups = w.desc_act || w.group_size < 0;
  if (!keep_groups) {
    if (begin % w.group_size != 0 || count % w.group_size != 0)
      misaligned("group_size", w.group_size);
    const int64_t g0 = begin / w.group_size, ng = count / w.group_size;
    s.num_groups = ng;
    s.scales = rows_of(w.scales, N, g0, ng);
    s.qzeros = rows_of(w.qzeros, N / pack, g0, ng);
    for (int32_t& g : s.g_idx) g -= static_cast<int32_t>(g0);
  }
  return s;
}

void dequantize_linear(const QuantizedWeight& w, float* out) {
  const int64_t N = w.out_features, K = w.in_features, pack = w.pack_factor();
  const uint32_t mask = (1u << w.bits) - 1u;
  const bool gptq = w.method == QuantMethod::GPTQ;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t g = w.g_idx[static_cast<size_t>(k)];
    const float* sc = w.scales.data() + g * N;
    const int32_t* zr = w.qzeros.data() + g * (N / pack);
    for (int64_t n = 0; n < N; ++n) {
      uint32_t q, z;
      if (gptq) {
        q = (static_cast<uint32_t>(w.qweight[static_cast<size_t>((k / pack) * N + n)]) >>
             (w.bits * static_cast<int>(k % pack))) &
            mask;
        z = ((static_cast<uint32_t>(zr[n / pack]) >> (w.bits * static_cast<int>(n % pack))) &
             mask) +
            1u;
      } else {
        const int shift = 4 * kAwqShift[n % 8];
        q = (static_cast<uint32_t>(w.qweight[static_cast<size_t>(k * (N / 8) + n / 8)]) >> shift) &
            mask;
        z = (static_cast<uint32_t>(zr[n / 8]) >> shift) & mask;
      }
      out[n * K + k] =
          sc[n] * static_cast<float>(static_cast<int32_t>(q) - static_cast<int32_t>(z));
    }
  }
}

}  // namespace pagoda
