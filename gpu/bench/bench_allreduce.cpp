// See bench_allreduce.h.
#include "gpu/bench/bench_allreduce.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <thread>

#include "engine/model/model_config.h"
#include "gpu/cuda_backend.h"
#include "gpu/cuda_backend_impl.h"
#include "gpu/device_info.h"
#ifdef PAGODA_HAVE_NCCL
#include "gpu/nccl_communicator.h"
#endif

namespace pagoda::bench {

#ifdef PAGODA_HAVE_NCCL
void bench_allreduce(const std::string& model_dir, int tp, std::vector<Row>& rows) {
  if (cuda::device_count() < tp)
    throw std::runtime_error("all-reduce bench needs " + std::to_string(tp) + " GPUs, " +
                             std::to_string(cuda::device_count()) + " present");
  const ModelConfig c = ModelConfig::from_dir(model_dir);
  const int calls = 2 * static_cast<int>(c.num_hidden_layers);  // o_proj + down_proj per layer
  std::vector<std::unique_ptr<Backend>> backends(static_cast<size_t>(tp));
  std::vector<Backend*> raw;
  for (int r = 0; r < tp; ++r) {
    backends[static_cast<size_t>(r)] = make_cuda_backend(r, DType::BF16);
    raw.push_back(backends[static_cast<size_t>(r)].get());
  }
  auto comms = cuda::make_nccl_communicators(raw);
  for (int64_t M : {1, 8, 64, 256}) {
    std::vector<double> per_call(static_cast<size_t>(tp)), per_step(static_cast<size_t>(tp));
    std::vector<std::thread> th;
    std::vector<std::exception_ptr> errs(static_cast<size_t>(tp));
    for (int r = 0; r < tp; ++r) {
      th.emplace_back([&, r] {
        try {
          cuda::set_current_device(r);
          Backend& be = *backends[static_cast<size_t>(r)];
          Communicator& comm = *comms[static_cast<size_t>(r)];
          cudaStream_t st = dynamic_cast<cuda::CudaBackend&>(be).stream();
          Tensor x = be.alloc(DType::BF16, {M, c.hidden_size});
          be.fill_zero(x);
          // Eager: 20 back-to-back calls per timed run, so the events'
          // overhead is spread.
          per_call[static_cast<size_t>(r)] = time_ms(
                                                 st,
                                                 [&](int) {
                                                   for (int i = 0; i < 20; ++i)
                                                     comm.all_reduce_sum(x);
                                                 },
                                                 20, 3) /
                                             20;
          // One step's calls captured into a graph (every rank captures its own).
          be.synchronize();
          cudaGraph_t graph = nullptr;
          cudaGraphExec_t exec = nullptr;
          PAGODA_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < calls; ++i) comm.all_reduce_sum(x);
          PAGODA_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
          PAGODA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
          per_step[static_cast<size_t>(r)] = time_ms(
              st, [&](int) { PAGODA_CUDA_CHECK(cudaGraphLaunch(exec, st)); }, 20, 3);
          cudaGraphExecDestroy(exec);
          cudaGraphDestroy(graph);
          be.free(x);
        } catch (...) {
          errs[static_cast<size_t>(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : th) t.join();
    for (auto& e : errs)
      if (e) std::rethrow_exception(e);
    const double bytes = static_cast<double>(M * c.hidden_size * 2);
    char fig[200], note[200];
    std::snprintf(
        fig, sizeof(fig),
        "%.1f us per call eager (%.0f KiB); %.3f ms for one step's %d calls in a CUDA graph",
        per_call[0] * 1e3, bytes / 1024, per_step[0], calls);
    std::snprintf(note, sizeof(note), "%.1f us per call in the graph; rank 1 %.3f ms per step",
                  per_step[0] * 1e3 / calls, tp > 1 ? per_step[1] : per_step[0]);
    rows.push_back({"NCCL all-reduce bf16 [" + std::to_string(M) + ", " +
                        std::to_string(c.hidden_size) + "], TP=" + std::to_string(tp),
                    per_step[0], fig, note});
  }
}
#else
void bench_allreduce(const std::string&, int, std::vector<Row>&) {
  throw std::runtime_error("all-reduce bench: this build has no NCCL (PAGODA_HAVE_NCCL off)");
}
#endif

}  // namespace pagoda::bench
