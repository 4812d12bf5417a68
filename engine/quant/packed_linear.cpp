// Repacking GPTQ / AWQ linears for the CUDA kernels (packed_linear.h).
#include "engine/quant/packed_linear.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace pagoda {
namespace {

// AWQ's packing order: nibble j holds column order[j]; kAwqShift[c] is the
// nibble holding column c (as quantized_weight.cpp).
constexpr int kAwqShift[8] = {0, 4, 1, 5, 2, 6, 3, 7};

[[noreturn]] void fail(const QuantizedWeight& w, const std::string& what) {
  throw std::invalid_argument("quantized linear '" + w.module + "': " + what);
}

}  // namespace

bool packable(const QuantConfig& qc, int64_t in_features) {
  if (qc.bits != 4 && qc.bits != 8) return false;
  const int64_t c = packed_chunk(qc.bits);
  return in_features > 0 && in_features % c == 0 && (qc.group_size == -1 || qc.group_size % c == 0);
}

PackedLinear pack_linear(const QuantizedWeight& w) {
  const int64_t N = w.out_features, K = w.in_features, G = w.num_groups;
  if (w.bits != 4 && w.bits != 8) fail(w, std::to_string(w.bits) + "-bit values cannot be packed");
  const int64_t chunk = packed_chunk(w.bits);
  if (K % chunk != 0)
    fail(w,
         "input features " + std::to_string(K) + " are not a multiple of " + std::to_string(chunk));
  if (G <= 0 || G > 255 * 255 || static_cast<int64_t>(w.g_idx.size()) != K)
    fail(w, "bad group count or g_idx");
  PackedLinear p;
  p.bits = w.bits;
  p.out_features = N;
  p.in_features = K;
  p.num_groups = G;
  // The input order: features sorted by group when g_idx is not already
  // non-decreasing (act-order).
  if (!std::is_sorted(w.g_idx.begin(), w.g_idx.end())) {
    p.perm.resize(static_cast<size_t>(K));
    std::iota(p.perm.begin(), p.perm.end(), 0);
    std::stable_sort(p.perm.begin(), p.perm.end(), [&](int32_t a, int32_t b) {
      return w.g_idx[static_cast<size_t>(a)] < w.g_idx[static_cast<size_t>(b)];
    });
  }
  auto feature = [&](int64_t j) { return p.perm.empty() ? j : p.perm[static_cast<size_t>(j)]; };
  p.chunk_group.resize(static_cast<size_t>(K / chunk));
  for (int64_t c = 0; c < K / chunk; ++c) {
    const int32_t g = w.g_idx[static_cast<size_t>(feature(c * chunk))];
    for (int64_t j = c * chunk; j < (c + 1) * chunk; ++j)
      if (w.g_idx[static_cast<size_t>(feature(j))] != g)
        fail(w, "a group's input features do not fill whole chunks of " + std::to_string(chunk) +
                    " (group sizes must be multiples of " + std::to_string(chunk) + ")");
    p.chunk_group[static_cast<size_t>(c)] = g;
  }
  const int64_t pack = 32 / w.bits, words = K / pack;
  const uint32_t mask = (1u << w.bits) - 1u;
  const bool gptq = w.method == QuantMethod::GPTQ;
  const int64_t src_pack = w.pack_factor();
  auto q_at = [&](int64_t k, int64_t n) -> uint32_t {
    if (gptq)
      return (static_cast<uint32_t>(w.qweight[static_cast<size_t>((k / src_pack) * N + n)]) >>
              (w.bits * static_cast<int>(k % src_pack))) &
             mask;
    return (static_cast<uint32_t>(w.qweight[static_cast<size_t>(k * (N / 8) + n / 8)]) >>
            (4 * kAwqShift[n % 8])) &
           mask;
  };
  auto z_at = [&](int64_t g, int64_t n) -> uint32_t {
    const int32_t* zr = w.qzeros.data() + g * (N / src_pack);
    if (gptq)
      return ((static_cast<uint32_t>(zr[n / src_pack]) >>
               (w.bits * static_cast<int>(n % src_pack))) &
              mask) +
             1u;
    return (static_cast<uint32_t>(zr[n / 8]) >> (4 * kAwqShift[n % 8])) & mask;
  };
  p.qweight.assign(static_cast<size_t>(N * words), 0u);
  for (int64_t j = 0; j < K; ++j) {
    const int64_t k = feature(j);
    for (int64_t n = 0; n < N; ++n)
      p.qweight[static_cast<size_t>(n * words + j / pack)] |=
          q_at(k, n) << (w.bits * static_cast<int>(j % pack));
  }
  p.scales.resize(static_cast<size_t>(N * G));
  p.zeros.resize(static_cast<size_t>(N * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < N; ++n) {
      p.scales[static_cast<size_t>(n * G + g)] = w.scales[static_cast<size_t>(g * N + n)];
      const uint32_t z = z_at(g, n);
      if (z > 255) fail(w, "zero point " + std::to_string(z) + " does not fit 8 bits");
      p.zeros[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(z);
    }
  return p;
}

void dequantize_packed(const PackedLinear& p, float* out) {
  const int64_t N = p.out_features, K = p.in_features, G = p.num_groups;
  const int64_t pack = 32 / p.bits, words = p.words_per_row(), chunk = p.chunk();
  const uint32_t mask = (1u << p.bits) - 1u;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t g = p.chunk_group[static_cast<size_t>(j / chunk)];
      const uint32_t q = (p.qweight[static_cast<size_t>(n * words + j / pack)] >>
                          (p.bits * static_cast<int>(j % pack))) &
                         mask;
      const int64_t k = p.perm.empty() ? j : p.perm[static_cast<size_t>(j)];
      out[n * K + k] =
          p.scales[static_cast<size_t>(n * G + g)] *
          static_cast<float>(static_cast<int32_t>(q) -
                             static_cast<int32_t>(p.zeros[static_cast<size_t>(n * G + g)]));
    }
}

namespace {

// Where (row n, position j) lives in the tiled layout: word index and nibble.
std::pair<int64_t, int> tiled_at(int64_t K, int64_t n, int64_t j) {
  // Position j is column c of position tile kt (a 32-position chunk is
  // two tiles): the four lanes of a row pair take 8 consecutive positions
  // of a chunk each, 4 in each of its two tiles (columns 2q, 2q + 1,
  // 2q + 8, 2q + 9 for lane quad q), so a lane reads its x as one 16-byte
  // vector per chunk.
  const int64_t rt = n / 16, r = n % 16, o = j % 32, q = o / 8, f = o % 4;
  const int64_t kt = (j / 32) * 2 + (o % 8) / 4, c = 2 * q + 8 * (f / 2) + f % 2;
  // Fragment: lane t = 4 * (r % 8) + (c % 8) / 2; register p = (r >= 8) + 2 * (c >= 8); half = c
  // % 2.
  const int64_t lane = 4 * (r % 8) + (c % 8) / 2;
  const int p = static_cast<int>((r >= 8 ? 1 : 0) + (c >= 8 ? 2 : 0));
  const int nibble = p + (c % 2 == 1 ? 4 : 0);
  const int64_t word = ((rt * (K / 64) + kt / 4) * 32 + lane) * 4 + kt % 4;
  return {word, nibble};
}

}  // namespace

bool tileable(int bits, int64_t out_features, int64_t in_features) {
  return bits == 4 && out_features % 16 == 0 && in_features % 64 == 0 && out_features > 0 &&
         in_features > 0;
}

std::vector<uint32_t> tile_int4(const PackedLinear& p) {
  const int64_t N = p.out_features, K = p.in_features;
  if (!tileable(p.bits, N, K))
    throw std::invalid_argument(
        "tile_int4: needs 4-bit codes, rows % 16 == 0 and inputs % 64 == 0, got " +
        std::to_string(p.bits) + "-bit [" + std::to_string(N) + ", " + std::to_string(K) + "]");
  const int64_t words = p.words_per_row();
  std::vector<uint32_t> out(p.qweight.size(), 0u);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < K; ++j) {
      const uint32_t q = (p.qweight[static_cast<size_t>(n * words + j / 8)] >> (4 * (j % 8))) & 15u;
      const auto [w, nib] = tiled_at(K, n, j);
      out[static_cast<size_t>(w)] |= q << (4 * nib);
    }
  return out;
}

uint32_t tiled_code(const std::vector<uint32_t>& tiled, int64_t K, int64_t n, int64_t j) {
  const auto [w, nib] = tiled_at(K, n, j);
  return (tiled.at(static_cast<size_t>(w)) >> (4 * nib)) & 15u;
}

}  // namespace pagoda
