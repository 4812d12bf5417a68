// CudaBackend: memory, copies, batch upload and op dispatch with shape checks.
// The kernels live in the .cu files beside this one (see kernels.h).
#include "gpu/cuda_backend.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/kv/block_manager.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/device_info.h"
#include "gpu/kernels.h"

namespace pagoda {
namespace cuda {
namespace {

[[noreturn]] void bad(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("cuda backend: " + op + ": " + msg);
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void require_cuda(const Tensor& t, const char* op, const char* arg) {
  if (t.device != Device::CUDA || t.data == nullptr)
    bad(op, std::string(arg) + " is not an allocated CUDA tensor");
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

CudaBackend::CudaBackend(int device_index, DType act_dtype) : device_(device_index), act_(act_dtype) {
  if (!is_float(act_dtype))
    throw std::invalid_argument(std::string("cuda backend: act_dtype must be F32, F16 or BF16, got ") +
                                dtype_name(act_dtype));
  const int n = device_count();
  if (n == 0) throw std::runtime_error("cuda backend: no CUDA device (no driver or no GPU)");
  if (device_index < 0 || device_index >= n)
    throw std::runtime_error("cuda backend: device index " + std::to_string(device_index) +
                             " out of range (" + std::to_string(n) + " devices)");
  PAGODA_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  PAGODA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  total_mem_ = prop.totalGlobalMem;
  name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ")";
  PAGODA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PAGODA_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming));
  gemm_ = std::make_unique<LtGemm>(stream_);
  quant_ = std::make_unique<QuantLinearStore>(act_, stream_, *gemm_);
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  quant_.reset();
  gemm_.reset();
  for (void* p : live_) cudaFree(p);
  if (batch_host_) cudaFreeHost(batch_host_);
  for (void* p : host_kv_) cudaFreeHost(p);
  if (upload_done_) cudaEventDestroy(upload_done_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaBackend::raw_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  if (bytes == 0) bytes = 1;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    throw std::runtime_error(std::string("cuda backend: out of device memory allocating ") +
                             std::to_string(bytes) + " bytes for " + what + " (" +
                             std::to_string(fr) + " bytes free of " + std::to_string(tot) +
                             "): " + cudaGetErrorString(e));
  }
  live_.insert(p);
  return p;
}

void CudaBackend::raw_free(void* p) {
  if (p == nullptr) return;
  if (live_.erase(p) == 0) throw std::invalid_argument("cuda backend: free of a pointer it does not own");
  PAGODA_CUDA_CHECK(cudaFree(p));
}

void CudaBackend::ensure_scratch(void*& buf, size_t& cap, size_t bytes, const char* what) {
  if (bytes <= cap) return;
  ++buffer_generation_;
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raw_free(buf);
  buf = nullptr;
  cap = 0;
  buf = raw_alloc(bytes, what);
  cap = bytes;
}

Tensor CudaBackend::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  Tensor t(nullptr, dtype, Device::CUDA, shape);
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[static_cast<size_t>(i)] < 0) bad("alloc", "negative dimension in " + t.shape_str());
  t.data = raw_alloc(t.nbytes(), "a tensor");
  return t;
}

void CudaBackend::free(Tensor& t) {
  if (t.data == nullptr) return;
  if (quant_->release(t)) return;
  raw_free(t.data);
  t.data = nullptr;
}

size_t CudaBackend::free_memory_bytes() const {
  size_t fr = 0, tot = 0;
  PAGODA_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  return fr;
}

size_t CudaBackend::total_memory_bytes() const { return total_mem_; }

void CudaBackend::copy_from_host(Tensor& dst, const void* src, DType src_dtype) {
  require_cuda(dst, "copy_from_host", "dst");
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src_dtype == dst.dtype) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, dst.nbytes(), cudaMemcpyHostToDevice, stream_));
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  if (!is_float(src_dtype) || !is_float(dst.dtype))
    bad("copy_from_host", std::string("cannot convert ") + dtype_name(src_dtype) + " to " +
                              dtype_name(dst.dtype));
  const size_t es = dtype_size(src_dtype);
  const int64_t chunk = std::min<int64_t>(n, (64 << 20) / static_cast<int64_t>(es));
  ensure_scratch(staging_, staging_cap_, static_cast<size_t>(chunk) * es, "copy staging");
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t m = std::min(chunk, n - off);
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(staging_, static_cast<const char*>(src) + off * es,
                                      static_cast<size_t>(m) * es, cudaMemcpyHostToDevice, stream_));
    launch_convert(src_dtype, dst.dtype, staging_,
                   static_cast<char*>(dst.data) + off * static_cast<int64_t>(dtype_size(dst.dtype)),
                   m, stream_);
  }
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src) {
  require_cuda(src, "copy_to_host", "src");
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype == DType::F32 || src.dtype == DType::I32) {
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  if (!is_float(src.dtype)) bad("copy_to_host", std::string("unsupported dtype ") + dtype_name(src.dtype));
  const int64_t chunk = std::min<int64_t>(n, (64 << 20) / 4);
  ensure_scratch(staging_, staging_cap_, static_cast<size_t>(chunk) * 4, "copy staging");
  const size_t es = dtype_size(src.dtype);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t m = std::min(chunk, n - off);
    launch_convert(src.dtype, DType::F32, static_cast<const char*>(src.data) + off * static_cast<int64_t>(es),
                   staging_, m, stream_);
    PAGODA_CUDA_CHECK(cudaMemcpyAsync(static_cast<float*>(dst) + off, staging_,
                                      static_cast<size_t>(m) * 4, cudaMemcpyDeviceToHost, stream_));
  }
  PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::fill_zero(Tensor& t) {
  require_cuda(t, "fill_zero", "t");
  PAGODA_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
}

