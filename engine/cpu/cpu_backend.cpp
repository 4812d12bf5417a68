// The CPU reference backend: every Backend op in fp32 on host memory, with
// shape/bounds checks before each kernel (engine/cpu/cpu_kernels.h).
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/half.h"
#include "engine/cpu/thread_pool.h"
#include "engine/kv/block_manager.h"
#include "engine/model/backend.h"

namespace pagoda {
namespace {

using cpu::ThreadPool;

[[noreturn]] void bad(const std::string& op, const std::string& what) {
  throw std::invalid_argument("cpu backend: " + op + ": " + what);
}

void expect_f32(const std::string& op, const char* arg, const Tensor& t) {
  if (t.dtype != DType::F32) bad(op, std::string(arg) + " must be F32, got " + dtype_name(t.dtype));
  if (t.data == nullptr && t.numel() != 0) bad(op, std::string(arg) + " has no data");
}
void expect_i32(const std::string& op, const char* arg, const Tensor& t) {
  if (t.dtype != DType::I32) bad(op, std::string(arg) + " must be I32, got " + dtype_name(t.dtype));
}
void expect_2d(const std::string& op, const char* arg, const Tensor& t, int64_t rows, int64_t cols) {
  if (t.rows() != rows || t.cols() != cols)
    bad(op, std::string(arg) + " is " + t.shape_str() + ", expected [" + std::to_string(rows) +
                ", " + std::to_string(cols) + "]");
}

class CpuBackend final : public Backend {
  static void swap(std::span<const LayerKVCache> device, const HostKVCache& host,
                   std::span<const BlockSwap> pairs, bool to_host) {
    for_each_swap_range(device, host, pairs, [to_host](std::byte* dev, std::byte* hst, size_t n) {
      if (to_host)
        std::memcpy(hst, dev, n);
      else
        std::memcpy(dev, hst, n);
    });
  }

 public:
  explicit CpuBackend(int num_threads) : pool_(num_threads) {}

  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  DType act_dtype() const override { return DType::F32; }

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override {
    Tensor t(nullptr, dtype, Device::CPU, shape);
    for (int i = 0; i < t.ndim; ++i)
      if (t.shape[static_cast<size_t>(i)] < 0) bad("alloc", "negative dimension in " + t.shape_str());
    const size_t bytes = t.nbytes();
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    t.data = std::aligned_alloc(64, rounded);
    if (!t.data)
      throw std::runtime_error("cpu backend: out of memory allocating " + std::to_string(bytes) +
                               " bytes for " + t.shape_str());
    return t;
  }
  void free(Tensor& t) override {
    std::free(t.data);
    t.data = nullptr;
  }
  size_t free_memory_bytes() const override {
    std::ifstream in("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    std::string unit;
    while (in >> key >> kb >> unit)
      if (key == "MemAvailable:") return kb * 1024;
    return total_memory_bytes();
  }
  size_t total_memory_bytes() const override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  }

