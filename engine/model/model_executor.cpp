// make_model_executor: picks the backend, loads LlamaModel onto it and sizes
// the paged KV cache (vLLM's worker: determine_num_available_blocks).
#include "engine/model/model_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "engine/model/backend.h"
#include "engine/model/llama.h"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda_backend.h"
#include "gpu/cuda_graphs.h"
#include "gpu/device_info.h"
#include "gpu/gpu_sampler.h"
#endif

namespace pagoda {
namespace {

constexpr size_t kDefaultCpuKvBytes = size_t{256} << 20;  // 256 MiB

const char* short_dtype(DType d) {
  switch (d) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    default: return dtype_name(d);
  }
}

// The compute dtype asked for; "auto" = the checkpoint's (float32 -> bf16 on CUDA).
DType resolve_dtype(const std::string& s, const ModelConfig& c, bool cuda) {
  if (s == "auto") return cuda && c.torch_dtype == DType::F32 ? DType::BF16 : c.torch_dtype;
  if (s == "bfloat16" || s == "bf16") return DType::BF16;
  if (s == "float16" || s == "half" || s == "fp16") return DType::F16;
  if (s == "float32" || s == "float" || s == "fp32") return DType::F32;
  throw std::runtime_error("unsupported dtype '" + s + "' (expected auto, bfloat16, float16 or float32)");
}

bool cuda_available() {
#ifdef PAGODA_HAVE_CUDA
  return pagoda::cuda::device_count() > 0;
#else
  return false;
#endif
}

// Checks a step's metadata against the model and the cache so a bad batch
// is an exception, never an out-of-bounds access on any backend.
void validate_batch(const ForwardBatch& b, int64_t vocab, int64_t num_blocks, int64_t block_size,
                    int64_t max_tokens, int64_t max_logits, int64_t max_model_len) {
  auto fail = [](const std::string& w) { throw std::invalid_argument("ModelExecutor::execute: " + w); };
  const int64_t T = b.num_tokens(), B = b.num_seqs();
  if (T <= 0 || T > max_tokens)
    fail(std::to_string(T) + " tokens (1.." + std::to_string(max_tokens) + " allowed)");
  if (static_cast<int64_t>(b.logits_indices.size()) > max_logits)
    fail(std::to_string(b.logits_indices.size()) + " logits rows (max " + std::to_string(max_logits) + ")");
  if (b.positions.size() != static_cast<size_t>(T) || b.slot_mapping.size() != static_cast<size_t>(T))
    fail("positions/slot_mapping must have one entry per token");
  if (B < 1 || b.query_start_loc.front() != 0 || b.query_start_loc.back() != T)
    fail("query_start_loc must run from 0 to num_tokens");
  if (b.context_lens.size() != static_cast<size_t>(B) || b.max_blocks_per_seq < 1 ||
      b.block_tables.size() != static_cast<size_t>(B * b.max_blocks_per_seq))
    fail("context_lens/block_tables do not match num_seqs");
  for (int32_t id : b.input_ids)
    if (id < 0 || id >= vocab) fail("token id " + std::to_string(id) + " outside the vocabulary");
  for (int32_t s : b.slot_mapping)
    if (s >= num_blocks * block_size) fail("slot " + std::to_string(s) + " outside the KV cache");
  for (int32_t l : b.logits_indices)
    if (l < 0 || l >= T) fail("logits index " + std::to_string(l) + " out of range");
  for (int64_t i = 0; i < B; ++i) {
    const int32_t q0 = b.query_start_loc[static_cast<size_t>(i)], q1 = b.query_start_loc[static_cast<size_t>(i + 1)];
    if (q1 < q0) fail("query_start_loc must be non-decreasing");
    int32_t last = -1;
    for (int32_t t = q0; t < q1; ++t) {
      const int32_t p = b.positions[static_cast<size_t>(t)];
      if (p < 0 || p >= max_model_len) fail("position " + std::to_string(p) + " outside max_model_len");
      last = std::max(last, p);
    }
    const int64_t nblk = (static_cast<int64_t>(last) + block_size) / block_size;
    if (nblk > b.max_blocks_per_seq) fail("block table too short for position " + std::to_string(last));
    for (int64_t k = 0; k < nblk && last >= 0; ++k) {
      const int32_t blk = b.block_tables[static_cast<size_t>(i * b.max_blocks_per_seq + k)];
      if (blk < 0 || blk >= num_blocks) fail("block id " + std::to_string(blk) + " outside the KV cache");
    }
  }
}

class BackendModelExecutor final : public ModelExecutor {
 public:
  BackendModelExecutor(std::unique_ptr<Backend> backend, const ModelConfig& config,
                       const ExecutorOptions& opts, std::string description)
      : backend_(std::move(backend)), model_(config, *backend_), opts_(opts),
        description_(std::move(description)) {}