void CudaBackend::fill_normal(Tensor& t, float mean, float std, uint64_t seed) {
  require_cuda(t, "fill_normal", "t");
  if (!is_float(t.dtype)) bad("fill_normal", "float tensor expected");
  launch_fill_normal(t.dtype, t.data, t.numel(), mean, std, seed, stream_);
}

bool CudaBackend::keeps_quantized(const QuantConfig& qc, int64_t in_features) const {
  return QuantLinearStore::supports(qc, in_features, act_);
}

Tensor CudaBackend::alloc_quantized_linear(int64_t out_features, int64_t in_features,
                                           const QuantConfig& qc) {
  return quant_->alloc(out_features, in_features, qc);
}

void CudaBackend::load_quantized_linear(Tensor& dst, const QuantizedWeight& w) {
  if (dst.dtype == DType::I32) {
    quant_->load(dst, w);
    return;
  }
  Backend::load_quantized_linear(dst, w);
}

void CudaBackend::fill_quantized_dummy(Tensor& w, uint64_t seed) { quant_->fill_dummy(w, seed); }

size_t CudaBackend::weight_bytes(const Tensor& w) const { return quant_->bytes(w); }

std::string CudaBackend::quantized_linear_path() const {
  if (act_ == DType::F32) return Backend::quantized_linear_path();
  return std::string(
             "kept packed (decoded in registers into tensor-core fragments for int4 batches of "
             "<= 8 rows by qmv_kernel and of 9..64 by qmma_kernel (fewer where its shared memory "
             "would not hold more), for int8 batches of <= 8 by "
             "the fp32 GEMV; dequantized to ") +
         dtype_name(act_) + " per step for cuBLASLt above)";
}

