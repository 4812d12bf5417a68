// QuantizedWeight: one weight-only quantized linear layer as read from a
// GPTQ or AWQ checkpoint: the unit a Backend receives
// (Backend::load_quantized_linear). The packed tensors are kept as the
// checkpoint stores them, so a backend with int4/int8 kernels can repack
// them; the default path dequantizes to float (dequantize_linear).
//
// Notation: the linear computes y = x · Wᵀ with W [N, K] (nn.Linear: N output
// features, K input features); pack = 32 / bits values per int32, lowest
// bits first; G groups of input features.
//
// GPTQ (AutoGPTQ layout, vLLM's gptq.py; the weight is W[n, k] =
// scales[g, n] * (q[k, n] - (z[g, n] + 1)) with g = g_idx[k]):
//   qweight [K / pack, N] int32: q[k, n] = qweight[k / pack, n] >> (bits * (k % pack))
//   qzeros  [G, N / pack] int32: z[g, n] = qzeros[g, n / pack] >> (bits * (n % pack)),
//           stored as zero − 1 (the AutoGPTQ v1 convention vLLM assumes)
//   scales  [G, N] float
//   g_idx   [K] int32: the group of each input feature; with desc_act a
//           permuted assignment, else k / group_size
// AWQ (AutoAWQ GEMM layout, vLLM's awq.py; W[n, k] = scales[g, n] *
// (q[k, n] − z[g, n]) with g = k / group_size):
//   qweight [K, N / 8] int32 packed along N in the order 0,2,4,6,1,3,5,7:
//           nibble j of a word holds column 8·(n / 8) + order[j]
//   qzeros  [G, N / 8] int32, same packing, zeros as is
//   scales  [G, N] float
// group_size −1 means one group (G = 1) spanning all K input features.
//
// Errors: std::runtime_error naming the file, the module and the tensor for
// a missing tensor, a wrong dtype or shape, a g_idx entry outside [0, G),
// and a tensor-parallel shard that does not align with the packing or the
// groups.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/quant/quant_config.h"

namespace pagoda {

class SafetensorsModel;

struct QuantizedWeight {
  std::string module;  // "model.layers.0.mlp.down_proj" (errors, logs)
  QuantMethod method = QuantMethod::None;
  int bits = 0;
  int64_t group_size = 0;  // the checkpoint's (−1: one group)
  bool desc_act = false;
  int64_t out_features = 0;      // N of this (possibly sharded) weight
  int64_t in_features = 0;       // K of this (possibly sharded) weight
  int64_t num_groups = 0;        // G: rows of scales / qzeros
  std::vector<int32_t> qweight;  // GPTQ [K/pack, N]; AWQ [K, N/8]
  std::vector<int32_t> qzeros;   // [G, N/pack]
  std::vector<float> scales;     // [G, N], converted exactly from the file's F16/BF16/F32
  std::vector<int32_t> g_idx;    // [K], each in [0, G) (AWQ: k / group_size, filled on read)

  int pack_factor() const { return 32 / bits; }
  // Bytes the packed form takes in the checkpoint (qweight + qzeros +
  // scales at 2 bytes + g_idx).
  size_t packed_bytes() const;
};

// Reads `module`.{qweight, qzeros, scales[, g_idx]} of a linear with the
// given full shape [N, K] from the checkpoint, checking dtypes (I32; scales
// F16/BF16/F32) and shapes against `qc`.
QuantizedWeight read_quantized_weight(const SafetensorsModel& st, const std::string& module,
                                      const QuantConfig& qc, int64_t out_features,
                                      int64_t in_features);

// The tensor-parallel shard [begin, begin + count) of the output features
// (dim 0: column-parallel, as q/k/v, gate/up) or of the input features
// (dim 1: row-parallel, as o_proj, down_proj). Column shards cut qweight /
// scales columns (GPTQ) and the packed columns of qzeros (and of AWQ's
// qweight): begin and count must be multiples of pack. Row shards cut
// GPTQ's packed qweight rows (multiples of pack) or AWQ's qweight rows, and
// g_idx; scales / qzeros groups are cut too (begin and count multiples of
// group_size) except with desc_act or group_size −1, where every rank keeps
// all groups (as vLLM does for act-order).
QuantizedWeight shard_quantized_weight(const QuantizedWeight& w, int dim, int64_t begin,
                                       int64_t count);

// W [N, K] row-major (nn.Linear layout) in float32, as the formulas above.
void dequantize_linear(const QuantizedWeight& w, float* out);

}  // namespace pagoda