  LlamaModel& model() { return model_; }
  Backend& backend() { return *backend_; }

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  int64_t num_kv_blocks() const override { return model_.num_kv_blocks(); }
  int64_t block_size() const override { return model_.block_size(); }
  std::string describe() const override { return description_; }

  void execute(const ForwardBatch& batch, std::vector<float>& logits) override {
    Tensor out = forward(batch);
    logits.resize(static_cast<size_t>(out.numel()));
    backend_->copy_to_host(logits.data(), out);
  }

#ifdef PAGODA_HAVE_CUDA
  bool can_sample_on_device() const override { return sampler_ != nullptr; }

  void execute_and_sample(const ForwardBatch& batch, const std::vector<DeviceSampleParams>& params,
                          std::vector<int32_t>& token_ids) override {
    if (!sampler_) ModelExecutor::execute_and_sample(batch, params, token_ids);
    if (params.size() != batch.logits_indices.size())
      throw std::invalid_argument("execute_and_sample: one DeviceSampleParams per logits row expected");
    Tensor out = forward(batch);
    sample_params_.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i)
      sample_params_[i] = {params[i].temperature, params[i].top_k, params[i].top_p, params[i].min_p, params[i].seed};
    sampler_->sample(out, sample_params_, token_ids);
  }

  // CUDA graphs of the decode step (vLLM's capture_model) and the device
  // sampler; called once the KV cache is allocated.
  void init_cuda_extras() {
    sampler_ = std::make_unique<cuda::GpuSampler>(*backend_);
    if (opts_.enforce_eager) {
      spdlog::info("CUDA graphs off (--enforce-eager): every step runs eagerly");
      return;
    }
    const int64_t max_size = std::min(opts_.max_num_seqs, opts_.max_num_batched_tokens);
    graphs_ = std::make_unique<cuda::DecodeGraphs>(
        *backend_, [this](const DeviceBatch& b) { return model_.forward(b); });
    const ModelConfig& c = model_.config();
    graphs_->capture(cuda::DecodeGraphs::capture_sizes(max_size), opts_.max_num_batched_tokens,
                     (opts_.max_model_len + block_size() - 1) / block_size(), opts_.max_model_len,
                     static_cast<int>(c.num_attention_heads), static_cast<int>(c.head_dim));
  }
  int64_t num_cuda_graphs() const override { return graphs_ ? graphs_->num_graphs() : 0; }
#endif

 private:
  // Validates, then runs the step: replays a captured graph for a decode
  // batch that fits one, else runs eagerly. Returns the logits rows of the
  // batch ([L, vocab] F32 on the device).
  Tensor forward(const ForwardBatch& batch) {
    validate_batch(batch, vocab_size(), num_kv_blocks(), block_size(), opts_.max_num_batched_tokens,
                   std::min(opts_.max_num_seqs, opts_.max_num_batched_tokens), opts_.max_model_len);
#ifdef PAGODA_HAVE_CUDA
    if (graphs_) {
      const int64_t size = graphs_->padded_size(batch);
      if (size > 0) return graphs_->replay(graphs_->pad(batch, size)).first_rows(batch.num_seqs());
    }
#endif
    return model_.forward(backend_->upload_batch(batch));
  }

