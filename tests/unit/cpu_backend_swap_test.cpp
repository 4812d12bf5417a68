// Backend::swap_out / swap_in on the CPU backend: blocks of every layer's K
// and V go to the host swap space and come back bit for bit, into other
// device blocks too, runs of consecutive blocks and single blocks alike;
// bad pairs throw.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "engine/model/backend.h"

namespace pagoda {
namespace {

constexpr int64_t kBlocks = 6, kBs = 4, kHk = 2, kD = 8, kLayers = 3;
constexpr size_t kBlockFloats = kBs * kHk * kD;

struct Caches {
  explicit Caches(Backend& be) : be(be) {
    for (int64_t l = 0; l < kLayers; ++l) {
      LayerKVCache c;
      c.k = be.alloc(DType::F32, {kBlocks, kBs, kHk, kD});
      c.v = be.alloc(DType::F32, {kBlocks, kBs, kHk, kD});
      layers.push_back(c);
    }
  }
  ~Caches() {
    for (LayerKVCache& c : layers) {
      be.free(c.k);
      be.free(c.v);
    }
  }
  float* block(int64_t l, int kv, int64_t b) {
    LayerKVCache& c = layers[static_cast<size_t>(l)];
    return (kv == 0 ? c.k.ptr<float>() : c.v.ptr<float>()) + static_cast<size_t>(b) * kBlockFloats;
  }
  Backend& be;
  std::vector<LayerKVCache> layers;
};

TEST(CpuBackendSwap, BlocksRoundTripThroughTheHostBitForBit) {
  auto be = make_cpu_backend(1);
  Caches dev(*be);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int64_t b = 0; b < kBlocks; ++b)
        std::iota(dev.block(l, kv, b), dev.block(l, kv, b) + kBlockFloats,
                  static_cast<float>(((l * 2 + kv) * kBlocks + b) * 1000));
  HostKVCache host = be->alloc_host_kv_cache(kLayers, 5, kBlockFloats * sizeof(float));
  ASSERT_NE(host.data, nullptr);
  // A run (device 1, 2, 3 -> host 0, 1, 2) and a single pair (5 -> 4).
  const std::vector<BlockSwap> out = {{1, 0}, {2, 1}, {3, 2}, {5, 4}};
  be->swap_out(dev.layers, host, out);
  std::vector<float> before(kBlockFloats);
  std::memcpy(before.data(), dev.block(2, 1, 5), sizeof(float) * kBlockFloats);
  for (int64_t l = 0; l < kLayers; ++l) {
    be->fill_zero(dev.layers[static_cast<size_t>(l)].k);
    be->fill_zero(dev.layers[static_cast<size_t>(l)].v);
  }
  // Back into other blocks: host 0, 1, 2 -> device 3, 4, 5; host 4 -> device 0.
  const std::vector<BlockSwap> in = {{3, 0}, {4, 1}, {5, 2}, {0, 4}};
  be->swap_in(dev.layers, host, in);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (size_t i = 0; i < in.size(); ++i) {
        const float* got = dev.block(l, kv, in[i].device);
        const int64_t src = out[i].device;  // the block host in[i].host was filled from
        const float first = static_cast<float>(((l * 2 + kv) * kBlocks + src) * 1000);
        for (size_t k = 0; k < kBlockFloats; ++k)
          ASSERT_EQ(got[k], first + static_cast<float>(k)) << l << " " << kv << " " << i;
      }
  EXPECT_EQ(std::memcmp(dev.block(2, 1, 0), before.data(), sizeof(float) * kBlockFloats), 0);
  EXPECT_EQ(dev.block(0, 0, 1)[3], 0.0f);  // untouched blocks stay zero
  be->free_host_kv_cache(host);
  EXPECT_EQ(host.data, nullptr);
}

TEST(CpuBackendSwap, BadPairsThrow) {
  auto be = make_cpu_backend(1);
  Caches dev(*be);
  HostKVCache host = be->alloc_host_kv_cache(kLayers, 2, kBlockFloats * sizeof(float));
  const std::vector<BlockSwap> device_out = {{kBlocks, 0}};
  EXPECT_THROW(be->swap_out(dev.layers, host, device_out), std::invalid_argument);
  const std::vector<BlockSwap> host_out = {{0, 2}};
  EXPECT_THROW(be->swap_in(dev.layers, host, host_out), std::invalid_argument);
  HostKVCache wrong = be->alloc_host_kv_cache(kLayers, 2, kBlockFloats * sizeof(float) / 2);
  const std::vector<BlockSwap> ok = {{0, 0}};
  EXPECT_THROW(be->swap_out(dev.layers, wrong, ok), std::invalid_argument);
  std::vector<LayerKVCache> fewer(dev.layers.begin(), dev.layers.begin() + 1);
  EXPECT_THROW(be->swap_out(fewer, host, ok), std::invalid_argument);
  be->free_host_kv_cache(wrong);
  be->free_host_kv_cache(host);
}

}  // namespace
}  // namespace pagoda