  HostKVCache alloc_host_kv_cache(int64_t num_layers, int64_t num_blocks,
                                  size_t block_bytes) override {
    HostKVCache h{nullptr, num_layers, num_blocks, block_bytes};
    if (num_layers <= 0 || num_blocks <= 0 || block_bytes == 0) return h;
    // Anonymous pages: the swap space costs memory only where swapped into.
    void* p = mmap(nullptr, h.bytes(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw std::runtime_error("cpu backend: cannot map " + std::to_string(h.bytes()) +
                               " bytes of swap space");
    h.data = static_cast<std::byte*>(p);
    return h;
  }
  void free_host_kv_cache(HostKVCache& h) override {
    if (h.data) munmap(h.data, h.bytes());
    h.data = nullptr;
  }
  void swap_out(std::span<const LayerKVCache> device, const HostKVCache& host,
                std::span<const BlockSwap> pairs) override {
    check_swap("cpu backend: swap_out", device, host, pairs);
    swap(device, host, pairs, /*to_host=*/true);
  }
  void swap_in(std::span<const LayerKVCache> device, const HostKVCache& host,
               std::span<const BlockSwap> pairs) override {
    check_swap("cpu backend: swap_in", device, host, pairs);
    swap(device, host, pairs, /*to_host=*/false);
  }
  void copy_blocks(std::span<const LayerKVCache> caches,
                   std::span<const BlockCopy> copies) override {
    check_block_copies("cpu backend: copy_blocks", caches, copies);
    for_each_block_copy(caches, copies, [](std::byte* dst, const std::byte* src, size_t n) {
      std::memcpy(dst, src, n);
    });
  }

  void copy_from_host(Tensor& dst, const void* src, DType src_dtype) override {
    const int64_t n = dst.numel();
    if (n == 0) return;
    if (dst.dtype == DType::I32 || src_dtype == DType::I32) {
      if (dst.dtype != src_dtype) bad("copy_from_host", "I32 only copies to I32");
      std::memcpy(dst.data, src, dst.nbytes());
      return;
    }
    if (dst.dtype != DType::F32)
      bad("copy_from_host", std::string("destination dtype ") + dtype_name(dst.dtype) +
                                " unsupported on the CPU backend (F32/I32)");
    float* out = dst.ptr<float>();
    switch (src_dtype) {
      case DType::F32:
        std::memcpy(out, src, static_cast<size_t>(n) * 4);
        return;
      // 16-bit values read with memcpy: a safetensors header need not be
      // padded to an even length, so a tensor's data may start at an odd
      // address (a plain uint16_t load there is undefined behaviour).
      case DType::BF16: {
        const auto* bytes = static_cast<const unsigned char*>(src);
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, bytes + 2 * i, 2);
          out[i] = cpu::bf16_to_f32(h);
        }
        return;
      }
      case DType::F16: {
        const auto* bytes = static_cast<const unsigned char*>(src);
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, bytes + 2 * i, 2);
          out[i] = cpu::f16_to_f32(h);
        }
        return;
      }
      default:
        bad("copy_from_host", std::string("unsupported source dtype ") + dtype_name(src_dtype));
    }
  }
  void copy_to_host(void* dst, const Tensor& src) override {
    if (src.dtype != DType::F32 && src.dtype != DType::I32)
      bad("copy_to_host", std::string("unsupported dtype ") + dtype_name(src.dtype));
    if (src.numel() > 0) std::memcpy(dst, src.data, src.nbytes());
  }
  void fill_zero(Tensor& t) override {
    if (t.numel() > 0) std::memset(t.data, 0, t.nbytes());
  }
  void synchronize() override {}

  const DeviceBatch& upload_batch(const ForwardBatch& b) override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override {
    expect_i32("embedding", "ids", ids);
    expect_f32("embedding", "table", table);
    expect_f32("embedding", "out", out);
    const int64_t T = ids.numel(), V = table.rows(), H = table.cols();
    expect_2d("embedding", "out", out, T, H);
    const int32_t* id = ids.ptr<int32_t>();
    for (int64_t t = 0; t < T; ++t) {
      if (id[t] < 0 || id[t] >= V)
        bad("embedding", "token id " + std::to_string(id[t]) + " out of range [0, " + std::to_string(V) + ")");
      std::memcpy(out.ptr<float>() + t * H, table.ptr<float>() + id[t] * H, static_cast<size_t>(H) * 4);
    }
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    expect_f32("rms_norm", "x", x);
    expect_f32("rms_norm", "w", w);
    expect_f32("rms_norm", "out", out);
    const int64_t H = x.cols();
    if (w.numel() != H) bad("rms_norm", "w has " + std::to_string(w.numel()) + " elements, x " + x.shape_str());
    expect_2d("rms_norm", "out", out, x.rows(), H);
    cpu::rms_norm_f32(x.ptr<float>(), w.ptr<float>(), eps, out.ptr<float>(), x.rows(), H);
  }

