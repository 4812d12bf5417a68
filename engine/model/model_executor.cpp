// make_model_executor: picks the backend, loads LlamaModel onto it and sizes
// the paged KV cache (vLLM's worker: determine_num_available_blocks).
#include "engine/model/model_executor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>

#include "engine/dist/communicator.h"
#include "engine/dist/rank_threads.h"
#include "engine/model/backend.h"
#include "engine/model/batch_validation.h"
#include "engine/model/llama.h"

#ifdef PAGODA_HAVE_CUDA
#include "gpu/cuda_backend.h"
#include "gpu/cuda_graphs.h"
#include "gpu/device_info.h"
#include "gpu/gpu_sampler.h"
#endif
#ifdef PAGODA_HAVE_NCCL
#include "gpu/nccl_communicator.h"
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

// One rank of the model: its backend (device), its shard of the weights,
// its KV cache (num_kv_heads / tp heads per block) and, on CUDA, its graphs.
struct Rank {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
#ifdef PAGODA_HAVE_CUDA
  std::unique_ptr<cuda::DecodeGraphs> graphs;
#endif
};

// The executor of `tensor_parallel_size` ranks, one thread each (RankThreads;
// TP=1 runs on the caller's thread). Every rank gets the same ForwardBatch
// (the scheduler and block manager run once, in the engine), uploads it to
// its own device and runs its forward in parallel with the others, meeting
// them in the all-reduces; rank 0's logits are returned or sampled.
class BackendModelExecutor final : public ModelExecutor {
 public:
  BackendModelExecutor(const ModelConfig& config, const ExecutorOptions& opts, bool use_cuda, DType want,
                       std::vector<std::unique_ptr<Communicator>> comms)
      : config_(config), opts_(opts), tp_(std::max(1, opts.tensor_parallel_size)), comms_(std::move(comms)),
        ranks_(static_cast<size_t>(tp_)),
        threads_(tp_, use_cuda ? std::function<void(int)>(set_device) : std::function<void(int)>{},
                 [this] {
                   for (auto& c : comms_) c->abort();
                 }) {
    // Backends and models are made on their rank's thread (CUDA: its device).
    const int threads = opts.num_threads > 0 ? opts.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int per_rank = std::max(1, threads / tp_);
    (void)want;  // CUDA only
    run_ranks([&](int r) {
      Rank& k = rank(r);
#ifdef PAGODA_HAVE_CUDA
      if (use_cuda) k.backend = make_cuda_backend(r, want);
#endif
      if (!use_cuda) k.backend = make_cpu_backend(tp_ == 1 ? opts.num_threads : per_rank);
      // NCCL communicators need the backends first: attach_communicators
      // makes those models.
      if (tp_ == 1 || !comms_.empty())
        k.model = std::make_unique<LlamaModel>(config_, *k.backend, TensorParallel{r, tp_},
                                               tp_ > 1 ? comms_.at(static_cast<size_t>(r)).get() : nullptr);
    });
  }
  ~BackendModelExecutor() override {
    // Free every rank's buffers on its own thread (CUDA: its device) before
    // the threads stop.
    try {
      run_ranks([&](int r) {
#ifdef PAGODA_HAVE_CUDA
        rank(r).graphs.reset();
        if (r == 0) sampler_.reset();
#endif
        rank(r).model.reset();
        rank(r).backend.reset();
      });
    } catch (...) {  // a destructor must not throw; the members free the rest
    }
  }

