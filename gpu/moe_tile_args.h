// The arguments of the two kernels that run the experts' linears over the
// tiles of launch_moe_align (gpu/moe_kernels.h): the grouped GEMM
// (gpu/moe.cu) and the expert GEMV (gpu/moe_gemv.cu). One struct, passed by
// value to both kernels, and one check of the shapes both need; each
// launcher adds its own kernel's limits and names them in its message.
#pragma once
#include <cstdint>
#include <optional>

namespace pagoda::cuda {

struct MoeTileArgs {
  const void* a = nullptr;
  const void* w = nullptr;
  void* out = nullptr;
  const int32_t* sorted_ids = nullptr;
  const int32_t* tile_expert = nullptr;
  const int32_t* num_tiles = nullptr;
  int tile_rows = 16;  // the GEMV reads it; the GEMM has it as a template parameter
  int a_div = 1;
  int num_slots = 0;
  int N = 0;
  int K = 0;
};

// The filled arguments, or nullopt when a shape both kernels need is out of
// range: tile_rows >= 1, 1 <= N, K <= INT_MAX, 1 <= a_div <= INT_MAX,
// 0 <= num_slots <= max_tiles * tile_rows <= INT_MAX.
std::optional<MoeTileArgs> moe_tile_args(const void* a, int64_t a_div, const void* w, void* out,
                                         const int32_t* sorted_ids, const int32_t* tile_expert,
                                         const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                         int64_t num_slots, int64_t N, int64_t K);

}  // namespace pagoda::cuda
