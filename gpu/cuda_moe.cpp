// CudaBackend::moe: the mixture-of-experts MLP on the device (kernels in
// gpu/moe.cu, launchers gpu/moe_kernels.h; the design of vLLM's fused_moe).
// Shape checks are the CPU backend's (engine/cpu/cpu_backend.cpp).
//
// Scratch memory, and why a captured CUDA graph never holds a stale pointer:
// the op's intermediates (router logits, routing, sorted slots, the experts'
// gate_up / activation / down rows, the shared expert's rows) live in one
// backend-owned buffer laid out for `tokens` = max(T, moe_reserve_tokens_)
// tokens, moe_reserve_tokens_ being the largest step reserve() was told of.
//  * The executor's profile run (engine/model/model_executor.cpp,
//    profile_run) is a forward of max_num_batched_tokens tokens (fewer only
//    when max_num_seqs sequences of max_model_len hold fewer) before any
//    capture: its moe() grows the buffer to the largest step, and the memory
//    profile counts it outside the KV cache.
//  * DecodeGraphs::capture (gpu/cuda_graphs.cpp) calls reserve() with
//    max_num_batched_tokens before its eager warm-up forwards, so even
//    without a profile run (num_gpu_blocks_override) the buffer reaches its
//    final size, and its final layout, before the first graph is captured;
//    no later step (at most max_num_batched_tokens tokens) grows it.
//  * Growing goes through ensure_scratch, which bumps buffer_generation():
//    should it ever happen after a capture, DecodeGraphs stops replaying the
//    graphs that hold the old pointers (padded_size / replay check it).
//  * Inside a capture the buffer is never grown (that needs a synchronize
//    and a free): moe() throws std::logic_error instead.
// The layout depends only on (tokens, the layer's shapes), so every layer
// of a model, and every replay of a graph, sees the same addresses.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels.h"
#include "gpu/moe_kernels.h"

namespace pagoda::cuda {
namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw std::invalid_argument("cuda backend: moe: " + msg);
}

// Byte offsets of the scratch regions (each 256-byte aligned).
struct MoeLayout {
  size_t logits = 0, ids = 0, weights = 0, sorted = 0, tile_expert = 0, num_tiles = 0, counts = 0;
  size_t big = 0;  // gate_up rows [T*k, 2I], then down rows [T*k, H]; shared gate_up [T, 2Is]
  size_t mid = 0;  // activations [T*k, I]; shared [T, Is]
  size_t shared_out = 0;  // shared expert's output [T, H]
  size_t total = 0;
};

MoeLayout moe_layout(int64_t tokens, int64_t E, int64_t k, int64_t H, int64_t I, int64_t Is,
                     size_t es) {
  MoeLayout l;
  size_t off = 0;
  auto take = [&off](int64_t bytes) {
    const size_t o = off;
    off += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return o;
  };
  const int64_t slots = tokens * k;
  const int64_t tiles = std::max(moe_max_tiles(slots, E, 16), moe_max_tiles(slots, E, 64));
  const int64_t sorted =
      std::max(moe_max_tiles(slots, E, 16) * 16, moe_max_tiles(slots, E, 64) * 64);
  const auto esz = static_cast<int64_t>(es);
  l.logits = take(tokens * E * 4);
  l.ids = take(slots * 4);
  l.weights = take(slots * 4);
  l.sorted = take(sorted * 4);
  l.tile_expert = take(tiles * 4);
  l.num_tiles = take(4);
  l.counts = take(moe_align_scratch_ints(E) * 4);
  l.big = take(std::max(slots * std::max(2 * I, H), tokens * 2 * Is) * esz);
  l.mid = take(std::max(slots * I, tokens * Is) * esz);
  l.shared_out = take(Is > 0 ? tokens * H * esz : 0);
  l.total = off;
  return l;
}

}  // namespace