  Rank& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  int tp() const { return tp_; }
  void run_ranks(const std::function<void(int)>& fn) { threads_.run(fn); }
  void set_description(std::string d) { description_ = std::move(d); }
  // NCCL communicators are made once the backends exist (they need their
  // devices and streams); the models are rebuilt to use them.
  void attach_communicators(std::vector<std::unique_ptr<Communicator>> comms) {
    comms_ = std::move(comms);
    run_ranks([&](int r) {
      rank(r).model = std::make_unique<LlamaModel>(config_, *rank(r).backend, TensorParallel{r, tp_},
                                                   comms_.at(static_cast<size_t>(r)).get());
    });
  }

  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t num_kv_blocks() const override { return ranks_[0].model->num_kv_blocks(); }
  int64_t block_size() const override { return ranks_[0].model->block_size(); }
  int64_t num_host_kv_blocks() const override { return ranks_[0].model->num_host_kv_blocks(); }
  int64_t uniform_sliding_window() const override {
    const std::vector<int64_t>& w = config_.layer_sliding_window;
    if (w.empty() || w.front() <= 0) return 0;
    for (int64_t x : w)
      if (x != w.front()) return 0;
    return w.front();
  }
  void swap_out(std::span<const BlockSwap> pairs) override {
    if (pairs.empty()) return;
    check_swap_ids(pairs);
    run_ranks([&](int r) { rank(r).model->swap_out(pairs); });
  }
  void swap_in(std::span<const BlockSwap> pairs) override {
    if (pairs.empty()) return;
    check_swap_ids(pairs);
    run_ranks([&](int r) { rank(r).model->swap_in(pairs); });
  }
  void copy_blocks(std::span<const BlockCopy> copies) override {
    if (copies.empty()) return;
    for (const BlockCopy& c : copies)
      if (c.src < 0 || c.src >= num_kv_blocks() || c.dst < 0 || c.dst >= num_kv_blocks() ||
          c.src == c.dst)
        throw std::invalid_argument(
            fmt::format("ModelExecutor: block copy {} -> {} out of range", c.src, c.dst));
    run_ranks([&](int r) { rank(r).model->copy_blocks(copies); });
  }
  std::string describe() const override { return description_; }

  void execute(const ForwardBatch& batch, std::vector<float>& logits) override {
    check(batch);
    const auto L = static_cast<int64_t>(batch.logits_indices.size());
    run_ranks([&](int r) {
      Rank& k = rank(r);
      const int64_t cap = k.model->max_num_logits();
      if (L <= cap) {
        Tensor out = forward(r, batch);
        if (r != 0) return;  // every rank computes the same logits; rank 0's are used
        logits.resize(static_cast<size_t>(out.numel()));
        k.backend->copy_to_host(logits.data(), out);
        return;
      }
      // More rows than the logits workspace holds (prompt logprobs: a
      // prefill chunk's every row): an eager step (never a graph: those
      // have one row per sequence), then the rest of the rows from the same
      // step's hidden states, a workspace at a time, on rank 0.
      const DeviceBatch& db = k.backend->upload_batch(batch);
      Tensor out = k.model->forward(db);
      if (r != 0) return;
      const auto V = static_cast<size_t>(vocab_size());
      logits.resize(static_cast<size_t>(L) * V);
      k.backend->copy_to_host(logits.data(), out);
      for (int64_t done = out.rows(); done < L; done += cap) {
        const int64_t n = std::min(cap, L - done);
        Tensor more = k.model->logits_for(db.logits_indices.slice_rows(done, n));
        k.backend->copy_to_host(logits.data() + static_cast<size_t>(done) * V, more);
      }
    });
  }

#ifdef PAGODA_HAVE_CUDA
  bool can_sample_on_device() const override { return sampler_ != nullptr; }

