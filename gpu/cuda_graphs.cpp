// DecodeGraphs (gpu/cuda_graphs.h): capture and replay of decode steps.
#include "gpu/cuda_graphs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/pdl.h"

namespace pagoda::cuda {
namespace {

CudaBackend& as_cuda(Backend& b) {
  auto* c = dynamic_cast<CudaBackend*>(&b);
  if (c == nullptr) throw std::invalid_argument("DecodeGraphs: the backend is not the CUDA backend");
  return *c;
}

}  // namespace

DecodeGraphs::DecodeGraphs(Backend& backend, ForwardFn forward)
    : backend_(backend), forward_(std::move(forward)) {
  as_cuda(backend_);
}

DecodeGraphs::~DecodeGraphs() {
  for (Graph& g : graphs_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(g.exec));
}

std::vector<int64_t> DecodeGraphs::capture_sizes(int64_t max_num_seqs) {
  const int64_t cap = std::min(max_num_seqs, kMaxCaptureSize);
  std::vector<int64_t> s;
  for (int64_t b : {1, 2, 4})
    if (b <= cap) s.push_back(b);
  for (int64_t b = 8; b <= cap && b < 256; b += 8) s.push_back(b);
  for (int64_t b = 256; b <= cap; b += 16) s.push_back(b);
  if (cap >= 1 && s.back() != cap) s.push_back(cap);
  return s;
}

ForwardBatch DecodeGraphs::dummy(int64_t size) const {
  ForwardBatch b;
  b.max_blocks_per_seq = static_cast<int32_t>(max_blocks_per_seq_);
  b.input_ids.assign(static_cast<size_t>(size), 0);
  b.positions.assign(static_cast<size_t>(size), 0);
  b.slot_mapping.assign(static_cast<size_t>(size), -1);
  b.context_lens.assign(static_cast<size_t>(size), 1);
  b.block_tables.assign(static_cast<size_t>(size * max_blocks_per_seq_), 0);
  for (int64_t i = 0; i <= size; ++i) b.query_start_loc.push_back(static_cast<int32_t>(i));
  for (int64_t i = 0; i < size; ++i) b.logits_indices.push_back(static_cast<int32_t>(i));
  return b;
}

void DecodeGraphs::capture(const std::vector<int64_t>& sizes, int64_t max_num_seqs,
                           int64_t max_num_batched_tokens, int64_t max_blocks_per_seq,
                           int64_t max_model_len, int num_heads, int head_dim) {
  CudaBackend& cb = as_cuda(backend_);
  if (sizes.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t free0 = cb.free_memory_bytes();
  max_blocks_per_seq_ = max_blocks_per_seq;
  // A step holds at most max_num_seqs (>= every size) sequences, so the
  // buffers never grow (which would invalidate the graphs) once captured.
  const int64_t max_seqs = std::max(max_num_seqs, *std::max_element(sizes.begin(), sizes.end()));
  cb.reserve(std::max(max_num_batched_tokens, max_seqs), max_seqs, max_blocks_per_seq, max_seqs,
             num_heads, head_dim, max_model_len);
  std::vector<int64_t> order(sizes);
  std::sort(order.rbegin(), order.rend());
  for (int64_t size : order) {
    ForwardBatch b = dummy(size);
    // The captured Flash-Decoding grid covers the longest context any
    // sequence can have; each CTA past its sequence's end returns at once.
    b.context_lens[0] = static_cast<int32_t>(max_model_len);
    b.positions[0] = 0;
    const DeviceBatch& db = backend_.upload_batch(b);
    forward_(db);  // warm-up: cuBLASLt plans, lazy module loading
    backend_.synchronize();
    cb.begin_capture();
    Tensor logits;
    try {
      logits = forward_(db);
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(cb.stream(), &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    Graph g;
    g.size = size;
    g.exec = cb.end_capture();
    g.logits = logits;
    graphs_.push_back(g);
  }
  std::sort(graphs_.begin(), graphs_.end(), [](const Graph& a, const Graph& b) { return a.size < b.size; });
  backend_.synchronize();
  generation_ = cb.buffer_generation();
  valid_ = true;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t free1 = cb.free_memory_bytes();
  std::string list;
  for (const Graph& g : graphs_) {
    if (!list.empty()) list.push_back(',');
    list.append(std::to_string(g.size));
  }
  spdlog::info(
      "CUDA graphs: captured {} decode batch sizes [{}] in {:.2f} s, {:.1f} MiB of device memory; "
      "programmatic dependent launch {}",
      graphs_.size(), list, secs,
      static_cast<double>(free0 > free1 ? free0 - free1 : 0) / (1 << 20),
      pdl_enabled()
          ? (kPdlEarlyRelease ? (kPdlEarlyReleaseQuant
                                     ? "on (PAGODA_PDL_EARLY build: each kernel releases the next "
                                       "before its wait)"
                                     : "on (PAGODA_PDL_EARLY build: each kernel but the int4 "
                                       "linears releases the next before its wait)")
                              : "on")
          : "off (needs sm_90 kernels on a compute capability 9.0 device; PAGODA_PDL=0 "
            "turns it off)");
}

const DecodeGraphs::Graph* DecodeGraphs::find(int64_t size) const {
  for (const Graph& g : graphs_)
    if (g.size == size) return &g;
  return nullptr;
}

int64_t DecodeGraphs::padded_size(const ForwardBatch& batch) const {
  if (!valid_) return 0;
  if (as_cuda(const_cast<Backend&>(backend_)).buffer_generation() != generation_) return 0;
  const int64_t B = batch.num_seqs();
  if (!batch.is_decode_only() || batch.max_blocks_per_seq > max_blocks_per_seq_ ||
      static_cast<int64_t>(batch.logits_indices.size()) != B)
    return 0;
  for (int64_t i = 0; i < B; ++i)
    if (batch.logits_indices[static_cast<size_t>(i)] != i) return 0;
  for (const Graph& g : graphs_)
    if (g.size >= B) return g.size;
  return 0;
}

ForwardBatch DecodeGraphs::pad(const ForwardBatch& batch, int64_t size) const {
  const int64_t B = batch.num_seqs();
  if (!batch.is_decode_only() || B > size || batch.max_blocks_per_seq > max_blocks_per_seq_ ||
      static_cast<int64_t>(batch.logits_indices.size()) != B)
    throw std::invalid_argument("DecodeGraphs::pad: not a decode batch that fits size " + std::to_string(size));
  ForwardBatch p = dummy(size);
  for (int64_t i = 0; i < B; ++i) {
    const size_t s = static_cast<size_t>(i);
    if (batch.logits_indices[s] != i) throw std::invalid_argument("DecodeGraphs::pad: logits rows out of order");
    p.input_ids[s] = batch.input_ids[s];
    p.positions[s] = batch.positions[s];
    p.slot_mapping[s] = batch.slot_mapping[s];
    p.context_lens[s] = batch.context_lens[s];
    std::copy_n(batch.block_tables.begin() + static_cast<std::ptrdiff_t>(i * batch.max_blocks_per_seq),
                batch.max_blocks_per_seq,
                p.block_tables.begin() + static_cast<std::ptrdiff_t>(i * max_blocks_per_seq_));
  }
  return p;
}

Tensor DecodeGraphs::replay(const ForwardBatch& padded) {
  const Graph* g = find(padded.num_seqs());
  if (g == nullptr || padded.max_blocks_per_seq != max_blocks_per_seq_)
    throw std::invalid_argument("DecodeGraphs::replay: no graph for this batch");
  CudaBackend& cb = as_cuda(backend_);
  backend_.upload_batch(padded);
  if (cb.buffer_generation() != generation_) {
    valid_ = false;
    throw std::logic_error("DecodeGraphs::replay: batch buffers moved since capture");
  }
  cb.launch_graph(static_cast<cudaGraphExec_t>(g->exec));
  return g->logits;
}

}  // namespace pagoda::cuda