  void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) override {
    expect_f32("add_rms_norm", "x", x);
    expect_f32("add_rms_norm", "residual", residual);
    expect_2d("add_rms_norm", "residual", residual, x.rows(), x.cols());
    float* r = residual.ptr<float>();
    const float* xs = x.ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) r[i] += xs[i];
    rms_norm(residual, w, eps, out);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    expect_f32("linear", "x", x);
    expect_f32("linear", "w", w);
    expect_f32("linear", "out", out);
    const int64_t T = x.rows(), K = x.cols(), N = w.rows();
    if (w.cols() != K) bad("linear", "x " + x.shape_str() + " and w " + w.shape_str() + " disagree on K");
    expect_2d("linear", "out", out, T, N);
    const float* b = nullptr;
    if (bias && !bias->empty()) {
      expect_f32("linear", "bias", *bias);
      if (bias->numel() != N) bad("linear", "bias " + bias->shape_str() + " for N = " + std::to_string(N));
      b = bias->ptr<float>();
    }
    cpu::linear_f32(pool_, x.ptr<float>(), w.ptr<float>(), b, out.ptr<float>(), T, K, N);
  }

  void rope_and_cache(const Tensor& qkv, const RopeTable& rope, const DeviceBatch& batch,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, Tensor& q_out,
                      LayerKVCache& cache) override;

  void attention(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                 int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                 Tensor& out) override;

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    expect_f32("silu_mul", "gate_up", gate_up);
    expect_f32("silu_mul", "out", out);
    if (gate_up.cols() % 2 != 0) bad("silu_mul", "gate_up " + gate_up.shape_str() + " has an odd width");
    const int64_t T = gate_up.rows(), I = gate_up.cols() / 2;
    expect_2d("silu_mul", "out", out, T, I);
    cpu::silu_mul_f32(gate_up.ptr<float>(), out.ptr<float>(), T, I);
  }

  void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override {
    expect_i32("gather_rows", "indices", indices);
    if (x.dtype != out.dtype) bad("gather_rows", "x and out dtypes differ");
    const int64_t L = indices.numel(), T = x.rows(), H = x.cols();
    expect_2d("gather_rows", "out", out, L, H);
    const size_t row = static_cast<size_t>(H) * dtype_size(x.dtype);
    const int32_t* idx = indices.ptr<int32_t>();
    for (int64_t l = 0; l < L; ++l) {
      if (idx[l] < 0 || idx[l] >= T)
        bad("gather_rows", "index " + std::to_string(idx[l]) + " out of range [0, " + std::to_string(T) + ")");
      std::memmove(static_cast<char*>(out.data) + static_cast<size_t>(l) * row,
                   static_cast<const char*>(x.data) + static_cast<size_t>(idx[l]) * row, row);
    }
  }

  bool implements(BackendOp /*op*/) const override { return true; }

  void attention_ext(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                     const AttentionOptions& opts, Tensor& out) override;

  void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, int64_t Hq, int64_t Hk,
                     int64_t D, float eps) override {
    const std::string op = "head_rms_norm";
    expect_f32(op, "qkv", qkv);
    expect_f32(op, "q_w", q_w);
    expect_f32(op, "k_w", k_w);
    const int64_t W = (Hq + 2 * Hk) * D;
    if (qkv.cols() != W)
      bad(op, "qkv " + qkv.shape_str() + " for " + std::to_string(W) + " columns");
    if (q_w.numel() != D || k_w.numel() != D)
      bad(op, "q_w " + q_w.shape_str() + " / k_w " + k_w.shape_str() + " for head_dim " +
                  std::to_string(D));
    for (int64_t t = 0; t < qkv.rows(); ++t) {
      float* row = qkv.ptr<float>() + t * W;
      cpu::rms_norm_f32(row, q_w.ptr<float>(), eps, row, Hq, D);
      cpu::rms_norm_f32(row + Hq * D, k_w.ptr<float>(), eps, row + Hq * D, Hk, D);
    }
  }

  void gated_act(const Tensor& gate_up, GatedActivation act, Tensor& out) override {
    if (act == GatedActivation::SiLU) return silu_mul(gate_up, out);
    expect_f32("gated_act", "gate_up", gate_up);
    expect_f32("gated_act", "out", out);
    if (gate_up.cols() % 2 != 0)
      bad("gated_act", "gate_up " + gate_up.shape_str() + " has an odd width");
    const int64_t T = gate_up.rows(), I = gate_up.cols() / 2;
    expect_2d("gated_act", "out", out, T, I);
    cpu::gelu_tanh_mul_f32(gate_up.ptr<float>(), out.ptr<float>(), T, I);
  }

  void softcap(Tensor& x, float cap) override {
    expect_f32("softcap", "x", x);
    if (!(cap > 0.0f)) bad("softcap", "cap must be positive");
    float* v = x.ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) v[i] = cap * std::tanh(v[i] / cap);
  }

  void scale(Tensor& x, float s) override {
    expect_f32("scale", "x", x);
    float* v = x.ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) v[i] *= s;
  }

  void moe(const Tensor& x, const MoeWeights& w, const MoeOptions& opts, Tensor& out) override;

  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                  Tensor& out) override {
    const std::string op = "layer_norm";
    expect_f32(op, "x", x);
    expect_f32(op, "w", w);
    expect_f32(op, "b", b);
    expect_f32(op, "out", out);
    const int64_t H = x.cols();
    if (w.numel() != H || b.numel() != H)
      bad(op, "w " + w.shape_str() + " / b " + b.shape_str() + " for x " + x.shape_str());
    expect_2d(op, "out", out, x.rows(), H);
    cpu::layer_norm_f32(x.ptr<float>(), w.ptr<float>(), b.ptr<float>(), eps, out.ptr<float>(),
                        x.rows(), H);
  }

  void add_layer_norm(const Tensor& x, Tensor& residual, const Tensor& w, const Tensor& b,
                      float eps, Tensor& out) override {
    add(x, residual);
    layer_norm(residual, w, b, eps, out);
  }

  void add(const Tensor& x, Tensor& y) override {
    expect_f32("add", "x", x);
    expect_f32("add", "y", y);
    if (x.shape != y.shape)
      bad("add", "x " + x.shape_str() + " and y " + y.shape_str() + " differ");
    const float* xs = x.ptr<float>();
    float* ys = y.ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) ys[i] += xs[i];
  }

  void activation(const Tensor& x, Activation act, Tensor& out) override {
    expect_f32("activation", "x", x);
    expect_f32("activation", "out", out);
    if (x.shape != out.shape)
      bad("activation", "x " + x.shape_str() + " and out " + out.shape_str() + " differ");
    const float* xs = x.ptr<float>();
    float* o = out.ptr<float>();
    const int64_t n = x.numel();
    if (act == Activation::Gelu) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = 0.5f * xs[i] * (1.0f + std::erf(xs[i] * 0.7071067811865476f));
    } else {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      for (int64_t i = 0; i < n; ++i) {
        const float v = xs[i];
        o[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
      }
    }
  }

 private:
  ThreadPool pool_;
  // Host copies of the last uploaded batch; DeviceBatch tensors point here.
  ForwardBatch host_;
  DeviceBatch dev_;
};