  void execute_and_sample(const ForwardBatch& batch, const DeviceSamplingBatch& sampling,
                          std::vector<TokenLogprob>& out) override {
    if (!sampler_) ModelExecutor::execute_and_sample(batch, sampling, out);
    for (const DeviceSampleRow& r : sampling.rows)
      if (r.src_row < 0 || static_cast<size_t>(r.src_row) >= batch.logits_indices.size())
        throw std::invalid_argument("execute_and_sample: a sampling row reads past the step's logits rows");
    check(batch);
    const auto L = static_cast<int64_t>(batch.logits_indices.size());
    run_ranks([&](int r) {
      Rank& k = rank(r);
      const int64_t cap = k.model->max_num_logits();
      if (L <= cap) {
        Tensor logits = forward(r, batch);
        if (r == 0) {
          sampling.prepare();  // host work while the forward runs
          sampler_->sample(logits, sampling, out);
        }
        return;
      }
      // As execute(): an eager step, then the rest of the rows a workspace
      // at a time; each slice's rows are sampled before the next overwrites it.
      const DeviceBatch& db = k.backend->upload_batch(batch);
      Tensor first = k.model->forward(db);
      if (r != 0) return;
      sampling.prepare();
      out.assign(sampling.rows.size(), TokenLogprob{});
      for (int64_t done = 0; done < L; done += cap) {
        const int64_t n = std::min(cap, L - done);
        sliced_.clear();
        slice_rows_.clear();
        if (done == 0) {  // the sampling rows, their inits, ids and bias
          sliced_ = sampling;
          sliced_.rows.clear();
        } else {
          sliced_.num_slots = sampling.num_slots;
        }
        for (size_t i = 0; i < sampling.rows.size(); ++i) {
          DeviceSampleRow row = sampling.rows[i];
          if (row.src_row < done || row.src_row >= done + n) continue;
          if (done > 0 && row.score_token < 0)
            throw std::invalid_argument(
                "execute_and_sample: a sampling row beyond the first logits workspace");
          row.src_row -= static_cast<int32_t>(done);
          sliced_.rows.push_back(row);
          slice_rows_.push_back(i);
        }
        Tensor logits =
            done == 0 ? first : k.model->logits_for(db.logits_indices.slice_rows(done, n));
        sampler_->sample(logits, sliced_, slice_out_);
        for (size_t j = 0; j < slice_rows_.size(); ++j)
          out[slice_rows_[j]] = std::move(slice_out_[j]);
      }
    });
  }

  // CUDA graphs of the decode step (vLLM's capture_model), captured per rank
  // concurrently (thread-local capture mode; the NCCL all-reduces are
  // captured into each rank's graph), and the device sampler on rank 0;
  // called once the KV cache is allocated.
  void init_cuda_extras() {
    run_ranks([&](int r) {
      if (r == 0) sampler_ = std::make_unique<cuda::GpuSampler>(*rank(0).backend, config_.vocab_size);
    });
    if (opts_.enforce_eager) {
      spdlog::info("CUDA graphs off (--enforce-eager): every step runs eagerly");
      return;
    }
    const int64_t max_size = std::min(opts_.max_num_seqs, opts_.max_num_batched_tokens);
    run_ranks([&](int r) {
      Rank& k = rank(r);
      LlamaModel* model = k.model.get();
      k.graphs = std::make_unique<cuda::DecodeGraphs>(*k.backend,
                                                      [model](const DeviceBatch& b) { return model->forward(b); });
      k.graphs->capture(
          cuda::DecodeGraphs::capture_sizes(max_size), max_size, opts_.max_num_batched_tokens,
          (opts_.max_model_len + block_size() - 1) / block_size(), opts_.max_model_len,
          static_cast<int>(config_.num_attention_heads / tp_), static_cast<int>(config_.head_dim));
    });
  }
  int64_t num_cuda_graphs() const override { return ranks_[0].graphs ? ranks_[0].graphs->num_graphs() : 0; }
  int64_t num_graph_replays() const override {
    return graph_replays_.load(std::memory_order_relaxed);
  }
#endif

 private:
  static void set_device(int r) {
#ifdef PAGODA_HAVE_CUDA
    cuda::set_current_device(r);
#else
    (void)r;
#endif
  }

  // On the caller's thread, so a bad pair throws before any rank copies.
  void check_swap_ids(std::span<const BlockSwap> pairs) const {
    if (num_host_kv_blocks() == 0) throw std::logic_error("ModelExecutor: no swap space");
    for (const BlockSwap& p : pairs)
      if (p.device < 0 || p.device >= num_kv_blocks() || p.host < 0 ||
          p.host >= num_host_kv_blocks())
        throw std::invalid_argument(fmt::format(
            "ModelExecutor: swap pair (device {}, host {}) out of range", p.device, p.host));
  }

  void check(const ForwardBatch& batch) const {
    // Logits rows: up to one per token (prompt logprobs; execute() serves
    // rows beyond the workspace in slices).
    validate_batch(batch, vocab_size(), num_kv_blocks(), block_size(), opts_.max_num_batched_tokens,
                   opts_.max_num_batched_tokens, opts_.max_model_len, uniform_sliding_window());
  }

