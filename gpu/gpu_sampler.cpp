// GpuSampler (gpu/gpu_sampler.h): validation, one staged upload, the
// kernels, the results back.
#include "gpu/gpu_sampler.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/sample/sampler.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace pagoda::cuda {

struct IdBias {
  int32_t id;
  float bias;
};

void launch_init_slots(const DeviceSlotInit* inits, int64_t n, const int32_t* ids, uint32_t* counts,
                       int64_t vocab, cudaStream_t stream);
void launch_sample_rows(const float* logits, int64_t vocab, const DeviceSampleRow* rows, int64_t n,
                        const int32_t* ids, const IdBias* bias, const uint32_t* mask_words,
                        uint32_t* counts, float* scratch, int32_t* out_id, float* out_lp,
                        int32_t* out_top_id, float* out_top_lp, int32_t* out_rank,
                        cudaStream_t stream);

namespace {

constexpr int kTop = kMaxLogprobs;

CudaBackend& as_cuda(Backend& b) {
  auto* c = dynamic_cast<CudaBackend*>(&b);
  if (c == nullptr) throw std::invalid_argument("GpuSampler: the backend is not the CUDA backend");
  return *c;
}

size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

// Output layout for `cap` rows: ids, lps, top ids [cap, 20], top lps
// [cap, 20], ranks [cap] (score rows).
size_t out_bytes(int64_t cap) { return static_cast<size_t>(cap) * (4 + 4 + 2 * 4 * kTop + 4); }

void check_range(int32_t begin, int32_t count, size_t size, const char* what) {
  if (begin < 0 || count < 0 || static_cast<size_t>(begin) + static_cast<size_t>(count) > size)
    throw std::invalid_argument(std::string("GpuSampler::sample: ") + what +
                                " range out of bounds");
}

}  // namespace

GpuSampler::GpuSampler(Backend& backend, int64_t vocab, int32_t initial_slots)
    : backend_(backend), vocab_(vocab) {
  as_cuda(backend_);
  if (vocab <= 0) throw std::invalid_argument("GpuSampler: vocab must be > 0");
  for (void*& e : ev_) PAGODA_CUDA_CHECK(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&e)));
  ensure_slots(initial_slots);
}

GpuSampler::~GpuSampler() {
  for (void* e : ev_)
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  cudaFree(counts_);
  cudaFree(scratch_);
  cudaFree(out_dev_);
  cudaFreeHost(out_host_);
  cudaFree(stage_dev_);
  cudaFreeHost(stage_host_);
}

void GpuSampler::ensure_slots(int32_t n) {
  if (n <= slots_) return;
  CudaBackend& cb = as_cuda(backend_);
  const int32_t cap = std::max(n, slots_ * 2);
  uint32_t* grown = nullptr;
  PAGODA_CUDA_CHECK(cudaMalloc(&grown, static_cast<size_t>(cap) * static_cast<size_t>(vocab_) * 4));
  if (counts_) {  // keep the live slots' counts
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(grown, counts_,
                                      static_cast<size_t>(slots_) * static_cast<size_t>(vocab_) * 4,
                                      cudaMemcpyDeviceToDevice, cb.stream()));
    cb.synchronize();
    PAGODA_CUDA_CHECK(cudaFree(counts_));
  }
  counts_ = grown;
  slots_ = cap;
}

void GpuSampler::ensure_rows(int64_t rows, bool scratch) {
  if (rows > out_rows_) {
    as_cuda(backend_).synchronize();
    const int64_t cap = std::max<int64_t>(rows, 256);
    if (out_dev_) PAGODA_CUDA_CHECK(cudaFree(out_dev_));
    if (out_host_) PAGODA_CUDA_CHECK(cudaFreeHost(out_host_));
    out_dev_ = out_host_ = nullptr;
    PAGODA_CUDA_CHECK(cudaMalloc(&out_dev_, out_bytes(cap)));
    PAGODA_CUDA_CHECK(cudaMallocHost(&out_host_, out_bytes(cap)));
    out_rows_ = cap;
  }
  if (scratch && rows > scratch_rows_) {
    as_cuda(backend_).synchronize();
    if (scratch_) PAGODA_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    const int64_t cap = std::max<int64_t>(rows, 64);
    PAGODA_CUDA_CHECK(
        cudaMalloc(&scratch_, static_cast<size_t>(cap) * static_cast<size_t>(vocab_) * 4));
    scratch_rows_ = cap;
  }
}

