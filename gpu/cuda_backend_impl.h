// CudaBackend: the Backend of gpu/cuda_backend.h (internal header, also used
// by the GPU benchmarks to reach the stream). One device, one stream; all ops
// are asynchronous on that stream.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include "engine/model/backend.h"
#include "gpu/gemm.h"
#include "gpu/quant_linear.h"

namespace pagoda::cuda {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device_index, DType act_dtype);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return name_; }
  DType act_dtype() const override { return act_; }

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  void free(Tensor& t) override;
  size_t free_memory_bytes() const override;
  size_t total_memory_bytes() const override;
  void copy_from_host(Tensor& dst, const void* src, DType src_dtype) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void fill_zero(Tensor& t) override;
  void synchronize() override;
  const DeviceBatch& upload_batch(const ForwardBatch& batch) override;
  // Swap space (gpu/cuda_swap.cpp): pinned host memory (cudaHostAlloc) and
  // one cudaMemcpyAsync per run of consecutive blocks, layer and K/V, on
  // the stream.
  HostKVCache alloc_host_kv_cache(int64_t num_layers, int64_t num_blocks,
                                  size_t block_bytes) override;
  void free_host_kv_cache(HostKVCache& host) override;
  void swap_out(std::span<const LayerKVCache> device, const HostKVCache& host,
                std::span<const BlockSwap> pairs) override;
  void swap_in(std::span<const LayerKVCache> device, const HostKVCache& host,
               std::span<const BlockSwap> pairs) override;
  void copy_blocks(std::span<const LayerKVCache> caches,
                   std::span<const BlockCopy> copies) override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps,
                    Tensor& out) override;
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override;
  void rope_and_cache(const Tensor& qkv, const RopeTable& rope, const DeviceBatch& batch,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, Tensor& q_out,
                      LayerKVCache& cache) override;
  void attention(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                 int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                 Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override;
  // Every optional op (BackendOp).
  bool implements(BackendOp /*op*/) const override { return true; }
  // Sliding window, soft-capping and ALiBi in the decode kernel and both
  // prefill kernels (gpu/attention_*.cu); attention() is this with no options.
  void attention_ext(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                     const AttentionOptions& opts, Tensor& out) override;
  void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, int64_t num_heads,
                     int64_t num_kv_heads, int64_t head_dim, float eps) override;
  // The element-wise and norm ops of the wider family (gpu/cuda_backend_ext.cpp,
  // kernels in gpu/elementwise_ext.cu). softcap and scale take F32 or the
  // activation dtype (logits are F32); the others the activation dtype.
  void gated_act(const Tensor& gate_up, GatedActivation act, Tensor& out) override;
  void softcap(Tensor& x, float cap) override;
  void scale(Tensor& x, float s) override;
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                  Tensor& out) override;
  void add_layer_norm(const Tensor& x, Tensor& residual, const Tensor& w, const Tensor& b,
                      float eps, Tensor& out) override;
  void add(const Tensor& x, Tensor& y) override;
  void activation(const Tensor& x, Activation act, Tensor& out) override;
  // The mixture-of-experts MLP on the device (gpu/cuda_moe.cpp, kernels in
  // gpu/moe.cu after vLLM's fused_moe): fp32 router logits (cuBLASLt), a
  // top-k softmax kernel, an align kernel sorting the T*k token slots by
  // expert into tiles, a grouped GEMM per projection (tensor cores for
  // bf16/f16) and a combine kernel; no host round trip, so it can be
  // captured in a CUDA graph. All tensors in the activation dtype; throws
  // std::invalid_argument on the CPU backend's shape errors, more than
  // kMoeMaxExperts (1024) experts, or out aliasing x, and std::logic_error
  // when its scratch would have to grow inside a stream capture (see
  // cuda_moe.cpp for how the scratch is sized before any capture).
  void moe(const Tensor& x, const MoeWeights& w, const MoeOptions& opts, Tensor& out) override;
  // For tests: the routing of the last moe() call, topk_ids [T, top_k] I32
  // (descending probability), a view of the scratch valid until the next
  // moe() call on this backend.
  Tensor moe_topk_ids() const { return moe_last_ids_; }
  void fill_normal(Tensor& t, float mean, float std, uint64_t seed) override;
  // GPTQ / AWQ linears kept packed (gpu/quant_linear.h) with F16 / BF16
  // activations; F32 runs dequantize at load (Backend's default).
  bool keeps_quantized(const QuantConfig& qc, int64_t in_features) const override;
  Tensor alloc_quantized_linear(int64_t out_features, int64_t in_features,
                                const QuantConfig& qc) override;
  void load_quantized_linear(Tensor& dst, const QuantizedWeight& w) override;
  void fill_quantized_dummy(Tensor& w, uint64_t seed) override;
  size_t weight_bytes(const Tensor& w) const override;
  std::string quantized_linear_path() const override;

  cudaStream_t stream() const { return stream_; }

  // Grows the batch-metadata buffers once to hold any step of up to
  // max_tokens tokens, max_seqs sequences, max_blocks_per_seq block-table
  // columns and max_logits logits rows, and the Flash-Decoding workspace for
  // max_seqs decode rows of num_heads x head_dim over max_context_len, so
  // that no later step moves a pointer a captured CUDA graph holds; moe()
  // sizes its scratch for max_tokens from then on (cuda_moe.cpp).
  void reserve(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq, int64_t max_logits,
               int num_heads, int head_dim, int64_t max_context_len);
  // Counts reallocations of the buffers above (a captured graph is valid
  // only while this stays what it was at capture).
  uint64_t buffer_generation() const { return buffer_generation_; }
  // Stream capture of the ops issued between the two calls into a graph
  // (cudaStreamCaptureModeThreadLocal); end_capture instantiates it.
  void begin_capture();
  cudaGraphExec_t end_capture();
  void launch_graph(cudaGraphExec_t exec);
  LtGemm& gemm() { return *gemm_; }

 private:
  void* raw_alloc(size_t bytes, const char* what);
  void raw_free(void* p);
  // Grows a scratch buffer to at least `bytes` (waits for the stream first).
  void ensure_scratch(void*& buf, size_t& cap, size_t bytes, const char* what);
  void check_act(const Tensor& t, const char* op, const char* arg) const;
  void swap(std::span<const LayerKVCache> device, const HostKVCache& host,
            std::span<const BlockSwap> pairs, bool to_host);
  std::unordered_set<void*> host_kv_;  // pinned swap spaces not yet freed

  int device_ = 0;
  DType act_;
  std::string name_;
  size_t total_mem_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<LtGemm> gemm_;
  std::unique_ptr<QuantLinearStore> quant_;  // packed quantized linears
  std::unordered_set<void*> live_;

  void* staging_ = nullptr;  // dtype conversions on copy
  size_t staging_cap_ = 0;
  void* attn_ws_ = nullptr;  // Flash-Decoding partials
  size_t attn_ws_cap_ = 0;
  void* copy_args_ = nullptr;  // copy_blocks' cache bases and pairs
  size_t copy_args_cap_ = 0;
  void* moe_ws_ = nullptr;  // moe()'s intermediates (cuda_moe.cpp)
  size_t moe_ws_cap_ = 0;
  int64_t moe_reserve_tokens_ = 0;  // the largest step reserve() announced
  Tensor moe_last_ids_;

  // upload_batch: pinned host staging and one device buffer, fixed segment
  // offsets per capacity so the pointers stay put once capacities suffice.
  int32_t* batch_host_ = nullptr;
  int32_t* batch_dev_ = nullptr;
  int64_t cap_tokens_ = 0, cap_seqs_ = 0, cap_table_ = 0, cap_logits_ = 0;
  cudaEvent_t upload_done_ = nullptr;
  DeviceBatch dbatch_;
  uint64_t buffer_generation_ = 0;
  int64_t batch_max_position_ = -1;  // host-side maxima for validation
  int64_t batch_max_slot_ = -1;
  int64_t batch_max_block_ = -1;
};

}  // namespace pagoda::cuda
