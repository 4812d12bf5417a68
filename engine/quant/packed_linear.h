// PackedLinear: a GPTQ / AWQ linear (engine/quant/quantized_weight.h)
// repacked for the CUDA backend's int4 / int8 kernels (gpu/quant_linear.cu),
// built on the host at load. The layout is output-feature major, so a
// tensor-parallel or fused (q/k/v, gate/up) weight is a range of rows:
//   qweight [N, K * bits / 32] uint32: row n, word j holds the quantized
//           values of positions j * pack .. j * pack + pack - 1 of the row's
//           input order (pack = 32 / bits, lowest bits first), unsigned;
//   scales  [N, G] float (uploaded in the compute dtype);
//   zeros   [N, G] uint8, the zero point as is (GPTQ's stored zero − 1 is
//           turned back into the zero: 8 for symmetric 4-bit);
//   perm    [K] or empty: position j of the input order is input feature
//           perm[j] — with act-order (desc_act) the features sorted by group
//           (stable), so each group is a run of positions, as Marlin folds
//           act-order in (the kernels then read x[:, perm]); empty when
//           g_idx is already non-decreasing;
//   chunk_group [K / chunk]: the group of each chunk of `chunk` = 128 / bits
//           positions (one 16-byte load of a row); every position of a chunk
//           is in that group.
// The weight is W[n, perm[j]] = scales[n, g] * (q[n, j] − zeros[n, g]),
// g = chunk_group[j / chunk] — dequantize_packed computes it, the reference
// the kernels are tested against (it equals dequantize_linear exactly).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/quant/quantized_weight.h"

namespace pagoda {

struct PackedLinear {
  int bits = 0;
  int64_t out_features = 0;  // N
  int64_t in_features = 0;   // K
  int64_t num_groups = 0;    // G
  std::vector<uint32_t> qweight;
  std::vector<float> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> perm;
  std::vector<int32_t> chunk_group;

  int64_t chunk() const { return 128 / bits; }
  int64_t words_per_row() const { return in_features * bits / 32; }
};

// Input features per 16-byte load of a packed row: 32 (4-bit) or 16 (8-bit).
inline int64_t packed_chunk(int bits) { return 128 / bits; }

// True when a linear with K input features of `qc` can be packed: bits 4 or
// 8, K a multiple of the chunk and group_size (when not −1) too.
bool packable(const QuantConfig& qc, int64_t in_features);

// Repacks w. Throws std::invalid_argument naming the module when it is not
// packable (see packable) or when an act-order group's positions do not
// fill whole chunks (every real GPTQ checkpoint's groups have group_size
// members).
PackedLinear pack_linear(const QuantizedWeight& w);

// The float weight [N, K] (nn.Linear layout, original input order) of p.
void dequantize_packed(const PackedLinear& p, float* out);

// The tensor-core layout of 4-bit codes (gpu/quant_linear.cu's
// qmma_kernel): the A operand of mma.m16n8k16 (16 output features × 16
// input positions per tile, NVIDIA PTX ISA "Matrix Fragments for
// mma.m16n8k16") held one 32-bit word per lane. Lane t's word of a tile
// holds a0..a7 of the fragment: a0, a1 = rows t/4, columns 2(t%4) + {0,1};
// a2, a3 = row t/4 + 8, same columns; a4..a7 = the same at columns + 8.
// A tile's columns are not consecutive positions: each 32-position chunk
// (two tiles, one group) gives lane quad q = t%4 its positions 8q .. 8q + 7,
// 8q + 4h + {0, 1, 2, 3} as columns 2q, 2q + 1, 2q + 8, 2q + 9 of tile h,
// so the kernel reads a lane's x for a chunk as one 16-byte vector (the
// mma sums over a tile's columns, so any order that A and B share holds).
// Code a_{2p} sits in nibble p and a_{2p+1} in nibble p + 4, so one LOP3
// with 0x000F000F (after a shift by 4p) yields the pair as two half
// values. Words are ordered [row tile][position tile / 4][lane][position
// tile % 4], so a lane's 16-byte load covers four consecutive position
// tiles, and row tile r starts where row 16r starts in qweight: the same
// size, and the same offsets for row ranges that are multiples of 16.
// Needs bits 4, N % 16 == 0, K % 64 == 0 (std::invalid_argument otherwise).
bool tileable(int bits, int64_t out_features, int64_t in_features);
std::vector<uint32_t> tile_int4(const PackedLinear& p);
// The code at (row n, position j) of a tiled word array (tests).
uint32_t tiled_code(const std::vector<uint32_t>& tiled, int64_t K, int64_t n, int64_t j);

}  // namespace pagoda