Tensor host_i32(std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  return Tensor(v.data(), DType::I32, Device::CPU, shape);
}

const DeviceBatch& CpuBackend::upload_batch(const ForwardBatch& b) {
  const int64_t T = b.num_tokens(), B = b.num_seqs();
  auto fail = [](const std::string& w) { bad("upload_batch", w); };
  if (b.positions.size() != static_cast<size_t>(T) || b.slot_mapping.size() != static_cast<size_t>(T))
    fail("positions/slot_mapping must have one entry per token");
  if (B < 1 || b.query_start_loc[0] != 0 || b.query_start_loc[static_cast<size_t>(B)] != T)
    fail("query_start_loc must run from 0 to num_tokens over >= 1 sequence");
  for (int64_t i = 0; i < B; ++i)
    if (b.query_start_loc[static_cast<size_t>(i + 1)] < b.query_start_loc[static_cast<size_t>(i)])
      fail("query_start_loc must be non-decreasing");
  if (b.context_lens.size() != static_cast<size_t>(B)) fail("context_lens must have one entry per sequence");
  if (b.max_blocks_per_seq < 1 || b.block_tables.size() != static_cast<size_t>(B * b.max_blocks_per_seq))
    fail("block_tables must be [num_seqs, max_blocks_per_seq]");
  for (int32_t l : b.logits_indices)
    if (l < 0 || l >= T) fail("logits index " + std::to_string(l) + " out of range");
  for (int32_t p : b.positions)
    if (p < 0) fail("negative position");
  host_ = b;
  const auto L = static_cast<int64_t>(host_.logits_indices.size());
  dev_ = DeviceBatch{};
  dev_.input_ids = host_i32(host_.input_ids, {T});
  dev_.positions = host_i32(host_.positions, {T});
  dev_.slot_mapping = host_i32(host_.slot_mapping, {T});
  dev_.query_start_loc = host_i32(host_.query_start_loc, {B + 1});
  dev_.context_lens = host_i32(host_.context_lens, {B});
  dev_.block_tables = host_i32(host_.block_tables, {B, b.max_blocks_per_seq});
  dev_.logits_indices = host_i32(host_.logits_indices, {L});
  dev_.num_tokens = static_cast<int32_t>(T);
  dev_.num_seqs = static_cast<int32_t>(B);
  dev_.num_logits = static_cast<int32_t>(L);
  dev_.max_query_len = b.max_query_len();
  dev_.max_context_len = b.max_context_len();
  dev_.max_blocks_per_seq = b.max_blocks_per_seq;
  dev_.decode_only = b.is_decode_only();
  return dev_;
}

