// ModelExecutor: what the engine sees of the model — one forward step from a
// ForwardBatch to host logits. The real one (make_model_executor) loads the
// model onto a backend and sizes the KV cache; tests use fakes.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kv/block_swap.h"
#include "engine/model/forward_batch.h"
#include "engine/model/model_config.h"
#include "engine/request.h"
#include "engine/sample/device_sampling.h"

namespace pagoda {

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  virtual int64_t vocab_size() const = 0;
  // KV blocks available to the block manager, and tokens per block.
  virtual int64_t num_kv_blocks() const = 0;
  virtual int64_t block_size() const = 0;
  // Host KV blocks of the swap space (ExecutorOptions::swap_space_bytes);
  // 0: none, so nothing can be swapped.
  virtual int64_t num_host_kv_blocks() const { return 0; }
  // The sliding window (positions) when every attention layer has the same
  // one (Mistral: config.json sliding_window on every layer); 0 when any
  // layer attends to the whole context (and for full attention). The
  // Scheduler releases blocks wholly before it (SchedulerConfig::
  // sliding_window).
  virtual int64_t uniform_sliding_window() const { return 0; }
  // Preemption by swap (Scheduler, SchedulerOutput::swap_out / swap_in):
  // copies each pair's device block to its host block (swap_out) or back
  // (swap_in), all layers' K and V, on every rank; ordered before the next
  // execute. Throws std::logic_error for pairs where there is no swap space,
  // std::invalid_argument for ids out of range.
  virtual void swap_out(std::span<const BlockSwap> pairs) {
    if (!pairs.empty()) throw std::logic_error("ModelExecutor: no swap space");
  }
  virtual void swap_in(std::span<const BlockSwap> pairs) {
    if (!pairs.empty()) throw std::logic_error("ModelExecutor: no swap space");
  }
  // Copies each pair's device block src into block dst, all layers' K and
  // V, on every rank, ordered before the next execute (SchedulerOutput::
  // block_copies). Throws std::invalid_argument for ids out of range or
  // src == dst; std::logic_error where the executor cannot copy.
  virtual void copy_blocks(std::span<const BlockCopy> copies) {
    if (!copies.empty()) throw std::logic_error("ModelExecutor: no block copies");
  }
  // One step: fills logits with [batch.logits_indices.size(), vocab_size()]
  // row-major F32 (resized as needed).
  virtual void execute(const ForwardBatch& batch, std::vector<float>& logits) = 0;
  // Decode batch sizes captured as CUDA graphs (0: eager only, or CPU).
  virtual int64_t num_cuda_graphs() const { return 0; }
  // Steps run by replaying a captured CUDA graph since the executor was made
  // (the rest ran eagerly); 0 on the CPU. Read from the engine thread.
  virtual int64_t num_graph_replays() const { return 0; }
  // True when execute_and_sample works (the CUDA backend).
  virtual bool can_sample_on_device() const { return false; }
  // One step, then every row of `sampling` sampled on the device
  // (engine/sample/device_sampling.h: the host Sampler's features and
  // order; rows read logits row src_row < batch.logits_indices.size()):
  // out gets one TokenLogprob per sampling row, in order — the id, and the
  // logprobs the row asked for (score rows: their token's logprob and rank).
  // Only those come back to the host. Once the step's forward is enqueued
  // and before anything reads `sampling`, call sampling.prepare() (host
  // work that overlaps the forward: guided masks). Rows beyond the logits workspace
  // (prompt-logprob score rows of a long chunk) are scored a workspace of
  // logits at a time; sampling rows must lie in the first. Throws
  // std::logic_error where unsupported, std::invalid_argument on bad rows.
  virtual void execute_and_sample(const ForwardBatch& /*batch*/, const DeviceSamplingBatch& /*sampling*/,
                                  std::vector<TokenLogprob>& /*out*/) {
    throw std::logic_error("ModelExecutor: no device sampling on this backend");
  }
  virtual std::string describe() const = 0;  // "cpu fp32", "cuda bf16 (NVIDIA H200)"
};

struct ExecutorOptions {
  std::string model_dir;
  std::string device = "auto";       // "auto" | "cpu" | "cuda"
  std::string dtype = "auto";        // "auto" | "bfloat16" | "float16" | "float32"
  std::string load_format = "auto";  // "auto" | "safetensors" | "dummy"
  uint64_t seed = 0;                 // dummy weights
  int64_t block_size = 16;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_model_len = 0;          // resolved by the caller (>0)
  int64_t num_gpu_blocks_override = 0;  // >0: exactly this many KV blocks
  size_t kv_cache_memory_bytes = 0;   // CPU: KV budget (0 = 256 MiB default)
  // vLLM's --swap-space, in bytes: host memory for swapped-out KV blocks,
  // for the whole engine (its ranks' shares together); 0 = no swap space.
  size_t swap_space_bytes = 0;
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int num_threads = 0;                // CPU backend threads (0 = all cores), shared by the ranks
  // Megatron-style tensor parallelism (engine/model/llama.h): this many
  // ranks, one thread each (engine/dist/communicator.h); CPU: in-process
  // all-reduce; CUDA: one GPU per rank (devices 0..N-1) over NCCL.
  int tensor_parallel_size = 1;
  // vLLM's --quantization ("" | gptq | gptq_marlin | awq | awq_marlin):
  // checked against config.quantization (check_quantization_flag); the
  // checkpoint's quantization_config is used with or without it.
  std::string quantization;
};

// The device `device` ("auto" | "cpu" | "cuda") resolves to, as
// make_model_executor resolves it: CUDA (with device 0's name and total
// memory in bytes, what vLLM's batch defaults read) or the CPU. Throws
// std::runtime_error for "cuda" in a build without CUDA or on a machine
// without a GPU, and for any other value.
struct TargetDevice {
  bool cuda = false;
  std::string name;                 // cudaDeviceProp::name ("NVIDIA H200"); "" on the CPU
  uint64_t total_memory_bytes = 0;  // device 0's; 0 on the CPU
};
TargetDevice resolve_target_device(const std::string& device);

// Loads the model for opts.device ("auto": CUDA when a GPU is present and the
// CUDA backend is built in, else CPU). Throws std::runtime_error with a clear
// message (missing files, unsupported architecture, no GPU for "cuda";
// tensor_parallel_size < 1, not dividing the heads/KV heads/intermediate
// size, > 1 on CUDA in a build without NCCL, or more than the GPUs present;
// a --quantization flag not matching the checkpoint).
std::unique_ptr<ModelExecutor> make_model_executor(const ModelConfig& config,
                                                   const ExecutorOptions& opts);

}  // namespace pagoda
