// See bench_ops.h. Events add a little time of their own to each op (a few
// microseconds per launch gap); the sum is compared with the step timed
// without the wrapper.
#include "gpu/bench/bench_ops.h"

#include <algorithm>
#include <map>
#include <memory>

#include "engine/model/forward_batch.h"
#include "engine/model/llama.h"
#include "engine/model/model_config.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"

namespace pagoda::bench {
namespace {

class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(cuda::CudaBackend& b) : b_(b) {}
  ~TimedBackend() override {
    for (auto& e : pool_) cudaEventDestroy(e);
  }
  // Starts recording (clears what was recorded).
  void start() { marks_.clear(); }
  void set_enabled(bool on) { on_ = on; }
  // Waits and returns ms per op name, in first-seen order with counts.
  std::vector<std::tuple<std::string, int, double>> finish() {
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(b_.stream()));
    std::vector<std::tuple<std::string, int, double>> out;
    std::map<std::string, size_t> at;
    for (const Mark& m : marks_) {
      float ms = 0;
      PAGODA_CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[m.a], pool_[m.b]));
      auto it = at.find(m.name);
      if (it == at.end()) {
        at[m.name] = out.size();
        out.emplace_back(m.name, 1, ms);
      } else {
        auto& [n, c, t] = out[it->second];
        ++c;
        t += ms;
      }
    }
    return out;
  }
  void name_linear(int64_t n, int64_t k, std::string name) { linear_names_[{n, k}] = std::move(name); }

  Device device() const override { return b_.device(); }
  std::string name() const override { return b_.name(); }
  DType act_dtype() const override { return b_.act_dtype(); }
  Tensor alloc(DType d, std::initializer_list<int64_t> s) override { return b_.alloc(d, s); }
  void free(Tensor& t) override { b_.free(t); }
  size_t free_memory_bytes() const override { return b_.free_memory_bytes(); }
  size_t total_memory_bytes() const override { return b_.total_memory_bytes(); }
  void copy_from_host(Tensor& d, const void* s, DType t) override { b_.copy_from_host(d, s, t); }
  void copy_to_host(void* d, const Tensor& s) override { b_.copy_to_host(d, s); }
  void fill_zero(Tensor& t) override { b_.fill_zero(t); }
  void fill_normal(Tensor& t, float m, float s, uint64_t seed) override { b_.fill_normal(t, m, s, seed); }
  void synchronize() override { b_.synchronize(); }
  HostKVCache alloc_host_kv_cache(int64_t l, int64_t n, size_t bb) override {
    return b_.alloc_host_kv_cache(l, n, bb);
  }
  void free_host_kv_cache(HostKVCache& h) override { b_.free_host_kv_cache(h); }
  void swap_out(std::span<const LayerKVCache> d, const HostKVCache& h,
                std::span<const BlockSwap> p) override {
    b_.swap_out(d, h, p);
  }
  void swap_in(std::span<const LayerKVCache> d, const HostKVCache& h,
               std::span<const BlockSwap> p) override {
    b_.swap_in(d, h, p);
  }
  void copy_blocks(std::span<const LayerKVCache> c, std::span<const BlockCopy> p) override {
    b_.copy_blocks(c, p);
  }
  // Packed quantized linears as the CUDA backend keeps them.
  bool keeps_quantized(const QuantConfig& qc, int64_t k) const override {
    return b_.keeps_quantized(qc, k);
  }
  Tensor alloc_quantized_linear(int64_t n, int64_t k, const QuantConfig& qc) override {
    return b_.alloc_quantized_linear(n, k, qc);
  }
  void fill_quantized_dummy(Tensor& w, uint64_t seed) override { b_.fill_quantized_dummy(w, seed); }
  size_t weight_bytes(const Tensor& w) const override { return b_.weight_bytes(w); }
  const DeviceBatch& upload_batch(const ForwardBatch& b) override { return b_.upload_batch(b); }

  void embedding(const Tensor& i, const Tensor& t, Tensor& o) override {
    timed("embedding", [&] { b_.embedding(i, t, o); });
  }
  void rms_norm(const Tensor& x, const Tensor& w, float e, Tensor& o) override {
    timed("rms_norm", [&] { b_.rms_norm(x, w, e, o); });
  }
  void add_rms_norm(const Tensor& x, Tensor& r, const Tensor& w, float e, Tensor& o) override {
    timed("add_rms_norm", [&] { b_.add_rms_norm(x, r, w, e, o); });
  }
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& o) override {
    auto it = linear_names_.find({w.rows(), w.cols()});
    timed(it == linear_names_.end() ? "linear" : it->second, [&] { b_.linear(x, w, bias, o); });
  }
  void rope_and_cache(const Tensor& qkv, const RopeTable& r, const DeviceBatch& b, int64_t hq, int64_t hk,
                      int64_t d, Tensor& q, LayerKVCache& c) override {
    timed("rope_and_cache", [&] { b_.rope_and_cache(qkv, r, b, hq, hk, d, q, c); });
  }
  void attention(const Tensor& q, const LayerKVCache& c, const DeviceBatch& b, int64_t hq, int64_t hk, int64_t d,
                 float s, Tensor& o) override {
    timed("attention", [&] { b_.attention(q, c, b, hq, hk, d, s, o); });
  }
  void silu_mul(const Tensor& g, Tensor& o) override { timed("silu_mul", [&] { b_.silu_mul(g, o); }); }
  void gather_rows(const Tensor& x, const Tensor& i, Tensor& o) override {
    timed("gather_rows", [&] { b_.gather_rows(x, i, o); });
  }

 private:
  struct Mark {
    std::string name;
    size_t a, b;
  };
  cudaEvent_t event(size_t i) {
    while (pool_.size() <= i) {
      cudaEvent_t e;
      PAGODA_CUDA_CHECK(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    return pool_[i];
  }
  template <typename F>
  void timed(const std::string& name, F&& f) {
    if (!on_) {
      f();
      return;
    }
    const size_t a = marks_.size() * 2, b = a + 1;
    PAGODA_CUDA_CHECK(cudaEventRecord(event(a), b_.stream()));
    f();
    PAGODA_CUDA_CHECK(cudaEventRecord(event(b), b_.stream()));
    marks_.push_back({name, a, b});
  }
  cuda::CudaBackend& b_;
  std::vector<cudaEvent_t> pool_;
  std::vector<Mark> marks_;
  std::map<std::pair<int64_t, int64_t>, std::string> linear_names_;
  bool on_ = true;
};

ForwardBatch make_batch(int B, int pos, int qlen, int max_blocks, int bs, int64_t vocab) {
  ForwardBatch b;
  b.max_blocks_per_seq = max_blocks;
  b.query_start_loc.push_back(0);
  for (int i = 0; i < B; ++i) {
    for (int j = 0; j < qlen; ++j) {
      const int p = pos + j;
      b.input_ids.push_back(static_cast<int32_t>((i * 131 + p * 7) % vocab));
      b.positions.push_back(p);
      b.slot_mapping.push_back((i * max_blocks + p / bs) * bs + p % bs);
    }
    for (int k = 0; k < max_blocks; ++k) b.block_tables.push_back(i * max_blocks + k);
    b.context_lens.push_back(pos + qlen);
    b.query_start_loc.push_back(b.query_start_loc.back() + qlen);
    b.logits_indices.push_back(b.query_start_loc.back() - 1);
  }
  return b;
}

}  // namespace

