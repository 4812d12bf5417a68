// CudaBackend: dispatch and shape checks of the element-wise and norm ops of
// the wider model family (BackendOp: GELU(tanh) gating, soft-capping,
// scaling, residual add, ungated activations, LayerNorm). The kernels are in
// gpu/elementwise_ext.cu; the formulas are engine/cpu's (backend.h).
#include <stdexcept>
#include <string>

#include "gpu/cuda_backend_impl.h"
#include "gpu/kernels.h"

namespace pagoda::cuda {
namespace {

[[noreturn]] void bad(const std::string& op, const std::string& msg) {
  throw std::invalid_argument("cuda backend: " + op + ": " + msg);
}

// x must be an allocated CUDA tensor of F32 or `act` (softcap runs on F32
// logits as well as on activations).
void check_float(const Tensor& t, DType act, const char* op, const char* arg) {
  if (t.device != Device::CUDA || (t.data == nullptr && t.numel() != 0))
    bad(op, std::string(arg) + " is not an allocated CUDA tensor");
  if (t.dtype != DType::F32 && t.dtype != act)
    bad(op, std::string(arg) + " has dtype " + dtype_name(t.dtype) + ", expected F32 or " +
                dtype_name(act));
}

}  // namespace

void CudaBackend::gated_act(const Tensor& gate_up, GatedActivation act, Tensor& out) {
  if (act == GatedActivation::SiLU) return silu_mul(gate_up, out);
  check_act(gate_up, "gated_act", "gate_up");
  check_act(out, "gated_act", "out");
  const int64_t I = out.cols();
  if (gate_up.cols() != 2 * I || gate_up.rows() != out.rows())
    bad("gated_act", "shapes gate_up " + gate_up.shape_str() + " out " + out.shape_str());
  launch_gelu_tanh_mul(act_, gate_up.data, out.data, out.rows(), I, stream_);
}

void CudaBackend::softcap(Tensor& x, float cap) {
  check_float(x, act_, "softcap", "x");
  if (!(cap > 0.f)) bad("softcap", "cap must be positive, got " + std::to_string(cap));
  launch_softcap(x.dtype, x.data, x.numel(), cap, stream_);
}

void CudaBackend::scale(Tensor& x, float s) {
  check_float(x, act_, "scale", "x");
  launch_scale(x.dtype, x.data, x.numel(), s, stream_);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                             Tensor& out) {
  check_act(x, "layer_norm", "x");
  check_act(w, "layer_norm", "w");
  check_act(b, "layer_norm", "b");
  check_act(out, "layer_norm", "out");
  if (w.numel() != x.cols() || b.numel() != x.cols() || out.rows() != x.rows() ||
      out.cols() != x.cols())
    bad("layer_norm", "shapes x " + x.shape_str() + " w " + w.shape_str() + " b " + b.shape_str() +
                          " out " + out.shape_str());
  launch_layer_norm(act_, x.data, nullptr, w.data, b.data, eps, out.data, x.rows(), x.cols(),
                    stream_);
}

void CudaBackend::add_layer_norm(const Tensor& x, Tensor& residual, const Tensor& w,
                                 const Tensor& b, float eps, Tensor& out) {
  check_act(x, "add_layer_norm", "x");
  check_act(residual, "add_layer_norm", "residual");
  check_act(w, "add_layer_norm", "w");
  check_act(b, "add_layer_norm", "b");
  check_act(out, "add_layer_norm", "out");
  if (w.numel() != x.cols() || b.numel() != x.cols() || residual.rows() != x.rows() ||
      residual.cols() != x.cols() || out.rows() != x.rows() || out.cols() != x.cols())
    bad("add_layer_norm", "shapes x " + x.shape_str() + " residual " + residual.shape_str() +
                              " w " + w.shape_str() + " b " + b.shape_str() + " out " +
                              out.shape_str());
  launch_layer_norm(act_, x.data, residual.data, w.data, b.data, eps, out.data, x.rows(), x.cols(),
                    stream_);
}

void CudaBackend::add(const Tensor& x, Tensor& y) {
  check_act(x, "add", "x");
  check_act(y, "add", "y");
  if (x.shape != y.shape || x.ndim != y.ndim)
    bad("add", "x " + x.shape_str() + " and y " + y.shape_str() + " differ");
  launch_add(act_, x.data, y.data, x.numel(), stream_);
}

void CudaBackend::activation(const Tensor& x, Activation act, Tensor& out) {
  check_act(x, "activation", "x");
  check_act(out, "activation", "out");
  if (x.shape != out.shape || x.ndim != out.ndim)
    bad("activation", "x " + x.shape_str() + " and out " + out.shape_str() + " differ");
  launch_gelu(act_, x.data, out.data, x.numel(), act == Activation::GeluTanh, stream_);
}

}  // namespace pagoda::cuda
