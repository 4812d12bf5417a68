// QuantConfig: config.json's `quantization_config` for the weight-only
// quantized checkpoints Pagoda loads, and vLLM's `--quantization` flag
// checked against it.
//
// Supported (field names as AutoGPTQ / AutoAWQ write them, and as vLLM's
// GPTQConfig / AWQConfig read them, vllm/model_executor/layers/quantization/
// gptq.py and awq.py):
//  * quant_method "gptq": bits 4 or 8; group_size 32, 64, 128 or -1 (one
//    group over all input features); desc_act true/false (act-order, with a
//    per-input-feature g_idx); sym true/false.
//  * quant_method "awq": version "gemm" (or absent); bits 4; group_size
//    32, 64, 128 or -1; zero_point true; modules_to_not_convert
//    (null or a list of module-name fragments left in float).
// Everything else (another quant_method, bits 3, AWQ "gemv", a missing or
// mistyped field) is a std::runtime_error naming the file, the field and the
// value.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace pagoda {

enum class QuantMethod { None, GPTQ, AWQ };

const char* quant_method_name(QuantMethod m);  // "none", "gptq", "awq"

struct QuantConfig {
  QuantMethod method = QuantMethod::None;
  int bits = 0;            // 4 or 8 (AWQ: 4)
  int64_t group_size = 0;  // 32/64/128, or -1: one group spanning all input features
  bool desc_act = false;   // GPTQ act-order: g_idx is a permutation of groups
  bool sym = true;         // GPTQ: symmetric (zero = 2^(bits-1), stored anyway)
  bool zero_point = true;  // AWQ: zero points stored in qzeros (false is rejected)
  std::vector<std::string> modules_to_not_convert;  // AWQ: linears left in float

  bool enabled() const { return method != QuantMethod::None; }
  // Values packed into one int32: 32 / bits.
  int pack_factor() const { return 32 / bits; }
  // "gptq 4-bit, group 128, sym, desc_act" (for logs).
  std::string describe() const;
  // True when the linear `module` (e.g. "model.layers.0.mlp.down_proj")
  // stays in float (AWQ's modules_to_not_convert: substring match, as
  // vLLM's is_layer_skipped_awq).
  bool skips(const std::string& module) const;
};

// Parses the `quantization_config` object of `source` (a config.json path,
// named in errors). Throws std::runtime_error as described above.
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& source);

// vLLM's --quantization against the checkpoint (vllm/config ModelConfig.
// _verify_quantization with the Marlin overrides of gptq_marlin.py and
// awq_marlin.py): "" (absent) takes the checkpoint's method; gptq and
// gptq_marlin name a GPTQ checkpoint, awq and awq_marlin an AWQ one (Pagoda
// has one dequantizing path for each pair on CPU, and no int4 kernel yet on
// CUDA). gptq_marlin / awq_marlin also need a Marlin-compatible checkpoint
// (4 or 8 bits, group -1/32/64/128; GPTQ sym true; AWQ 4 bits). Throws
// std::runtime_error naming both for any other flag value, a flag on a float
// checkpoint, a flag naming the other method, or a Marlin flag on an
// incompatible checkpoint.
void check_quantization_flag(const QuantConfig& checkpoint, const std::string& flag,
                             const std::string& config_path);

// The flag values accepted (as vLLM spells them).
const std::vector<std::string>& quantization_flag_values();

}  // namespace pagoda