void CpuBackend::rope_and_cache(const Tensor& qkv, const RopeTable& rope, const DeviceBatch& batch,
                                int64_t Hq, int64_t Hk, int64_t D, Tensor& q_out, LayerKVCache& cache) {
  const std::string op = "rope_and_cache";
  expect_f32(op, "qkv", qkv);
  expect_f32(op, "q_out", q_out);
  expect_f32(op, "cos_sin", rope.cos_sin);
  expect_f32(op, "k cache", cache.k);
  expect_f32(op, "v cache", cache.v);
  const int64_t T = batch.num_tokens, W = (Hq + 2 * Hk) * D;
  expect_2d(op, "qkv", qkv, T, W);
  expect_2d(op, "q_out", q_out, T, Hq * D);
  const int64_t R = rope.rotary_dim;
  if (R < 0 || R > D || R % 2 != 0 || (R > 0 && rope.cos_sin.cols() != R))
    bad(op, "rope table " + rope.cos_sin.shape_str() + " of rotary_dim " + std::to_string(R) +
                " does not match head_dim " + std::to_string(D));
  if (cache.k.ndim != 4 || cache.k.dim(2) != Hk || cache.k.dim(3) != D || cache.v.shape != cache.k.shape)
    bad(op, "cache " + cache.k.shape_str() + " does not match [*, *, " + std::to_string(Hk) + ", " + std::to_string(D) + "]");
  const int64_t num_slots = cache.k.dim(0) * cache.k.dim(1);
  const int64_t max_pos = R > 0 ? rope.cos_sin.rows() : INT64_MAX;
  // Rotates (or, for R < D, partly rotates) one head vector.
  const auto rotate = [&](const float* x, const float* cs, float* out) {
    if (R == D && !rope.interleaved)
      cpu::rope_rotate_f32(x, cs, out, D);
    else if (R == 0)
      std::memcpy(out, x, static_cast<size_t>(D) * 4);
    else
      cpu::rope_partial_f32(x, cs, out, D, R, rope.interleaved);
  };
  const int32_t* pos = batch.positions.ptr<int32_t>();
  const int32_t* slots = batch.slot_mapping.ptr<int32_t>();
  float* kc = cache.k.ptr<float>();
  float* vc = cache.v.ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    if (pos[t] < 0 || pos[t] >= max_pos)
      bad(op, "position " + std::to_string(pos[t]) + " outside the rope table (" + std::to_string(max_pos) + ")");
    if (slots[t] >= num_slots)
      bad(op, "slot " + std::to_string(slots[t]) + " outside the cache (" + std::to_string(num_slots) + " slots)");
    const float* row = qkv.ptr<float>() + t * W;
    const float* cs =
        R > 0 ? rope.cos_sin.ptr<float>() + static_cast<int64_t>(pos[t]) * R : nullptr;
    for (int64_t h = 0; h < Hq; ++h) rotate(row + h * D, cs, q_out.ptr<float>() + (t * Hq + h) * D);
    if (slots[t] < 0) continue;  // padding token: no cache write
    const int64_t base = static_cast<int64_t>(slots[t]) * Hk * D;
    for (int64_t h = 0; h < Hk; ++h) {
      rotate(row + (Hq + h) * D, cs, kc + base + h * D);
      std::memcpy(vc + base + h * D, row + (Hq + Hk + h) * D, static_cast<size_t>(D) * 4);
    }
  }
}