void GpuSampler::ensure_staging(size_t bytes) {
  if (bytes <= stage_bytes_) return;
  as_cuda(backend_).synchronize();
  if (stage_dev_) PAGODA_CUDA_CHECK(cudaFree(stage_dev_));
  if (stage_host_) PAGODA_CUDA_CHECK(cudaFreeHost(stage_host_));
  stage_dev_ = stage_host_ = nullptr;
  const size_t cap = std::max<size_t>(bytes * 2, 64 * 1024);
  PAGODA_CUDA_CHECK(cudaMalloc(&stage_dev_, cap));
  PAGODA_CUDA_CHECK(cudaMallocHost(&stage_host_, cap));
  stage_bytes_ = cap;
}

void GpuSampler::sample(const Tensor& logits, const DeviceSamplingBatch& batch,
                        std::vector<TokenLogprob>& out) {
  batch.prepare();  // when the executor has not (it calls it once the forward is enqueued)
  CudaBackend& cb = as_cuda(backend_);
  const int64_t n = static_cast<int64_t>(batch.rows.size());
  if (logits.device != Device::CUDA || logits.dtype != DType::F32 || logits.ndim != 2 ||
      logits.cols() != vocab_)
    throw std::invalid_argument("GpuSampler::sample: logits must be F32 [rows, " +
                                std::to_string(vocab_) + "] on the GPU, got " + logits.shape_str());
  bool scratch = false;
  for (const DeviceSampleRow& r : batch.rows) {
    if (r.src_row < 0 || r.src_row >= logits.rows())
      throw std::invalid_argument("GpuSampler::sample: src_row " + std::to_string(r.src_row) +
                                  " outside the " + std::to_string(logits.rows()) + " logits rows");
    if (!(r.temperature >= 0.f) || !(r.top_p > 0.f && r.top_p <= 1.f) ||
        !(r.min_p >= 0.f && r.min_p <= 1.f) || !(r.repetition_penalty > 0.f) || r.logprobs > kTop)
      throw std::invalid_argument(
          "GpuSampler::sample: temperature must be >= 0, top_p in (0, 1], min_p in [0, 1], "
          "repetition_penalty > 0, logprobs <= 20");
    if (r.slot >= batch.num_slots)
      throw std::invalid_argument("GpuSampler::sample: slot beyond num_slots");
    if (r.score_token >= 0 && (r.score_token >= vocab_ || r.logprobs < 0 || r.slot >= 0 ||
                               r.allow_count > 0 || r.ban_count > 0 || r.bias_count > 0))
      throw std::invalid_argument(
          "GpuSampler::sample: a score row needs score_token < vocab, logprobs >= 0 and no "
          "allow, ban, bias or slot");
    check_range(r.allow_begin, r.allow_count, batch.ids.size(), "allow");
    check_range(r.ban_begin, r.ban_count, batch.ids.size(), "ban");
    check_range(r.bias_begin, r.bias_count, batch.bias.size(), "bias");
    if (r.mask_begin >= 0) {
      if (r.score_token >= 0)
        throw std::invalid_argument("GpuSampler::sample: a score row has no guided mask");
      check_range(r.mask_begin, static_cast<int32_t>((vocab_ + 31) / 32), batch.mask_words.size(),
                  "guided mask");
    }
    scratch = scratch || r.allow_count > 0 || r.ban_count > 0 || r.bias_count > 0 || r.slot >= 0 ||
              r.mask_begin >= 0;
  }
  for (const DeviceSlotInit& in : batch.inits) {
    if (in.slot < 0 || in.slot >= batch.num_slots)
      throw std::invalid_argument("GpuSampler::sample: init slot out of range");
    check_range(in.prompt_begin, in.prompt_count, batch.ids.size(), "init prompt");
    check_range(in.output_begin, in.output_count, batch.ids.size(), "init output");
  }
  out.resize(static_cast<size_t>(n));
  if (n == 0) return;
  ensure_slots(batch.num_slots);
  ensure_rows(n, scratch);

  // One upload: rows, inits, ids, bias, guided masks (only guided rows
  // add mask words: an unconstrained batch uploads none).
  const size_t rows_b = align16(sizeof(DeviceSampleRow) * batch.rows.size());
  const size_t inits_b = align16(sizeof(DeviceSlotInit) * batch.inits.size());
  const size_t ids_b = align16(4 * batch.ids.size());
  const size_t bias_b = align16(sizeof(IdBias) * batch.bias.size());
  const size_t mask_b = align16(4 * batch.mask_words.size());
  ensure_staging(rows_b + inits_b + ids_b + bias_b + mask_b);
  auto* h = static_cast<char*>(stage_host_);
  std::memcpy(h, batch.rows.data(), sizeof(DeviceSampleRow) * batch.rows.size());
  if (!batch.inits.empty())
    std::memcpy(h + rows_b, batch.inits.data(), sizeof(DeviceSlotInit) * batch.inits.size());
  if (!batch.ids.empty()) std::memcpy(h + rows_b + inits_b, batch.ids.data(), 4 * batch.ids.size());
  auto* hb = reinterpret_cast<IdBias*>(h + rows_b + inits_b + ids_b);
  for (size_t i = 0; i < batch.bias.size(); ++i)
    hb[i] = {batch.bias[i].first, batch.bias[i].second};
  if (!batch.mask_words.empty())
    std::memcpy(h + rows_b + inits_b + ids_b + bias_b, batch.mask_words.data(),
                4 * batch.mask_words.size());
  cudaStream_t st = cb.stream();
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(stage_dev_, stage_host_,
                                    rows_b + inits_b + ids_b + bias_b + mask_b,
                                    cudaMemcpyHostToDevice, st));
  auto* d = static_cast<char*>(stage_dev_);
  const auto* d_rows = reinterpret_cast<const DeviceSampleRow*>(d);
  const auto* d_inits = reinterpret_cast<const DeviceSlotInit*>(d + rows_b);
  const auto* d_ids = reinterpret_cast<const int32_t*>(d + rows_b + inits_b);
  const auto* d_bias = reinterpret_cast<const IdBias*>(d + rows_b + inits_b + ids_b);
  const auto* d_mask = reinterpret_cast<const uint32_t*>(d + rows_b + inits_b + ids_b + bias_b);

  auto* o = static_cast<char*>(out_dev_);
  auto* o_id = reinterpret_cast<int32_t*>(o);
  auto* o_lp = reinterpret_cast<float*>(o + out_rows_ * 4);
  auto* o_tid = reinterpret_cast<int32_t*>(o + out_rows_ * 8);
  auto* o_tlp = reinterpret_cast<float*>(o + out_rows_ * (8 + 4 * kTop));
  auto* o_rank = reinterpret_cast<int32_t*>(o + out_rows_ * (8 + 8 * kTop));
  PAGODA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(ev_[0]), st));
  launch_init_slots(d_inits, static_cast<int64_t>(batch.inits.size()), d_ids, counts_, vocab_, st);
  launch_sample_rows(logits.ptr<float>(), vocab_, d_rows, n, d_ids, d_bias, d_mask, counts_,
                     scratch_, o_id, o_lp, o_tid, o_tlp, o_rank, st);
  PAGODA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(ev_[1]), st));

  // Ids always; logprobs only when a row asked (a plain batch copies ids).
  auto* ho = static_cast<char*>(out_host_);
  const bool lp = batch.wants_logprobs();
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(ho, o, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost, st));
  if (lp) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(ho + out_rows_ * 4, o + out_rows_ * 4,
                                      static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost, st));
    for (const int64_t at : {out_rows_ * 8, out_rows_ * (8 + 4 * kTop)})  // top ids, top logprobs
      PAGODA_CUDA_CHECK(cudaMemcpyAsync(ho + at, o + at, static_cast<size_t>(n) * 4 * kTop,
                                        cudaMemcpyDeviceToHost, st));
  }
  const bool ranks = lp || batch.has_score_rows();  // sampled rows with logprobs have one too
  if (ranks)
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(ho + out_rows_ * (8 + 8 * kTop),
                                      o + out_rows_ * (8 + 8 * kTop), static_cast<size_t>(n) * 4,
                                      cudaMemcpyDeviceToHost, st));
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(st));
  PAGODA_CUDA_CHECK(cudaEventElapsedTime(&last_ms_, static_cast<cudaEvent_t>(ev_[0]),
                                         static_cast<cudaEvent_t>(ev_[1])));
  const auto* h_id = reinterpret_cast<const int32_t*>(ho);
  const auto* h_lp = reinterpret_cast<const float*>(ho + out_rows_ * 4);
  const auto* h_tid = reinterpret_cast<const int32_t*>(ho + out_rows_ * 8);
  const auto* h_tlp = reinterpret_cast<const float*>(ho + out_rows_ * (8 + 4 * kTop));
  const auto* h_rank = reinterpret_cast<const int32_t*>(ho + out_rows_ * (8 + 8 * kTop));
  for (int64_t i = 0; i < n; ++i) {
    TokenLogprob& t = out[static_cast<size_t>(i)];
    const DeviceSampleRow& r = batch.rows[static_cast<size_t>(i)];
    t.token_id = h_id[i];
    t.logprob = 0.f;
    t.top.clear();
    t.rank = r.score_token >= 0 || r.logprobs >= 0 ? h_rank[i] : 0;
    if (r.logprobs < 0) continue;
    t.logprob = h_lp[i];
    const int k = std::min<int64_t>(r.logprobs, vocab_);
    for (int j = 0; j < k; ++j) t.top.emplace_back(h_tid[i * kTop + j], h_tlp[i * kTop + j]);
  }
}

}  // namespace pagoda::cuda