void CudaBackend::synchronize() { PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

const DeviceBatch& CudaBackend::upload_batch(const ForwardBatch& b) {
  PAGODA_CUDA_CHECK(cudaSetDevice(device_));
  const int64_t T = b.num_tokens();
  const int64_t B = b.num_seqs();
  const int64_t L = static_cast<int64_t>(b.logits_indices.size());
  const int64_t MB = b.max_blocks_per_seq;
  if (static_cast<int64_t>(b.positions.size()) != T || static_cast<int64_t>(b.slot_mapping.size()) != T)
    bad("upload_batch", "input_ids, positions and slot_mapping sizes differ");
  if (b.query_start_loc.empty() || b.query_start_loc.front() != 0 || b.query_start_loc.back() != T)
    bad("upload_batch", "query_start_loc must start at 0 and end at num_tokens");
  if (static_cast<int64_t>(b.context_lens.size()) != B)
    bad("upload_batch", "context_lens size != num_seqs");
  if (MB < 0 || static_cast<int64_t>(b.block_tables.size()) != B * MB)
    bad("upload_batch", "block_tables size != num_seqs * max_blocks_per_seq");
  for (int64_t i = 0; i < B; ++i) {
    const int32_t ql = b.query_start_loc[static_cast<size_t>(i + 1)] - b.query_start_loc[static_cast<size_t>(i)];
    const int32_t cl = b.context_lens[static_cast<size_t>(i)];
    if (ql < 0 || cl < ql) bad("upload_batch", "sequence " + std::to_string(i) + ": query length " +
                                                   std::to_string(ql) + " > context length " + std::to_string(cl));
    if (MB == 0 && cl > 0) bad("upload_batch", "max_blocks_per_seq is 0");
  }
  for (int32_t li : b.logits_indices)
    if (li < 0 || li >= T) bad("upload_batch", "logits index " + std::to_string(li) + " out of range");

  // Capacities: grow to the need (x2 headroom); segments at fixed offsets.
  const bool grow = T > cap_tokens_ || B > cap_seqs_ || B * MB > cap_table_ || L > cap_logits_;
  if (grow) {
    ++buffer_generation_;
    cap_tokens_ = std::max(cap_tokens_, round_up(std::max<int64_t>(T, 1) * 2, 64));
    cap_seqs_ = std::max(cap_seqs_, round_up(std::max<int64_t>(B, 1) * 2, 64));
    cap_table_ = std::max(cap_table_, round_up(std::max<int64_t>(B * MB, 1) * 2, 64));
    cap_logits_ = std::max(cap_logits_, round_up(std::max<int64_t>(L, 1) * 2, 64));
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (batch_host_) PAGODA_CUDA_CHECK(cudaFreeHost(batch_host_));
    batch_host_ = nullptr;
    raw_free(batch_dev_);
    batch_dev_ = nullptr;
  }
  const int64_t o_ids = 0, o_pos = cap_tokens_, o_slot = 2 * cap_tokens_, o_qsl = 3 * cap_tokens_;
  const int64_t o_ctx = o_qsl + cap_seqs_ + 64, o_li = o_ctx + cap_seqs_, o_bt = o_li + cap_logits_;
  const int64_t total = o_bt + cap_table_;
  if (grow) {
    PAGODA_CUDA_CHECK(cudaMallocHost(&batch_host_, static_cast<size_t>(total) * 4));
    batch_dev_ = static_cast<int32_t*>(raw_alloc(static_cast<size_t>(total) * 4, "batch metadata"));
  }
  // The previous step's copy must have left the pinned buffer.
  PAGODA_CUDA_CHECK(cudaEventSynchronize(upload_done_));
  auto put = [&](int64_t off, const std::vector<int32_t>& v) {
    if (!v.empty()) std::memcpy(batch_host_ + off, v.data(), v.size() * 4);
  };
  put(o_ids, b.input_ids);
  put(o_pos, b.positions);
  put(o_slot, b.slot_mapping);
  put(o_qsl, b.query_start_loc);
  put(o_ctx, b.context_lens);
  put(o_li, b.logits_indices);
  put(o_bt, b.block_tables);
  PAGODA_CUDA_CHECK(cudaMemcpyAsync(batch_dev_, batch_host_, static_cast<size_t>(o_bt + B * MB) * 4,
                                    cudaMemcpyHostToDevice, stream_));
  PAGODA_CUDA_CHECK(cudaEventRecord(upload_done_, stream_));

  batch_max_position_ = -1;
  for (int32_t p : b.positions) batch_max_position_ = std::max<int64_t>(batch_max_position_, p);
  for (int32_t p : b.positions)
    if (p < 0) bad("upload_batch", "negative position");
  batch_max_slot_ = -1;
  for (int32_t s : b.slot_mapping) batch_max_slot_ = std::max<int64_t>(batch_max_slot_, s);
  batch_max_block_ = -1;
  for (int32_t x : b.block_tables) batch_max_block_ = std::max<int64_t>(batch_max_block_, x);
  // kNoBlock: a block the Scheduler released before a sliding window, which
  // no kernel reads (validate_batch checks where it may stand).
  for (int32_t x : b.block_tables)
    if (x < kNoBlock) bad("upload_batch", "negative block id");

  DeviceBatch& d = dbatch_;
  d.input_ids = Tensor(batch_dev_ + o_ids, DType::I32, Device::CUDA, {T});
  d.positions = Tensor(batch_dev_ + o_pos, DType::I32, Device::CUDA, {T});
  d.slot_mapping = Tensor(batch_dev_ + o_slot, DType::I32, Device::CUDA, {T});
  d.query_start_loc = Tensor(batch_dev_ + o_qsl, DType::I32, Device::CUDA, {B + 1});
  d.context_lens = Tensor(batch_dev_ + o_ctx, DType::I32, Device::CUDA, {B});
  d.block_tables = Tensor(batch_dev_ + o_bt, DType::I32, Device::CUDA, {B, MB});
  d.logits_indices = Tensor(batch_dev_ + o_li, DType::I32, Device::CUDA, {L});
  d.num_tokens = static_cast<int32_t>(T);
  d.num_seqs = static_cast<int32_t>(B);
  d.num_logits = static_cast<int32_t>(L);
  d.max_query_len = b.max_query_len();
  d.max_context_len = b.max_context_len();
  d.max_blocks_per_seq = static_cast<int32_t>(MB);
  d.decode_only = b.is_decode_only();
  return d;
}

void CudaBackend::reserve(int64_t max_tokens, int64_t max_seqs, int64_t max_blocks_per_seq,
                          int64_t max_logits, int num_heads, int head_dim, int64_t max_context_len) {
  if (max_tokens < 1 || max_seqs < 1 || max_blocks_per_seq < 1 || max_logits < 0)
    bad("reserve", "sizes must be positive");
  // An upload of exactly this shape grows the capacities to (at least) it.
  if (max_tokens > cap_tokens_ || max_seqs > cap_seqs_ || max_seqs * max_blocks_per_seq > cap_table_ ||
      max_logits > cap_logits_) {
    ++buffer_generation_;
    PAGODA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cap_tokens_ = std::max(cap_tokens_, round_up(max_tokens, 64));
    cap_seqs_ = std::max(cap_seqs_, round_up(max_seqs, 64));
    cap_table_ = std::max(cap_table_, round_up(max_seqs * max_blocks_per_seq, 64));
    cap_logits_ = std::max(cap_logits_, round_up(std::max<int64_t>(max_logits, 1), 64));
    if (batch_host_) PAGODA_CUDA_CHECK(cudaFreeHost(batch_host_));
    batch_host_ = nullptr;
    raw_free(batch_dev_);
    batch_dev_ = nullptr;
    const int64_t total = 3 * cap_tokens_ + 2 * cap_seqs_ + 64 + cap_logits_ + cap_table_;
    PAGODA_CUDA_CHECK(cudaMallocHost(&batch_host_, static_cast<size_t>(total) * 4));
    batch_dev_ = static_cast<int32_t*>(raw_alloc(static_cast<size_t>(total) * 4, "batch metadata"));
  }
  moe_reserve_tokens_ = std::max(moe_reserve_tokens_, max_tokens);
  size_t floats = 0;  // the partition (hence the workspace) depends on the batch size
  for (int64_t b = 1; b <= max_seqs; ++b)
    floats = std::max(floats, decode_workspace_floats(static_cast<int>(b), num_heads, head_dim,
                                                      static_cast<int>(max_context_len)));
  ensure_scratch(attn_ws_, attn_ws_cap_, floats * 4, "attention workspace");
}

void CudaBackend::begin_capture() {
  PAGODA_CUDA_CHECK(cudaSetDevice(device_));
  PAGODA_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

cudaGraphExec_t CudaBackend::end_capture() {
  cudaGraph_t graph = nullptr;
  PAGODA_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  PAGODA_CUDA_CHECK(e);
  return exec;
}

void CudaBackend::launch_graph(cudaGraphExec_t exec) { PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, stream_)); }

