// QuantLinearStore: GPTQ / AWQ linears kept packed on the GPU (int4 / int8
// weights, engine/quant/packed_linear.h layout) and the linear() on them —
// weight-only quantization as vLLM's gptq / awq methods: the activations
// stay in the compute dtype (fp16 / bf16), fp32 accumulation.
//
// A packed linear [N, K] is an I32 tensor [N, K * bits / 32] (its rows are
// the output features; a fused q/k/v or gate/up weight is loaded part by
// part into row ranges), with fp32 scales [N, G] and uint8 zeros [N, G]
// beside it, and per part (a run of rows loaded from one checkpoint linear)
// the act-order permutation and the group of each 16-byte chunk of a row.
// Adjacent parts with the same permutation and chunk groups merge (every
// non-act-order fused weight is one part).
//
// 4-bit linears with N % 16 == 0 and K % 64 == 0 (and groups the decode
// kernel's shared memory holds: qmma_fits) keep their codes in the
// tensor-core layout (packed_linear.h, tile_int4); others (8-bit) in rows
// (also 4-bit ones when the environment has PAGODA_INT4_LAYOUT=rows, a
// benchmark switch).
// linear(x [M, K], w, bias, out [M, N]):
//  * decode batches (M <= 64 tiled, M <= 8 in rows): the codes are
//    dequantized in registers — into mma.m16n8k16 fragments (qmv_kernel,
//    gpu/quant_decode.cu, for M <= 8; qmma_kernel for 9..64, and for all
//    M <= 8 too with PAGODA_INT4_DECODE=qmma, a benchmark switch) or as fp32
//    (qgemv_kernel) — and never written out; act-order parts first gather
//    x's columns into the permuted order.
//  * larger M: each part is dequantized into a [N, K] compute-dtype scratch
//    (original input order; coalesced 16-byte stores from the tensor-core
//    layout, scattered ones with act-order) and cuBLASLt runs the GEMM. This
//    adds a write and a read of the weight in the compute dtype to a bf16
//    model's GEMM; an int4 GEMM on the codes that keeps up with cuBLASLt is
//    the next step (docs/PERFORMANCE.md).
// Both paths use only buffers sized at alloc (no allocation in a step, so
// CUDA graphs capture them).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/quant/packed_linear.h"
#include "engine/quant/quant_config.h"

namespace pagoda::cuda {

class LtGemm;

class QuantLinearStore {
 public:
  QuantLinearStore(DType act, cudaStream_t stream, LtGemm& gemm)
      : act_(act), stream_(stream), gemm_(gemm) {}
  ~QuantLinearStore();
  QuantLinearStore(const QuantLinearStore&) = delete;
  QuantLinearStore& operator=(const QuantLinearStore&) = delete;

  // True when linears of `qc` with K input features can be kept packed
  // with compute dtype `act` (F16 / BF16; packable(qc, K)).
  static bool supports(const QuantConfig& qc, int64_t in_features, DType act);
  // A packed linear of N outputs, K inputs: the I32 tensor [N, K*bits/32]
  // (zeroed), scales and zeros allocated beside it. Throws
  // std::invalid_argument when !supports, std::runtime_error when out of
  // device memory.
  Tensor alloc(int64_t out_features, int64_t in_features, const QuantConfig& qc);
  // Frees t when it is one of this store's packed linears (returns false,
  // doing nothing, otherwise).
  bool release(Tensor& t);
  // True when t is (a row range of) one of this store's packed linears.
  bool owns(const Tensor& t) const;
  // Repacks w (pack_linear) into dst, a row range of a packed linear with
  // w's shape. Throws std::invalid_argument on a shape or group mismatch or
  // a weight pack_linear refuses.
  void load(const Tensor& dst, const QuantizedWeight& w);
  // Dummy weights (benchmarks) for w, a row range of a packed linear: codes
  // from a hash of (seed, index), scales giving weights of standard
  // deviation ~0.02, zero points 2^(bits-1).
  void fill_dummy(const Tensor& w, uint64_t seed);
  // Device bytes of a packed linear (or row range): codes, scales, zeros.
  size_t bytes(const Tensor& w) const;
  // out [M, N] (act dtype or F32) = x [M, K] (act dtype) · Wᵀ (+ bias [N],
  // act dtype, may be null); w must be a whole packed linear.
  void linear(const Tensor& x, const Tensor& w, const void* bias, Tensor& out);

 private:
  struct Part {
    int64_t row_begin = 0, rows = 0;
    std::vector<int32_t> perm, chunk_group;  // host copies (merging)
    int32_t* d_perm = nullptr;               // [K] or null
    int32_t* d_chunk_group = nullptr;        // [K / chunk]
    bool regular = false;  // chunk_group[c] == c * chunk / group_size (no lookup needed)
  };
  struct Entry {
    int bits = 0;
    bool tiled = false;  // 4-bit codes in the tensor-core layout (tile_int4)
    // Rows of x the register kernels take (more: dequantize + cuBLASLt):
    // tiled, min(kMaxSmallM, qmma_max_rows) >= 32; else 8.
    int64_t small_m = 8;
    int64_t n = 0, k = 0, g = 0, group_size = 0;
    uint32_t* qweight = nullptr;
    float* scales = nullptr;
    uint8_t* zeros = nullptr;
    std::vector<Part> parts;  // by row_begin, disjoint
    int64_t words() const { return k * bits / 32; }
  };
  // The entry holding t's data and t's first row in it (nullptr: none).
  Entry* find(const Tensor& t, int64_t* row);
  const Entry* find(const Tensor& t, int64_t* row) const;
  void add_part(Entry& e, Part p);
  void free_entry(Entry& e);

  DType act_;
  cudaStream_t stream_;
  LtGemm& gemm_;
  std::map<uintptr_t, Entry> entries_;  // by qweight address
  void* deq_ = nullptr;                 // [N, K] dequantized weight (M > 8)
  size_t deq_bytes_ = 0;
  void* xperm_ = nullptr;  // [kMaxSmallM, K] x in act-order (small batches)
  size_t xperm_bytes_ = 0;
};

}  // namespace pagoda::cuda