void CudaBackend::moe(const Tensor& x, const MoeWeights& w, const MoeOptions& opts, Tensor& out) {
  const char* op = "moe";
  check_act(x, op, "x");
  check_act(out, op, "out");
  check_act(w.router, op, "router");
  check_act(w.gate_up, op, "gate_up");
  check_act(w.down, op, "down");
  const int64_t T = x.rows(), H = x.cols(), E = w.router.rows();
  if (x.ndim != 2 || out.ndim != 2 || out.rows() != T || out.cols() != H)
    bad("x " + x.shape_str() + " and out " + out.shape_str() + " must be [T, H] alike");
  if (w.router.ndim != 2 || w.router.cols() != H)
    bad("router " + w.router.shape_str() + " for hidden " + std::to_string(H));
  if (w.gate_up.ndim != 3 || w.gate_up.dim(0) != E || w.gate_up.dim(2) != H ||
      w.gate_up.dim(1) % 2 != 0 || w.gate_up.dim(1) == 0)
    bad("gate_up " + w.gate_up.shape_str() + " for " + std::to_string(E) + " experts of hidden " +
        std::to_string(H));
  const int64_t I = w.gate_up.dim(1) / 2;
  if (w.down.ndim != 3 || w.down.dim(0) != E || w.down.dim(1) != H || w.down.dim(2) != I)
    bad("down " + w.down.shape_str() + " does not match gate_up " + w.gate_up.shape_str());
  if (opts.top_k < 1 || opts.top_k > E)
    bad("top_k " + std::to_string(opts.top_k) + " of " + std::to_string(E) + " experts");
  if (E > kMoeMaxExperts)
    bad(std::to_string(E) + " experts (the kernels take at most " + std::to_string(kMoeMaxExperts) +
        ")");
  const bool shared = !w.shared_gate_up.empty();
  int64_t Is = 0;
  if (shared) {
    check_act(w.shared_gate_up, op, "shared_gate_up");
    check_act(w.shared_down, op, "shared_down");
    check_act(w.shared_gate, op, "shared_gate");
    Is = w.shared_gate_up.rows() / 2;
    if (w.shared_gate_up.ndim != 2 || w.shared_gate_up.cols() != H || Is == 0 ||
        w.shared_gate_up.rows() != 2 * Is)
      bad("shared_gate_up " + w.shared_gate_up.shape_str() + " for hidden " + std::to_string(H));
    if (w.shared_down.ndim != 2 || w.shared_down.rows() != H || w.shared_down.cols() != Is)
      bad("shared_down " + w.shared_down.shape_str() + " does not match shared_gate_up " +
          w.shared_gate_up.shape_str());
    if (w.shared_gate.numel() != H) bad("shared_gate " + w.shared_gate.shape_str());
  }
  if (out.data == x.data) bad("out must not alias x");
  if (T == 0) return;
  const int64_t k = opts.top_k, slots = T * k;

  const MoeLayout l =
      moe_layout(std::max(T, moe_reserve_tokens_), E, k, H, I, Is, dtype_size(act_));
  if (l.total > moe_ws_cap_) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    PAGODA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &st));
    if (st != cudaStreamCaptureStatusNone)
      throw std::logic_error(
          "cuda backend: moe: the scratch for " + std::to_string(T) +
          " tokens was not reserved before this CUDA graph capture (run the op, or reserve() the "
          "step size, eagerly first)");
    ensure_scratch(moe_ws_, moe_ws_cap_, l.total, "moe scratch");
  }
  char* ws = static_cast<char*>(moe_ws_);
  auto* logits = reinterpret_cast<float*>(ws + l.logits);
  auto* ids = reinterpret_cast<int32_t*>(ws + l.ids);
  auto* weights = reinterpret_cast<float*>(ws + l.weights);
  auto* sorted = reinterpret_cast<int32_t*>(ws + l.sorted);
  auto* tile_expert = reinterpret_cast<int32_t*>(ws + l.tile_expert);
  auto* num_tiles = reinterpret_cast<int32_t*>(ws + l.num_tiles);
  auto* counts = reinterpret_cast<int32_t*>(ws + l.counts);
  void* big = ws + l.big;
  void* mid = ws + l.mid;
  void* shared_out = ws + l.shared_out;

  // Qwen2-MoE's shared expert: the dense SwiGLU MLP (its sigmoid gate is
  // applied in the combine kernel).
  if (shared) {
    gemm_->run(act_, act_, x.data, w.shared_gate_up.data, nullptr, act_, big, T, 2 * Is, H);
    launch_silu_mul(act_, big, mid, T, Is, stream_);
    gemm_->run(act_, act_, mid, w.shared_down.data, nullptr, act_, shared_out, T, H, Is);
  }
  // Routing: fp32 logits, top-k softmax, slots sorted by expert.
  gemm_->run(act_, DType::F32, x.data, w.router.data, nullptr, act_, logits, T, E, H);
  launch_moe_topk_softmax(logits, T, E, k, opts.renormalize, ids, weights, stream_);
  const int tile_rows = moe_tile_rows(T, E, k);
  const int64_t max_tiles = moe_max_tiles(slots, E, tile_rows);
  launch_moe_align(ids, slots, E, tile_rows, max_tiles, sorted, tile_expert, num_tiles, counts,
                   stream_);
  // The experts: gate_up over x's rows (slot / k), silu(gate) * up, down.
  // Decode-sized batches on the expert-indexed GEMV (an expert's tile holds
  // at most T slots), the rest, and what it declines, on the grouped GEMM.
  const bool gemv = moe_use_gemv(T);
  auto experts = [&](const void* a, int64_t a_div, const void* wt, int64_t N, int64_t K) {
    if (gemv && launch_moe_gemv(act_, a, a_div, wt, big, sorted, tile_expert, num_tiles, max_tiles,
                                tile_rows, slots, T, N, K, stream_))
      return;
    launch_moe_gemm(act_, a, a_div, wt, big, sorted, tile_expert, num_tiles, max_tiles, tile_rows,
                    slots, N, K, stream_);
  };
  experts(x.data, k, w.gate_up.data, 2 * I, H);
  launch_silu_mul(act_, big, mid, slots, I, stream_);
  experts(mid, 1, w.down.data, H, I);
  launch_moe_combine(act_, big, weights, k, shared ? shared_out : nullptr, x.data,
                     shared ? w.shared_gate.data : nullptr, out.data, T, H, stream_);
  moe_last_ids_ = Tensor(ids, DType::I32, Device::CUDA, {T, k});
}

}  // namespace pagoda::cuda