  // Rank r's step (on its thread): replays a captured graph for a decode
  // batch that fits one, else runs eagerly. Every rank makes the same choice
  // (same batch, same captured sizes), so the all-reduces pair up. Returns
  // the logits rows ([L, vocab] F32 on the rank's device).
  Tensor forward(int r, const ForwardBatch& batch) {
    Rank& k = rank(r);
#ifdef PAGODA_HAVE_CUDA
    if (k.graphs) {
      const int64_t size = k.graphs->padded_size(batch);
      if (size > 0) {
        if (r == 0) graph_replays_.fetch_add(1, std::memory_order_relaxed);
        return k.graphs->replay(k.graphs->pad(batch, size)).first_rows(batch.num_seqs());
      }
    }
#endif
    return k.model->forward(k.backend->upload_batch(batch));
  }

  ModelConfig config_;
  ExecutorOptions opts_;
  const int tp_;
  std::string description_;
  std::vector<std::unique_ptr<Communicator>> comms_;  // outlive the models that use them
  std::vector<Rank> ranks_;
  std::atomic<int64_t> graph_replays_{0};  // rank 0's replays (every rank replays alike)
#ifdef PAGODA_HAVE_CUDA
  std::unique_ptr<cuda::GpuSampler> sampler_;
  DeviceSamplingBatch sliced_;  // execute_and_sample's rows of one logits slice
  std::vector<size_t> slice_rows_;
  std::vector<TokenLogprob> slice_out_;
#endif
  RankThreads threads_;  // declared last: joined first
};

#ifdef PAGODA_HAVE_CUDA
// vLLM's profile run: one forward over max_num_batched_tokens tokens split
// into up to max_num_seqs sequences (each at most max_model_len), on a
// temporary KV cache just big enough for it, on every rank at once. Returns
// that cache's bytes (per rank).
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
  ex.run_ranks([&](int r) {
    Rank& k = ex.rank(r);
    k.model->allocate_kv_cache(next_block, bs);
    k.model->forward(k.backend->upload_batch(b));
    k.backend->synchronize();
  });
  return static_cast<size_t>(next_block) * bytes_per_block;
}
#endif

// vLLM's "Loading model weights took X GB" (per rank: what rank 0's device
// holds), and how the quantized linears run.
void log_weight_memory(BackendModelExecutor& ex, const ModelConfig& c, int tp, double seconds) {
  const LlamaModel::LoadStats& st = ex.rank(0).model->load_stats();
  spdlog::info("Loading model weights took {:.4f} GB{} in {:.2f} s",
               static_cast<double>(st.device_bytes) / 1e9, tp > 1 ? " per rank" : "", seconds);
  if (!c.quantization.enabled()) return;
  // Dummy weights count as packed linears only (nothing is read).
  const int total = std::max(st.quantized_linears, st.packed_linears);
  std::string how = ex.rank(0).backend->quantized_linear_path();
  if (st.packed_linears > 0 && st.packed_linears < total)
    how += "; " + std::to_string(total - st.packed_linears) +
           " of them dequantized at load (row-parallel shards of act-order weights)";
  if (st.packed_linears == 0 && st.quantized_linears == 0)  // --load-format dummy, nothing packed
    how =
        "not quantized: --load-format dummy on this backend gives float dummy weights in the "
        "checkpoint's float shapes";
  spdlog::info("Quantization: {} ({} linears{}); quantized linears {} on {}",
               c.quantization.describe(), total, tp > 1 ? " per rank" : "", how,
               ex.rank(0).backend->name());
}

}  // namespace

TargetDevice resolve_target_device(const std::string& device) {
  bool use_cuda;
  if (device == "cpu") {
    use_cuda = false;
  } else if (device == "cuda") {
#ifndef PAGODA_HAVE_CUDA
    throw std::runtime_error("device 'cuda' requested but this build has no CUDA backend (rebuild with -DPAGODA_CUDA=ON)");
#endif
    if (!cuda_available()) throw std::runtime_error("device 'cuda' requested but no CUDA GPU is available");
    use_cuda = true;
  } else if (device == "auto") {
    use_cuda = cuda_available();
  } else {
    throw std::runtime_error("unsupported device '" + device + "' (auto, cpu, cuda)");
  }
  TargetDevice t;
  t.cuda = use_cuda;
#ifdef PAGODA_HAVE_CUDA
  if (use_cuda) cuda::device_name_and_memory(0, t.name, t.total_memory_bytes);
#endif
  return t;
}

