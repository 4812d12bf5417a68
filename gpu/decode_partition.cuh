// The end of a decode-attention partition (attention_decode.cu and
// attention_decode_mma.cu): element d of query head `head`'s normalised
// output `val` goes straight to a.out when the sequence has one partition
// (own_splits == 1, so the result never depends on nsplits), else to the
// partition workspace (row (seq * num_heads + head) * nsplits + split of
// ws_out [rows, D]) with the partition's log2-domain max m and sum l
// (written once, by d == 0) for decode_combine_kernel.
#pragma once
#include <cstdint>

#include "gpu/dtype_util.cuh"
#include "gpu/kernels.h"

namespace pagoda::cuda {

template <typename T, int D>
__device__ __forceinline__ void store_partition(const AttentionArgs& a, int64_t tok, int seq, int head,
                                                int split, int nsplits, int own_splits, int d, float val,
                                                float m, float l, float* __restrict__ ws_out,
                                                float* __restrict__ ws_max, float* __restrict__ ws_sum) {
  if (own_splits == 1) {
    T* o = static_cast<T*>(a.out) + (tok * a.num_heads + head) * static_cast<int64_t>(D);
    o[d] = from_f32<T>(val);
    return;
  }
  const int64_t row = (static_cast<int64_t>(seq) * a.num_heads + head) * nsplits + split;
  ws_out[row * D + d] = val;
  if (d == 0) {
    ws_max[row] = m;
    ws_sum[row] = l;
  }
}

}  // namespace pagoda::cuda
