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
  }
  return "unknown op";
}

}  // namespace pagoda