std::unique_ptr<ModelExecutor> make_model_executor(const ModelConfig& config,
                                                   const ExecutorOptions& opts) {
  if (opts.max_model_len <= 0) throw std::runtime_error("max_model_len must be positive");
  if (opts.block_size <= 0 || opts.max_num_seqs <= 0 || opts.max_num_batched_tokens <= 0)
    throw std::runtime_error(
        "block_size, max_num_seqs and max_num_batched_tokens must be positive");
  if (opts.load_format != "auto" && opts.load_format != "safetensors" &&
      opts.load_format != "dummy")
    throw std::runtime_error("unsupported load_format '" + opts.load_format +
                             "' (auto, safetensors, dummy)");

  check_quantization_flag(config.quantization, opts.quantization, opts.model_dir + "/config.json");

  const bool use_cuda = resolve_target_device(opts.device).cuda;
  const DType want = resolve_dtype(opts.dtype, config, use_cuda);

  // Tensor parallelism: validated before anything is loaded.
  const int tp = opts.tensor_parallel_size;
  validate_tensor_parallel(config, tp);  // tp >= 1, divides heads / KV heads / intermediate
  std::vector<std::unique_ptr<Communicator>> comms;
  if (use_cuda && tp > 1) {
#ifndef PAGODA_HAVE_NCCL
    throw std::runtime_error("tensor_parallel_size " + std::to_string(tp) +
                             " on CUDA needs NCCL, and this build has none (install NCCL and rebuild; CMake "
                             "enables -DPAGODA_NCCL when it finds nccl.h and libnccl), or use --device cpu");
#endif
#ifdef PAGODA_HAVE_CUDA
    const int gpus = cuda::device_count();
    if (tp > gpus)
      throw std::runtime_error("tensor_parallel_size " + std::to_string(tp) + " needs " + std::to_string(tp) +
                               " GPUs (one per rank) but " + std::to_string(gpus) + " are present");
#endif
  } else if (tp > 1) {
    comms = make_cpu_communicators(tp);
  }

  if (!use_cuda && want != DType::F32)
    spdlog::info("CPU backend computes in float32 (requested {})", short_dtype(want));
  auto ex = std::make_unique<BackendModelExecutor>(config, opts, use_cuda, want, std::move(comms));
#ifdef PAGODA_HAVE_NCCL
  if (use_cuda && tp > 1) {
    std::vector<Backend*> backends;
    for (int r = 0; r < tp; ++r) backends.push_back(ex->rank(r).backend.get());
    ex->attach_communicators(cuda::make_nccl_communicators(backends));
  }
#endif
  std::string description;
  if (use_cuda) {
#ifdef PAGODA_HAVE_CUDA
    description = std::string("cuda ") + short_dtype(want) + " (" + cuda::device_description(0) + ")";
#endif
  } else {
    const int threads = opts.num_threads > 0 ? opts.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    description = "cpu fp32 (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  }
  if (tp > 1) description += ", tensor parallel " + std::to_string(tp);
  ex->set_description(description);
  const DType act = ex->rank(0).backend->act_dtype();

  const auto load_start = std::chrono::steady_clock::now();
  ex->run_ranks([&](int r) {
    LlamaModel& m = *ex->rank(r).model;
    if (opts.load_format == "dummy") m.load_dummy_weights(opts.seed);
    else m.load_weights(opts.model_dir);  // each rank reads only its shards
    m.allocate_workspace(opts.max_num_batched_tokens, opts.max_num_seqs, opts.max_model_len);
  });
  log_weight_memory(
      *ex, config, tp,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  const int64_t bs = opts.block_size;
  // Per rank: each holds num_key_value_heads / tp heads of every block.
  const size_t per_block = LlamaModel::kv_bytes_per_block(config, bs, act, tp);
  const int64_t blocks_per_seq = (opts.max_model_len + bs - 1) / bs;
  int64_t blocks = 0;
  if (opts.num_gpu_blocks_override > 0) {
    blocks = opts.num_gpu_blocks_override;
  } else if (!use_cuda) {
    // The CPU ranks share one RAM: the budget covers all of them.
    const size_t budget = opts.kv_cache_memory_bytes > 0 ? opts.kv_cache_memory_bytes : kDefaultCpuKvBytes;
    blocks = static_cast<int64_t>(budget / (per_block * static_cast<size_t>(tp)));
    blocks = std::min(blocks, opts.max_num_seqs * blocks_per_seq);  // never more than can be used
  } else {
#ifdef PAGODA_HAVE_CUDA
    // Every rank profiles its own device; the block count is the smallest
    // any rank can hold (block tables are identical on all ranks).
    const size_t profile_kv = profile_run(*ex, opts, per_block);
    std::vector<double> used_r(static_cast<size_t>(tp)), avail_r(static_cast<size_t>(tp));
    ex->run_ranks([&](int r) {
      Backend& be = *ex->rank(r).backend;
      const double total = static_cast<double>(be.total_memory_bytes());
      used_r[static_cast<size_t>(r)] = total - static_cast<double>(be.free_memory_bytes()) - static_cast<double>(profile_kv);
      avail_r[static_cast<size_t>(r)] = opts.gpu_memory_utilization * total - used_r[static_cast<size_t>(r)];
    });
    const size_t worst = static_cast<size_t>(std::min_element(avail_r.begin(), avail_r.end()) - avail_r.begin());
    const double total = static_cast<double>(ex->rank(0).backend->total_memory_bytes());
    const double used = used_r[worst], avail = avail_r[worst];
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
        fmt::format("{:.3f}", static_cast<double>(blocks_per_seq * static_cast<int64_t>(per_block)) / (1 << 20)) +
        (tp > 1 ? fmt::format(" MiB on each of {} ranks, {:.3f} MiB in all", tp,
                              static_cast<double>(blocks_per_seq * static_cast<int64_t>(per_block) * tp) / (1 << 20))
                : std::string(" MiB")) +
        ") but only " + std::to_string(std::max<int64_t>(0, blocks)) +
        " fit; raise the KV budget (gpu_memory_utilization / kv cache memory) or lower max_model_len");
  ex->run_ranks([&](int r) { ex->rank(r).model->allocate_kv_cache(blocks, bs); });
  spdlog::info("# {} blocks: {}{}", use_cuda ? "GPU" : "CPU", blocks,
               tp > 1 ? fmt::format(" per rank ({} KV head{} each)", config.num_key_value_heads / tp,
                                    config.num_key_value_heads / tp == 1 ? "" : "s")
                      : std::string());
  spdlog::info("KV cache: {} tokens ({:.1f} MiB{}, {} bytes per block of {}); maximum concurrency for {} tokens per request: {:.2f}x",
               blocks * bs, static_cast<double>(blocks) * static_cast<double>(per_block) / (1 << 20),
               tp > 1 ? " on each of " + std::to_string(tp) + " ranks" : "", per_block, bs,
               opts.max_model_len, static_cast<double>(blocks) / static_cast<double>(blocks_per_seq));
  // The swap space (vLLM's --swap-space): bytes for the whole engine over
  // the bytes a block takes on all ranks.
  const int64_t host_blocks =
      static_cast<int64_t>(opts.swap_space_bytes / (per_block * static_cast<size_t>(tp)));
  if (host_blocks > 0) {
    ex->run_ranks([&](int r) { ex->rank(r).model->allocate_host_kv_cache(host_blocks); });
    spdlog::info("Swap space: {} host KV blocks ({:.2f} GiB{}{})", host_blocks,
                 static_cast<double>(host_blocks) * static_cast<double>(per_block) / (1 << 30),
                 tp > 1 ? " on each of " + std::to_string(tp) + " ranks" : "",
                 use_cuda ? ", pinned" : "");
  }
#ifdef PAGODA_HAVE_CUDA
  if (use_cuda) ex->init_cuda_extras();
#endif
  spdlog::info("Model {} on {}", config.architecture, ex->describe());
  return ex;
}

}  // namespace pagoda
