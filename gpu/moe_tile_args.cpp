#include "gpu/moe_tile_args.h"

#include <climits>

namespace pagoda::cuda {

std::optional<MoeTileArgs> moe_tile_args(const void* a, int64_t a_div, const void* w, void* out,
                                         const int32_t* sorted_ids, const int32_t* tile_expert,
                                         const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                         int64_t num_slots, int64_t N, int64_t K) {
  // max_tiles * tile_rows <= INT_MAX, as a division: max_tiles is not yet
  // bounded, so the product could overflow.
  if (tile_rows < 1 || N < 1 || K < 1 || N > INT_MAX || K > INT_MAX || a_div < 1 ||
      a_div > INT_MAX || num_slots < 0 || max_tiles < 0 || max_tiles > INT_MAX / tile_rows ||
      num_slots > max_tiles * tile_rows)
    return std::nullopt;
  MoeTileArgs g;
  g.a = a;
  g.w = w;
  g.out = out;
  g.sorted_ids = sorted_ids;
  g.tile_expert = tile_expert;
  g.num_tiles = num_tiles;
  g.tile_rows = tile_rows;
  g.a_div = static_cast<int>(a_div);
  g.num_slots = static_cast<int>(num_slots);
  g.N = static_cast<int>(N);
  g.K = static_cast<int>(K);
  return g;
}

}  // namespace pagoda::cuda