  std::unique_ptr<Backend> backend_;
  LlamaModel model_;
  ExecutorOptions opts_;
  std::string description_;
#ifdef PAGODA_HAVE_CUDA
  std::unique_ptr<cuda::DecodeGraphs> graphs_;
  std::unique_ptr<cuda::GpuSampler> sampler_;
  std::vector<cuda::GpuSampleParams> sample_params_;
#endif
};

#ifdef PAGODA_HAVE_CUDA
// vLLM's profile run: one forward over max_num_batched_tokens tokens split
// into up to max_num_seqs sequences (each at most max_model_len), on a
// temporary KV cache just big enough for it. Returns that cache's bytes.
size_t profile_run(BackendModelExecutor& ex, const ExecutorOptions& o, size_t bytes_per_block) {
  const int64_t bs = o.block_size;
  const int64_t S = std::max<int64_t>(1, std::min(o.max_num_seqs, o.max_num_batched_tokens));
  const int64_t len = std::min(o.max_model_len, (o.max_num_batched_tokens + S - 1) / S);
  const int64_t blocks_per_seq = (len + bs - 1) / bs;
  ForwardBatch b;
  b.max_blocks_per_seq = static_cast<int32_t>(blocks_per_seq);
  b.query_start_loc.push_back(0);
  int64_t remaining = o.max_num_batched_tokens, next_block = 0;
  for (int64_t s = 0; s < S && remaining > 0; ++s) {
    const int64_t n = std::min(len, remaining);
    remaining -= n;
    for (int64_t p = 0; p < n; ++p) {
      b.input_ids.push_back(0);
      b.positions.push_back(static_cast<int32_t>(p));
      b.slot_mapping.push_back(static_cast<int32_t>((next_block + p / bs) * bs + p % bs));
    }
    for (int64_t k = 0; k < blocks_per_seq; ++k) b.block_tables.push_back(static_cast<int32_t>(next_block + k));
    next_block += blocks_per_seq;
    b.query_start_loc.push_back(b.num_tokens());
    b.context_lens.push_back(static_cast<int32_t>(n));
    b.logits_indices.push_back(b.num_tokens() - 1);
  }
  ex.model().allocate_kv_cache(next_block, bs);
  ex.model().forward(ex.backend().upload_batch(b));
  ex.backend().synchronize();
  return static_cast<size_t>(next_block) * bytes_per_block;
}
#endif

}  // namespace