void CpuBackend::attention(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                           int64_t Hq, int64_t Hk, int64_t D, float scale, Tensor& out) {
  attention_ext(q, cache, batch, Hq, Hk, D, scale, AttentionOptions{}, out);
}

void CpuBackend::moe(const Tensor& x, const MoeWeights& w, const MoeOptions& opts, Tensor& out) {
  const std::string op = "moe";
  expect_f32(op, "x", x);
  expect_f32(op, "out", out);
  expect_f32(op, "router", w.router);
  expect_f32(op, "gate_up", w.gate_up);
  expect_f32(op, "down", w.down);
  const int64_t T = x.rows(), H = x.cols(), E = w.router.rows();
  expect_2d(op, "out", out, T, H);
  expect_2d(op, "router", w.router, E, H);
  if (w.gate_up.ndim != 3 || w.gate_up.dim(0) != E || w.gate_up.dim(2) != H ||
      w.gate_up.dim(1) % 2 != 0)
    bad(op, "gate_up " + w.gate_up.shape_str() + " for " + std::to_string(E) +
                " experts of hidden " + std::to_string(H));
  const int64_t I = w.gate_up.dim(1) / 2;
  if (w.down.ndim != 3 || w.down.dim(0) != E || w.down.dim(1) != H || w.down.dim(2) != I)
    bad(op, "down " + w.down.shape_str() + " does not match gate_up " + w.gate_up.shape_str());
  if (opts.top_k < 1 || opts.top_k > E)
    bad(op, "top_k " + std::to_string(opts.top_k) + " of " + std::to_string(E) + " experts");
  cpu::MoeArgs a{};
  a.router = w.router.ptr<float>();
  a.gate_up = w.gate_up.ptr<float>();
  a.down = w.down.ptr<float>();
  a.hidden = H;
  a.num_experts = E;
  a.intermediate = I;
  a.top_k = opts.top_k;
  a.renormalize = opts.renormalize;
  if (!w.shared_gate_up.empty()) {
    expect_f32(op, "shared_gate_up", w.shared_gate_up);
    expect_f32(op, "shared_down", w.shared_down);
    expect_f32(op, "shared_gate", w.shared_gate);
    const int64_t Is = w.shared_gate_up.rows() / 2;
    expect_2d(op, "shared_gate_up", w.shared_gate_up, 2 * Is, H);
    expect_2d(op, "shared_down", w.shared_down, H, Is);
    if (w.shared_gate.numel() != H) bad(op, "shared_gate " + w.shared_gate.shape_str());
    a.shared_gate_up = w.shared_gate_up.ptr<float>();
    a.shared_down = w.shared_down.ptr<float>();
    a.shared_gate = w.shared_gate.ptr<float>();
    a.shared_intermediate = Is;
  }
  cpu::moe_f32(pool_, a, x.ptr<float>(), out.ptr<float>(), T);
}

