// Names of the optional Backend ops (engine/model/backend.h), for the
// model's refusal to load on a backend that lacks one.
#include "engine/model/backend.h"

namespace pagoda {

const char* backend_op_name(BackendOp op) {
  switch (op) {
    case BackendOp::AttentionSlidingWindow:
      return "sliding-window attention";
    case BackendOp::AttentionSoftcap:
      return "attention logit soft-capping";
    case BackendOp::HeadRmsNorm:
      return "per-head q/k RMSNorm";
    case BackendOp::GeluTanhMul:
      return "GELU(tanh)-gated MLP";
    case BackendOp::Softcap:
      return "final logit soft-capping";
    case BackendOp::Scale:
      return "embedding scaling";
    case BackendOp::Moe:
      return "mixture-of-experts MLP";
    case BackendOp::LayerNorm:
      return "LayerNorm";
    case BackendOp::Activation:
      return "GELU MLP";
    case BackendOp::Add:
      return "parallel-residual add";
    case BackendOp::PartialRotary:
      return "partial or no rotary embedding";
    case BackendOp::InterleavedRotary:
      return "interleaved (GPT-J) rotary embedding";
    case BackendOp::Alibi:
      return "ALiBi attention";
  }
  return "unknown op";
}

}  // namespace pagoda