std::unique_ptr<ModelExecutor> make_model_executor(const ModelConfig& config, const ExecutorOptions& opts) {
  if (opts.max_model_len <= 0) throw std::runtime_error("max_model_len must be positive");
  if (opts.block_size <= 0 || opts.max_num_seqs <= 0 || opts.max_num_batched_tokens <= 0)
    throw std::runtime_error("block_size, max_num_seqs and max_num_batched_tokens must be positive");
  if (opts.load_format != "auto" && opts.load_format != "safetensors" && opts.load_format != "dummy")
    throw std::runtime_error("unsupported load_format '" + opts.load_format + "' (auto, safetensors, dummy)");

  bool use_cuda;
  if (opts.device == "cpu") {
    use_cuda = false;
  } else if (opts.device == "cuda") {
#ifndef PAGODA_HAVE_CUDA
    throw std::runtime_error("device 'cuda' requested but this build has no CUDA backend (rebuild with -DPAGODA_CUDA=ON)");
#endif
    if (!cuda_available()) throw std::runtime_error("device 'cuda' requested but no CUDA GPU is available");
    use_cuda = true;
  } else if (opts.device == "auto") {
    use_cuda = cuda_available();
  } else {
    throw std::runtime_error("unsupported device '" + opts.device + "' (auto, cpu, cuda)");
  }
  const DType want = resolve_dtype(opts.dtype, config, use_cuda);

  std::unique_ptr<Backend> backend;
  std::string description;
  if (use_cuda) {
#ifdef PAGODA_HAVE_CUDA
    backend = make_cuda_backend(0, want);
    description = std::string("cuda ") + short_dtype(want) + " (" + cuda::device_description(0) + ")";
#endif
  } else {
    if (want != DType::F32)
      spdlog::info("CPU backend computes in float32 (requested {})", short_dtype(want));
    backend = make_cpu_backend(opts.num_threads);
    const int threads = opts.num_threads > 0 ? opts.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    description = "cpu fp32 (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  }
  const DType act = backend->act_dtype();
  auto ex = std::make_unique<BackendModelExecutor>(std::move(backend), config, opts, description);

  if (opts.load_format == "dummy") ex->model().load_dummy_weights(opts.seed);
  else ex->model().load_weights(opts.model_dir);
  ex->model().allocate_workspace(opts.max_num_batched_tokens, opts.max_num_seqs, opts.max_model_len);

  const int64_t bs = opts.block_size;
  const size_t per_block = LlamaModel::kv_bytes_per_block(config, bs, act);
  const int64_t blocks_per_seq = (opts.max_model_len + bs - 1) / bs;
  int64_t blocks = 0;
  if (opts.num_gpu_blocks_override > 0) {
    blocks = opts.num_gpu_blocks_override;
  } else if (!use_cuda) {
    const size_t budget = opts.kv_cache_memory_bytes > 0 ? opts.kv_cache_memory_bytes : kDefaultCpuKvBytes;
    blocks = static_cast<int64_t>(budget / per_block);
    blocks = std::min(blocks, opts.max_num_seqs * blocks_per_seq);  // never more than can be used
  } else {
#ifdef PAGODA_HAVE_CUDA
    const size_t profile_kv = profile_run(*ex, opts, per_block);
    Backend& be = ex->backend();
    const double total = static_cast<double>(be.total_memory_bytes());
    const double used = total - static_cast<double>(be.free_memory_bytes()) - static_cast<double>(profile_kv);
    const double avail = opts.gpu_memory_utilization * total - used;
    blocks = avail > 0 ? static_cast<int64_t>(avail / static_cast<double>(per_block)) : 0;
    spdlog::info("Memory profiling: {:.2f} GiB in use besides the KV cache, {:.2f} GiB for the KV cache "
                 "(gpu_memory_utilization {:.2f} of {:.2f} GiB)",
                 used / (1 << 30), std::max(0.0, avail) / (1 << 30), opts.gpu_memory_utilization, total / (1 << 30));
#endif
  }
  if (blocks < blocks_per_seq)
    throw std::runtime_error(
        "not enough KV cache memory for one sequence of max_model_len " + std::to_string(opts.max_model_len) +
        ": it needs " + std::to_string(blocks_per_seq) + " blocks (" +
        std::to_string(static_cast<double>(blocks_per_seq * static_cast<int64_t>(per_block)) / (1 << 20)) +
        " MiB) but only " + std::to_string(std::max<int64_t>(0, blocks)) +
        " fit; raise the KV budget (gpu_memory_utilization / kv cache memory) or lower max_model_len");
  ex->model().allocate_kv_cache(blocks, bs);
  spdlog::info("# {} blocks: {}", use_cuda ? "GPU" : "CPU", blocks);
  spdlog::info("KV cache: {} tokens ({:.1f} MiB, {} bytes per block of {}); maximum concurrency for {} tokens per request: {:.2f}x",
               blocks * bs, static_cast<double>(blocks) * static_cast<double>(per_block) / (1 << 20), per_block, bs,
               opts.max_model_len, static_cast<double>(blocks) / static_cast<double>(blocks_per_seq));
#ifdef PAGODA_HAVE_CUDA
  if (use_cuda) ex->init_cuda_extras();
#endif
  spdlog::info("Model {} on {}", config.architecture, ex->describe());
  return ex;
}

}  // namespace pagoda