void CudaBackend::check_act(const Tensor& t, const char* op, const char* arg) const {
  require_cuda(t, op, arg);
  if (t.dtype != act_)
    bad(op, std::string(arg) + " has dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(act_));
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  require_cuda(ids, "embedding", "ids");
  check_act(table, "embedding", "table");
  check_act(out, "embedding", "out");
  if (ids.dtype != DType::I32) bad("embedding", "ids must be I32");
  if (table.ndim != 2 || out.rows() != ids.numel() || out.cols() != table.dim(1))
    bad("embedding", "shapes ids " + ids.shape_str() + " table " + table.shape_str() + " out " + out.shape_str());
  launch_embedding(act_, ids.ptr<int32_t>(), table.data, out.data, ids.numel(), table.dim(1),
                   table.dim(0), stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  check_act(x, "rms_norm", "x");
  check_act(w, "rms_norm", "w");
  check_act(out, "rms_norm", "out");
  if (w.numel() != x.cols() || out.numel() != x.numel())
    bad("rms_norm", "shapes x " + x.shape_str() + " w " + w.shape_str() + " out " + out.shape_str());
  launch_rms_norm(act_, x.data, w.data, eps, out.data, x.rows(), x.cols(), stream_);
}

void CudaBackend::add_rms_norm(const Tensor& x, Tensor& residual, const Tensor& w, float eps,
                               Tensor& out) {
  check_act(x, "add_rms_norm", "x");
  check_act(residual, "add_rms_norm", "residual");
  check_act(w, "add_rms_norm", "w");
  check_act(out, "add_rms_norm", "out");
  if (w.numel() != x.cols() || out.numel() != x.numel() || residual.numel() != x.numel())
    bad("add_rms_norm", "shapes x " + x.shape_str() + " residual " + residual.shape_str() + " w " +
                            w.shape_str() + " out " + out.shape_str());
  launch_add_rms_norm(act_, x.data, residual.data, w.data, eps, out.data, x.rows(), x.cols(), stream_);
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) {
  if (w.dtype == DType::I32) {  // a packed quantized linear
    check_act(x, "linear", "x");
    require_cuda(out, "linear", "out");
    if (bias != nullptr && !bias->empty() && (bias->dtype != act_ || bias->numel() != w.rows()))
      bad("linear", "bias of a packed linear must be act dtype [N], got " + bias->shape_str());
    quant_->linear(x, w, bias != nullptr && !bias->empty() ? bias->data : nullptr, out);
    return;
  }
  check_act(x, "linear", "x");
  check_act(w, "linear", "w");
  require_cuda(out, "linear", "out");
  if (out.dtype != act_ && out.dtype != DType::F32)
    bad("linear", std::string("out dtype ") + dtype_name(out.dtype) + " must be act dtype or F32");
  const int64_t M = x.rows(), K = x.cols(), N = w.rows();
  if (w.ndim != 2 || w.cols() != K || out.rows() != M || out.cols() != N)
    bad("linear", "shapes x " + x.shape_str() + " w " + w.shape_str() + " out " + out.shape_str());
  const void* bp = nullptr;
  DType bdt = act_;
  if (bias != nullptr && !bias->empty()) {
    require_cuda(*bias, "linear", "bias");
    if (bias->numel() != N || !is_float(bias->dtype)) bad("linear", "bias shape " + bias->shape_str());
    bp = bias->data;
    bdt = bias->dtype;
  }
  gemm_->run(act_, out.dtype, x.data, w.data, bp, bdt, out.data, M, N, K);
}

void CudaBackend::rope_and_cache(const Tensor& qkv, const RopeTable& rope, const DeviceBatch& batch,
                                 int64_t Hq, int64_t Hk, int64_t D, Tensor& q_out,
                                 LayerKVCache& cache) {
  check_act(qkv, "rope_and_cache", "qkv");
  check_act(q_out, "rope_and_cache", "q_out");
  check_act(cache.k, "rope_and_cache", "cache.k");
  check_act(cache.v, "rope_and_cache", "cache.v");
  const int64_t T = batch.num_tokens, R = rope.rotary_dim;
  if (Hq <= 0 || Hk <= 0 || D <= 0 || D % 2 != 0) bad("rope_and_cache", "bad head counts or head_dim");
  if (qkv.rows() != T || qkv.cols() != (Hq + 2 * Hk) * D || q_out.rows() != T || q_out.cols() != Hq * D)
    bad("rope_and_cache", "shapes qkv " + qkv.shape_str() + " q_out " + q_out.shape_str());
  if (R < 0 || R > D || R % 2 != 0)
    bad("rope_and_cache", "rotary_dim " + std::to_string(R) + " must be even and in [0, head_dim " +
                              std::to_string(D) + "]");
  if (R > 0) require_cuda(rope.cos_sin, "rope_and_cache", "rope.cos_sin");
  if (R > 0 &&
      (rope.cos_sin.dtype != DType::F32 || rope.cos_sin.ndim != 2 || rope.cos_sin.dim(1) != R))
    bad("rope_and_cache", "cos_sin must be F32 [max_pos, rotary_dim " + std::to_string(R) +
                              "], got " + rope.cos_sin.shape_str());
  if (R > 0 && batch_max_position_ >= rope.cos_sin.dim(0))
    bad("rope_and_cache", "position " + std::to_string(batch_max_position_) + " beyond the rope table (" +
                              std::to_string(rope.cos_sin.dim(0)) + " positions)");
  if (cache.k.ndim != 4 || cache.k.dim(2) != Hk || cache.k.dim(3) != D || cache.v.numel() != cache.k.numel())
    bad("rope_and_cache", "cache shape " + cache.k.shape_str());
  if (batch_max_slot_ >= cache.k.dim(0) * cache.k.dim(1))
    bad("rope_and_cache", "slot " + std::to_string(batch_max_slot_) + " beyond the cache");
  launch_rope_and_cache(act_, qkv.data, R > 0 ? rope.cos_sin.ptr<float>() : nullptr,
                        R > 0 ? rope.cos_sin.dim(0) : 0, batch.positions.ptr<int32_t>(),
                        batch.slot_mapping.ptr<int32_t>(), T, static_cast<int>(Hq),
                        static_cast<int>(Hk), static_cast<int>(D), static_cast<int>(R),
                        rope.interleaved, q_out.data, cache.k.data, cache.v.data, stream_);
}

void CudaBackend::attention(const Tensor& q, const LayerKVCache& cache, const DeviceBatch& batch,
                            int64_t Hq, int64_t Hk, int64_t D, float scale, Tensor& out) {
  attention_ext(q, cache, batch, Hq, Hk, D, scale, AttentionOptions{}, out);
}

void CudaBackend::attention_ext(const Tensor& q, const LayerKVCache& cache,
                                const DeviceBatch& batch, int64_t Hq, int64_t Hk, int64_t D,
                                float scale, const AttentionOptions& opts, Tensor& out) {
  if (opts.sliding_window < 0 || opts.sliding_window > INT32_MAX || !(opts.logit_softcap >= 0.f))
    bad("attention", "sliding window " + std::to_string(opts.sliding_window) + " / soft-cap " +
                         std::to_string(opts.logit_softcap) + " must be non-negative");
  if (!opts.alibi_slopes.empty()) {
    require_cuda(opts.alibi_slopes, "attention", "alibi_slopes");
    if (opts.alibi_slopes.dtype != DType::F32 || opts.alibi_slopes.numel() != Hq)
      bad("attention", "alibi_slopes must be F32 [" + std::to_string(Hq) + "], got " +
                           std::string(dtype_name(opts.alibi_slopes.dtype)) + " " +
                           opts.alibi_slopes.shape_str());
  }
  check_act(q, "attention", "q");
  check_act(out, "attention", "out");
  check_act(cache.k, "attention", "cache.k");
  check_act(cache.v, "attention", "cache.v");
  if (Hq <= 0 || Hk <= 0 || Hq % Hk != 0) bad("attention", "num_heads must be a multiple of num_kv_heads");
  if (!attention_head_dim_supported(static_cast<int>(D)))
    bad("attention", "head_dim " + std::to_string(D) + " not supported (8, 16, 32, 64, 128)");
  if (q.rows() != batch.num_tokens || q.cols() != Hq * D || out.numel() != q.numel())
    bad("attention", "shapes q " + q.shape_str() + " out " + out.shape_str());
  if (cache.k.ndim != 4 || cache.k.dim(2) != Hk || cache.k.dim(3) != D || cache.v.numel() != cache.k.numel())
    bad("attention", "cache shape " + cache.k.shape_str());
  if (batch_max_block_ >= cache.k.dim(0)) bad("attention", "block id beyond the cache");
  if (static_cast<int64_t>(batch.max_blocks_per_seq) * cache.k.dim(1) < batch.max_context_len)
    bad("attention", "block table too short for the context length");
  AttentionArgs a;
  a.q = q.data;
  a.k_cache = cache.k.data;
  a.v_cache = cache.v.data;
  a.out = out.data;
  a.query_start_loc = batch.query_start_loc.ptr<int32_t>();
  a.context_lens = batch.context_lens.ptr<int32_t>();
  a.block_tables = batch.block_tables.ptr<int32_t>();
  a.num_seqs = batch.num_seqs;
  a.num_tokens = batch.num_tokens;
  a.max_query_len = batch.max_query_len;
  a.max_context_len = batch.max_context_len;
  a.max_blocks_per_seq = batch.max_blocks_per_seq;
  a.num_heads = static_cast<int>(Hq);
  a.num_kv_heads = static_cast<int>(Hk);
  a.head_dim = static_cast<int>(D);
  a.block_size = static_cast<int>(cache.k.dim(1));
  a.scale = scale;
  a.sliding_window = static_cast<int>(opts.sliding_window);
  a.softcap = opts.logit_softcap;
  a.alibi = opts.alibi_slopes.empty() ? nullptr : opts.alibi_slopes.ptr<float>();
  if (batch.decode_only) {
    const size_t floats = decode_workspace_floats(a.num_seqs, a.num_heads, a.head_dim, a.max_context_len);
    ensure_scratch(attn_ws_, attn_ws_cap_, floats * 4, "attention workspace");
    launch_decode_attention(act_, a, static_cast<float*>(attn_ws_), stream_);
  } else {
    launch_prefill_attention(act_, a, stream_);
  }
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  check_act(gate_up, "silu_mul", "gate_up");
  check_act(out, "silu_mul", "out");
  const int64_t I = out.cols();
  if (gate_up.cols() != 2 * I || gate_up.rows() != out.rows())
    bad("silu_mul", "shapes gate_up " + gate_up.shape_str() + " out " + out.shape_str());
  launch_silu_mul(act_, gate_up.data, out.data, out.rows(), I, stream_);
}

void CudaBackend::head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, int64_t Hq,
                                int64_t Hk, int64_t D, float eps) {
  check_act(qkv, "head_rms_norm", "qkv");
  check_act(q_w, "head_rms_norm", "q_w");
  check_act(k_w, "head_rms_norm", "k_w");
  if (Hq <= 0 || Hk <= 0 || D <= 0 || qkv.cols() != (Hq + 2 * Hk) * D || q_w.numel() != D ||
      k_w.numel() != D)
    bad("head_rms_norm", "shapes qkv " + qkv.shape_str() + " q_w " + q_w.shape_str() + " k_w " +
                             k_w.shape_str() + " for " + std::to_string(Hq) + "+" +
                             std::to_string(Hk) + " heads of " + std::to_string(D));
  launch_head_rms_norm(act_, qkv.data, q_w.data, k_w.data, qkv.rows(), static_cast<int>(Hq),
                       static_cast<int>(Hk), static_cast<int>(D), eps, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  require_cuda(x, "gather_rows", "x");
  require_cuda(indices, "gather_rows", "indices");
  require_cuda(out, "gather_rows", "out");
  if (indices.dtype != DType::I32 || out.dtype != x.dtype) bad("gather_rows", "dtypes");
  if (out.rows() != indices.numel() || out.cols() != x.cols())
    bad("gather_rows", "shapes x " + x.shape_str() + " indices " + indices.shape_str() + " out " + out.shape_str());
  launch_gather_rows(x.data, indices.ptr<int32_t>(), out.data, indices.numel(),
                     x.cols() * static_cast<int64_t>(dtype_size(x.dtype)), x.rows(), stream_);
}

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int device_index, DType act_dtype) {
  return std::make_unique<cuda::CudaBackend>(device_index, act_dtype);
}

}  // namespace pagoda
