// The CUDA backend: Backend ops as CUDA kernels of our own plus cuBLASLt
// GEMMs (bf16/fp16 in, fp32 accumulate), on one non-blocking stream of one
// device. Only built when a CUDA toolkit is found (PAGODA_HAVE_CUDA).
//
// Kernels (gpu/*.cu; each file cites its algorithm):
//  * embedding, RMSNorm and fused residual-add + RMSNorm, silu_mul,
//    gather_rows: fp32 math, act dtype I/O (elementwise.cu);
//  * rope_and_cache: rotate-half RoPE of q and k from RopeTable::cos_sin
//    plus the k/v write at slot_mapping (slots < 0 skipped; rope_cache.cu);
//  * attention: pure-decode batches use Flash-Decoding over 64..512-token
//    partitions (chosen from the batch size, see decode_partition_for) with
//    GQA groups sharing K/V loads (attention_decode.cu);
//    any other batch (prefill, chunked prefill, mixed) uses the
//    FlashAttention-2-style kernel: tensor cores (mma.sync) for bf16/f16 with
//    head_dim 64/128 (attention_prefill_mma.cu), fp32 CUDA cores otherwise
//    (attention_prefill.cu). Supported head_dim: 8, 16, 32, 64, 128;
//    rotary_dim must equal head_dim. Results are bitwise reproducible.
//  * moe (Mixtral / Qwen2-MoE MLP): vLLM's fused_moe design on the device —
//    fp32 router logits, a top-k softmax kernel, an align kernel sorting the
//    token slots by expert into tiles, a grouped GEMM per projection
//    (mma.sync for bf16/f16) and a combine kernel; graph-capturable
//    (cuda_moe.cpp, moe.cu);
//  * linear: our GEMV for 1 <= T <= 8 rows in bf16/f16 (gemv.cu), cuBLASLt
//    otherwise (compute type 32F: F32 activations get true fp32, no TF32);
//    the bias is a cuBLASLt epilogue or fused in the GEMV.
//
// Memory: cudaMalloc only (no managed memory); alloc throws
// std::runtime_error naming the bytes asked for and the bytes free. Every
// CUDA/cuBLASLt call is checked and throws std::runtime_error naming the call.
// upload_batch copies the ForwardBatch with one H2D copy from pinned memory
// into one device buffer whose segments sit at offsets fixed by capacities
// (grown ×2 past the largest batch seen), so the DeviceBatch pointers stay
// put between steps and a captured CUDA graph can be replayed over them.
// fill_normal draws on the device (counter-based SplitMix64 + Box-Muller).
// Beside the backend: CUDA graphs of decode steps (gpu/cuda_graphs.h, used by
// the executor unless --enforce-eager) and sampling on the device
// (gpu/gpu_sampler.h).
#pragma once
#include <memory>

#include "engine/model/backend.h"

namespace pagoda {

// act_dtype: BF16, F16 or F32 (else std::invalid_argument). Throws
// std::runtime_error when the device cannot be opened (no driver, no GPU,
// bad index).
std::unique_ptr<Backend> make_cuda_backend(int device_index, DType act_dtype);

}  // namespace pagoda
