// QuantLinearStore (gpu/quant_linear.h): allocation, repacking uploads,
// dispatch of the packed linears' kernels.
#include "gpu/quant_linear.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gpu/bench_switch.h"
#include "gpu/cuda_check.h"
#include "gpu/gemm.h"
#include "gpu/quant_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int64_t kMaxSmallM = 64;  // rows of x the register-dequantizing kernels take

[[noreturn]] void bad(const std::string& msg) {
  throw std::invalid_argument("cuda backend: quantized linear: " + msg);
}

void* device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(std::string("cuda backend: out of device memory allocating ") +
                             std::to_string(bytes) + " bytes for " + what + ": " +
                             cudaGetErrorString(e));
  }
  return p;
}

template <typename T>
T* upload(const std::vector<T>& v, cudaStream_t stream, const char* what) {
  if (v.empty()) return nullptr;
  auto* p = static_cast<T*>(device_alloc(v.size() * sizeof(T), what));
  PAGODA_CUDA_CHECK(
      cudaMemcpyAsync(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  return p;
}

// The decode kernel for M <= 8: qmv, or qmma where the environment has
// PAGODA_INT4_DECODE=qmma (a benchmark switch, to compare the two).
bool use_qmv() {
  static const bool qmv = bench_switch("PAGODA_INT4_DECODE") != "qmma";
  return qmv;
}

}  // namespace

QuantLinearStore::~QuantLinearStore() {
  cudaStreamSynchronize(stream_);
  for (auto& [addr, e] : entries_) free_entry(e);
  cudaFree(deq_);
  cudaFree(xperm_);
}

bool QuantLinearStore::supports(const QuantConfig& qc, int64_t in_features, DType act) {
  return (act == DType::F16 || act == DType::BF16) && packable(qc, in_features);
}

Tensor QuantLinearStore::alloc(int64_t N, int64_t K, const QuantConfig& qc) {
  if (!supports(qc, K, act_) || N <= 0)
    bad("cannot keep [" + std::to_string(N) + ", " + std::to_string(K) + "] packed");
  Entry e;
  e.bits = qc.bits;
  e.n = N;
  e.k = K;
  e.group_size = qc.group_size == -1 ? K : qc.group_size;
  e.g = (K + e.group_size - 1) / e.group_size;
  // PAGODA_INT4_LAYOUT=rows keeps 4-bit codes in rows (the fp32 GEMV), to
  // compare the two decode kernels in benchmarks.
  static const bool rows_only = bench_switch("PAGODA_INT4_LAYOUT") == "rows";
  // The tensor-core layout when its decode kernel's shared memory holds the
  // row's groups (4-bit group 32 stops fitting past K ~ 22,000 on an H200);
  // rows otherwise.
  e.tiled = !rows_only && tileable(e.bits, N, K) && qmma_fits(K, e.g);
  e.small_m = e.tiled ? std::min(kMaxSmallM, qmma_max_rows(K, e.g)) : 8;
  const size_t qbytes = static_cast<size_t>(N * e.words()) * 4;
  e.qweight = static_cast<uint32_t*>(device_alloc(qbytes, "packed weights"));
  e.scales =
      static_cast<float*>(device_alloc(static_cast<size_t>(N * e.g) * 4, "quantization scales"));
  e.zeros = static_cast<uint8_t*>(device_alloc(static_cast<size_t>(N * e.g), "quantization zeros"));
  PAGODA_CUDA_CHECK(cudaMemsetAsync(e.qweight, 0, qbytes, stream_));
  // The large-batch path's dequantized weight and the act-order x of small batches.
  const size_t deq = static_cast<size_t>(N * K) * dtype_size(act_);
  const size_t xp = static_cast<size_t>(kMaxSmallM * K) * dtype_size(act_);
  if (deq > deq_bytes_ || xp > xperm_bytes_) {
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (deq > deq_bytes_) {
      cudaFree(deq_);
      deq_ = nullptr;
      deq_ = device_alloc(deq, "dequantized weight scratch");
      deq_bytes_ = deq;
    }
    if (xp > xperm_bytes_) {
      cudaFree(xperm_);
      xperm_ = nullptr;
      xperm_ = device_alloc(xp, "act-order activations");
      xperm_bytes_ = xp;
    }
  }
  Tensor t(e.qweight, DType::I32, Device::CUDA, {N, e.words()});
  entries_.emplace(reinterpret_cast<uintptr_t>(e.qweight), std::move(e));
  return t;
}

void QuantLinearStore::free_entry(Entry& e) {
  for (Part& p : e.parts) {
    cudaFree(p.d_perm);
    cudaFree(p.d_chunk_group);
  }
  cudaFree(e.qweight);
  cudaFree(e.scales);
  cudaFree(e.zeros);
  e = Entry{};
}

bool QuantLinearStore::release(Tensor& t) {
  auto it = entries_.find(reinterpret_cast<uintptr_t>(t.data));
  if (it == entries_.end()) return false;
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  free_entry(it->second);
  entries_.erase(it);
  t.data = nullptr;
  return true;
}

const QuantLinearStore::Entry* QuantLinearStore::find(const Tensor& t, int64_t* row) const {
  if (t.dtype != DType::I32 || t.data == nullptr || entries_.empty()) return nullptr;
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  auto it = entries_.upper_bound(addr);
  if (it == entries_.begin()) return nullptr;
  --it;
  const Entry& e = it->second;
  const uintptr_t row_bytes = static_cast<uintptr_t>(e.words()) * 4;
  const uintptr_t off = addr - it->first;
  if (off >= static_cast<uintptr_t>(e.n) * row_bytes || off % row_bytes != 0) return nullptr;
  const auto r = static_cast<int64_t>(off / row_bytes);
  if (t.ndim != 2 || t.cols() != e.words() || r + t.rows() > e.n) return nullptr;
  if (row) *row = r;
  return &e;
}

QuantLinearStore::Entry* QuantLinearStore::find(const Tensor& t, int64_t* row) {
  return const_cast<Entry*>(static_cast<const QuantLinearStore*>(this)->find(t, row));
}

bool QuantLinearStore::owns(const Tensor& t) const { return find(t, nullptr) != nullptr; }

size_t QuantLinearStore::bytes(const Tensor& t) const {
  const Entry* e = find(t, nullptr);
  if (!e) return t.nbytes();
  return static_cast<size_t>(t.rows()) *
         (static_cast<size_t>(e->words()) * 4 + static_cast<size_t>(e->g) * 5);
}

void QuantLinearStore::add_part(Entry& e, Part p) {
  const int64_t chunk = packed_chunk(e.bits);
  p.regular = p.perm.empty();
  for (size_t c = 0; c < p.chunk_group.size() && p.regular; ++c)
    p.regular = p.chunk_group[c] == static_cast<int64_t>(c) * chunk / e.group_size;
  for (const Part& q : e.parts)
    if (p.row_begin < q.row_begin + q.rows && q.row_begin < p.row_begin + p.rows)
      bad("rows loaded twice");
  e.parts.push_back(std::move(p));
  std::sort(e.parts.begin(), e.parts.end(),
            [](const Part& a, const Part& b) { return a.row_begin < b.row_begin; });
  // Merge neighbours that read x the same way: one kernel launch for both.
  for (size_t i = 1; i < e.parts.size();) {
    Part &a = e.parts[i - 1], &b = e.parts[i];
    if (a.row_begin + a.rows == b.row_begin && a.perm == b.perm && a.chunk_group == b.chunk_group) {
      a.rows += b.rows;
      cudaFree(b.d_perm);
      cudaFree(b.d_chunk_group);
      e.parts.erase(e.parts.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void QuantLinearStore::load(const Tensor& dst, const QuantizedWeight& w) {
  int64_t r0 = 0;
  Entry* e = find(dst, &r0);
  if (!e) bad("'" + w.module + "': the destination is not a packed linear");
  if (dst.rows() != w.out_features || w.in_features != e->k || w.bits != e->bits)
    bad("'" + w.module + "': [" + std::to_string(w.out_features) + ", " +
        std::to_string(w.in_features) + "] " + std::to_string(w.bits) +
        "-bit does not fit the packed linear's rows " + dst.shape_str());
  PackedLinear p = pack_linear(w);
  if (p.num_groups != e->g)
    bad("'" + w.module + "': " + std::to_string(p.num_groups) + " groups, expected " +
        std::to_string(e->g));
  if (e->tiled && (r0 % 16 != 0 || dst.rows() % 16 != 0))
    bad("'" + w.module + "': rows [" + std::to_string(r0) + ", " + std::to_string(r0 + dst.rows()) +
        ") are not whole 16-row tiles of the tensor-core layout");
  if (e->tiled) p.qweight = tile_int4(p);  // the codes in the tensor-core layout
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(e->qweight + r0 * e->words(), p.qweight.data(), p.qweight.size() * 4,
                                    cudaMemcpyHostToDevice, stream_));
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(e->scales + r0 * e->g, p.scales.data(), p.scales.size() * 4,
                                    cudaMemcpyHostToDevice, stream_));
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(e->zeros + r0 * e->g, p.zeros.data(), p.zeros.size(),
                                    cudaMemcpyHostToDevice, stream_));
  Part part;
  part.row_begin = r0;
  part.rows = dst.rows();
  part.perm = p.perm;
  part.chunk_group = p.chunk_group;
  part.d_perm = upload(part.perm, stream_, "act-order permutation");
  part.d_chunk_group = upload(part.chunk_group, stream_, "chunk groups");
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host vectors go away
  add_part(*e, std::move(part));
}

void QuantLinearStore::fill_dummy(const Tensor& w, uint64_t seed) {
  int64_t r0 = 0;
  Entry* e = find(w, &r0);
  if (!e) bad("fill_dummy: not a packed linear");
  launch_qfill_dummy(e->bits, e->qweight + r0 * e->words(), e->scales + r0 * e->g,
                     e->zeros + r0 * e->g, w.rows(), e->k, e->g, seed, stream_);
  Part p;
  p.row_begin = r0;
  p.rows = w.rows();
  const int64_t chunk = packed_chunk(e->bits);
  p.chunk_group.resize(static_cast<size_t>(e->k / chunk));
  for (size_t c = 0; c < p.chunk_group.size(); ++c)
    p.chunk_group[c] = static_cast<int32_t>(static_cast<int64_t>(c) * chunk / e->group_size);
  p.d_chunk_group = upload(p.chunk_group, stream_, "chunk groups");
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  add_part(*e, std::move(p));
}

void QuantLinearStore::linear(const Tensor& x, const Tensor& w, const void* bias, Tensor& out) {
  int64_t r0 = 0;
  const Entry* e = find(w, &r0);
  if (!e || r0 != 0 || w.rows() != e->n)
    bad("linear needs a whole packed linear, got " + w.shape_str());
  const int64_t M = x.rows(), K = x.cols(), N = e->n;
  if (x.dtype != act_ || K != e->k || out.rows() != M || out.cols() != N ||
      (out.dtype != act_ && out.dtype != DType::F32))
    bad("shapes x " + x.shape_str() + " out " + out.shape_str() + " for a packed [" +
        std::to_string(N) + ", " + std::to_string(K) + "]");
  int64_t covered = 0;
  for (const Part& p : e->parts) covered += p.rows;
  if (covered != N) bad("linear on a packed weight whose rows are not all loaded");
  const size_t es = dtype_size(act_), os = dtype_size(out.dtype);
  const auto bias_at = [&](const Part& p) {
    return bias ? static_cast<const char*>(bias) + p.row_begin * static_cast<int64_t>(es) : nullptr;
  };
  if (M <= e->small_m) {
    for (const Part& p : e->parts) {
      const void* xp = x.data;
      if (p.d_perm) {
        launch_gather_cols(act_, x.data, p.d_perm, xperm_, M, K, stream_);
        xp = xperm_;
      }
      void* op = static_cast<char*>(out.data) + p.row_begin * static_cast<int64_t>(os);
      const uint32_t* codes = e->qweight + p.row_begin * e->words();
      const float* sc = e->scales + p.row_begin * e->g;
      const uint8_t* zp = e->zeros + p.row_begin * e->g;
      const int64_t gs = p.regular ? e->group_size : 0;  // 0: the chunk-group table
      if (e->tiled && M <= 8 && use_qmv() && qmv_fits(K, e->g, gs))
        launch_qmv(act_, out.dtype, xp, codes, sc, zp, p.d_chunk_group, gs, bias_at(p), op, N, M,
                   p.rows, K, e->g, stream_);
      else if (e->tiled)
        launch_qmma(act_, out.dtype, xp, codes, sc, zp, p.d_chunk_group, gs, bias_at(p), op, N, M,
                    p.rows, K, e->g, stream_);
      else
        launch_qgemv(act_, out.dtype, e->bits, xp, codes, sc, zp, p.d_chunk_group, bias_at(p), op,
                     N, M, p.rows, K, e->g, stream_);
    }
    return;
  }
  for (const Part& p : e->parts) {
    const uint32_t* codes = e->qweight + p.row_begin * e->words();
    const float* sc = e->scales + p.row_begin * e->g;
    const uint8_t* zp = e->zeros + p.row_begin * e->g;
    void* wp = static_cast<char*>(deq_) + p.row_begin * K * static_cast<int64_t>(es);
    if (e->tiled)
      launch_qdequant_tiled(act_, codes, sc, zp, p.d_chunk_group, p.d_perm, wp, p.rows, K, e->g,
                            stream_);
    else
      launch_qdequant(act_, e->bits, codes, sc, zp, p.d_chunk_group, p.d_perm, wp, p.rows, K, e->g,
                      stream_);
  }
  // deq_ was just written by the kernels above: gemm_.run must not take the
  // GEMV here (it reads weights before its programmatic-launch wait,
  // gpu/pdl.h). It does not: this path runs only above e->small_m rows
  // (tiled: at least 32; else 8), and launch_gemv takes at most 8.
  static_assert(kMaxSmallM >= 8, "the dequantize-then-GEMM path must stay above the GEMV's rows");
  gemm_.run(act_, out.dtype, x.data, deq_, bias, act_, out.data, M, N, K);
}

}  // namespace pagoda::cuda