void CpuBackend::attention_ext(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                               int64_t Hq, int64_t Hk, int64_t D, float scale,
                               const AttentionOptions& opts, Tensor& out) {
  const std::string op = "attention";
  if (opts.sliding_window < 0 || opts.logit_softcap < 0.0f)
    bad(op, "negative sliding window or soft-cap");
  expect_f32(op, "q", q);
  expect_f32(op, "out", out);
  expect_f32(op, "k cache", cache.k);
  expect_f32(op, "v cache", cache.v);
  const int64_t T = batch.num_tokens;
  expect_2d(op, "q", q, T, Hq * D);
  expect_2d(op, "out", out, T, Hq * D);
  if (Hk <= 0 || Hq % Hk != 0) bad(op, "num_heads must be a multiple of num_kv_heads");
  if (cache.k.ndim != 4 || cache.k.dim(2) != Hk || cache.k.dim(3) != D || cache.v.shape != cache.k.shape)
    bad(op, "cache " + cache.k.shape_str() + " does not match [*, *, " + std::to_string(Hk) + ", " + std::to_string(D) + "]");
  cpu::PagedAttnArgs a{};
  a.positions = batch.positions.ptr<int32_t>();
  a.query_start_loc = batch.query_start_loc.ptr<int32_t>();
  a.block_tables = batch.block_tables.ptr<int32_t>();
  a.num_tokens = T;
  a.num_seqs = batch.num_seqs;
  a.max_blocks_per_seq = batch.max_blocks_per_seq;
  a.num_blocks = cache.k.dim(0);
  a.block_size = cache.k.dim(1);
  a.num_heads = Hq;
  a.num_kv_heads = Hk;
  a.head_dim = D;
  a.scale = scale;
  a.sliding_window = opts.sliding_window;
  a.softcap = opts.logit_softcap;
  if (!opts.alibi_slopes.empty()) {
    expect_f32(op, "alibi_slopes", opts.alibi_slopes);
    if (opts.alibi_slopes.numel() != Hq)
      bad(op, "alibi_slopes " + opts.alibi_slopes.shape_str() + " for " + std::to_string(Hq) +
                  " heads");
    a.alibi = opts.alibi_slopes.ptr<float>();
  }
  // Every block a query reads must be inside its table row and the cache.
  int64_t max_ctx = 0;
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    int32_t last = -1, first = std::numeric_limits<int32_t>::max();
    for (int32_t t = a.query_start_loc[s]; t < a.query_start_loc[s + 1]; ++t) {
      last = std::max(last, a.positions[t]);
      first = std::min(first, a.positions[t]);
    }
    if (last < 0) continue;
    // With a window, blocks before the earliest query's are not read.
    const int64_t k0 = first_block_in_window(first, a.sliding_window, a.block_size);
    const int64_t ctx = static_cast<int64_t>(last) + 1;
    const int64_t nblk = (ctx + a.block_size - 1) / a.block_size;
    if (nblk > a.max_blocks_per_seq)
      bad(op, "sequence " + std::to_string(s) + " needs " + std::to_string(nblk) + " blocks, table has " +
                  std::to_string(a.max_blocks_per_seq));
    for (int64_t k = k0; k < nblk; ++k) {
      const int32_t blk = a.block_tables[s * a.max_blocks_per_seq + k];
      if (blk < 0 || blk >= a.num_blocks) bad(op, "block id " + std::to_string(blk) + " out of range");
    }
    max_ctx = std::max(max_ctx, ctx);
  }
  a.max_context_len = max_ctx;
  cpu::paged_attention_f32(pool_, a, q.ptr<float>(), cache.k.ptr<float>(), cache.v.ptr<float>(), out.ptr<float>());
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int num_threads) {
  return std::make_unique<CpuBackend>(num_threads);
}

}  // namespace pagoda