void bench_ops(const std::string& model_dir, std::vector<Row>& rows) {
  const ModelConfig c = ModelConfig::from_dir(model_dir);
  auto backend = make_cuda_backend(0, DType::BF16);
  auto& cb = dynamic_cast<cuda::CudaBackend&>(*backend);
  TimedBackend tb(cb);
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hk = c.num_key_value_heads;
  tb.name_linear((Hq + 2 * Hk) * D, H, "linear qkv");
  tb.name_linear(H, Hq * D, "linear o_proj");
  tb.name_linear(2 * I, H, "linear gate_up");
  tb.name_linear(H, I, "linear down");
  tb.name_linear(c.vocab_size, H, "linear lm_head");
  if (c.quantization.enabled()) {  // packed: I32 [N, K * bits / 32]
    const int64_t f = 32 / c.quantization.bits;
    tb.name_linear((Hq + 2 * Hk) * D, H / f, "linear qkv (packed)");
    tb.name_linear(H, Hq * D / f, "linear o_proj (packed)");
    tb.name_linear(2 * I, H / f, "linear gate_up (packed)");
    tb.name_linear(H, I / f, "linear down (packed)");
  }
  LlamaModel model(c, tb);
  model.load_dummy_weights(99);
  const int bs = 16, S = 2048, B = 8, max_blocks = S / bs + 1;
  // The offline runs' regime too: 256 sequences at context 257.
  const int BB = 256, bb_blocks = 256 / bs + 1;
  model.allocate_kv_cache(std::max<int64_t>(static_cast<int64_t>(B) * max_blocks, int64_t{BB} * bb_blocks),
                          bs);
  model.allocate_workspace(static_cast<int64_t>(B) * S, BB, c.max_position_embeddings);

  struct Step {
    const char* name;
    ForwardBatch batch;
  };
  const std::vector<Step> steps = {
      {"prefill 8 x 2048", make_batch(B, 0, S, max_blocks, bs, c.vocab_size)},
      {"decode batch 1, ctx 257", make_batch(1, 256, 1, max_blocks, bs, c.vocab_size)},
      {"decode batch 8, ctx 2049", make_batch(B, S, 1, max_blocks, bs, c.vocab_size)},
      {"decode batch 256, ctx 257", make_batch(BB, 256, 1, bb_blocks, bs, c.vocab_size)},
  };
  for (const Step& s : steps) {
    std::vector<std::tuple<std::string, int, double>> best;
    double best_total = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const DeviceBatch& db = tb.upload_batch(s.batch);
      tb.start();
      model.forward(db);
      auto r = tb.finish();
      double total = 0;
      for (auto& [n, k, ms] : r) total += ms;
      if (rep >= 1 && total < best_total) {
        best_total = total;
        best = r;
      }
    }
    // The same step without the events, for comparison.
    tb.set_enabled(false);
    const DeviceBatch& db = tb.upload_batch(s.batch);
    const double plain = time_ms(cb.stream(), [&](int) { model.forward(db); }, 5, 1);
    tb.set_enabled(true);
    for (auto& [n, k, ms] : best)
      rows.push_back({std::string(s.name) + ": " + n + " (x" + std::to_string(k) + ")", ms,
                      fmt("%.1f%% of the op sum", 100 * ms / best_total), "-"});
    rows.push_back({std::string(s.name) + ": sum of ops (event-bracketed)", best_total,
                    fmt("step without events %.3f ms", plain), "-"});
  }
}

}  // namespace pagoda::bench
