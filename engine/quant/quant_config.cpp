// quantization_config parsing and the --quantization check (see quant_config.h).
#include "engine/quant/quant_config.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/model/config_reader.h"

namespace pagoda {
namespace {

using json = nlohmann::json;

int64_t check_group_size(const ConfigReader& r) {
  const int64_t g = r.get_int("group_size", std::nullopt);
  if (g != -1 && g != 32 && g != 64 && g != 128)
    r.fail("group_size", std::to_string(g) + " is not supported (supported: 32, 64, 128, -1)");
  return g;
}

}  // namespace

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::GPTQ:
      return "gptq";
    case QuantMethod::AWQ:
      return "awq";
    case QuantMethod::None:
      break;
  }
  return "none";
}

std::string QuantConfig::describe() const {
  if (!enabled()) return "none";
  std::string s = std::string(quant_method_name(method)) + " " + std::to_string(bits) +
                  "-bit, group " +
                  (group_size < 0 ? std::string("-1 (per channel)") : std::to_string(group_size));
  if (method == QuantMethod::GPTQ)
    s += std::string(sym ? ", sym" : ", asym") + (desc_act ? ", desc_act" : "");
  else
    s += ", zero points";
  return s;
}

bool QuantConfig::skips(const std::string& module) const {
  for (const std::string& m : modules_to_not_convert)
    if (module.find(m) != std::string::npos) return true;
  return false;
}

QuantConfig parse_quant_config(const json& q, const std::string& source) {
  QuantConfig c;
  if (q.is_null()) return c;
  if (!q.is_object())
    throw std::runtime_error("config " + source +
                             ": field 'quantization_config': must be an object, got " + q.dump());
  const ConfigReader r{q, source, "quantization_config."};
  if (!r.has("quant_method")) r.fail("quant_method", "missing (required: gptq or awq)");
  const std::string method = r.get_string("quant_method", "");
  if (method == "gptq") {
    c.method = QuantMethod::GPTQ;
    c.bits = static_cast<int>(r.get_int("bits", std::nullopt));
    if (c.bits != 4 && c.bits != 8)
      r.fail("bits", std::to_string(c.bits) + " is not supported for gptq (supported: 4, 8)");
    c.group_size = check_group_size(r);
    c.desc_act = r.get_bool("desc_act", false);
    c.sym = r.get_bool("sym", true);
    const std::string fmt = r.get_string("checkpoint_format", "gptq");
    if (fmt != "gptq")
      r.fail("checkpoint_format",
             "'" + fmt + "' is not supported (supported: gptq, the AutoGPTQ layout)");
  } else if (method == "awq") {
    c.method = QuantMethod::AWQ;
    const std::string version = r.get_string("version", "gemm");
    if (version != "gemm")
      r.fail("version", "'" + version + "' is not supported (supported: gemm)");
    c.bits = static_cast<int>(
        r.get_int(r.has("w_bit") && !r.has("bits") ? "w_bit" : "bits", std::nullopt));
    if (c.bits != 4)
      r.fail("bits", std::to_string(c.bits) + " is not supported for awq (supported: 4)");
    if (r.has("q_group_size") && !r.has("group_size")) {
      c.group_size = r.get_int("q_group_size", std::nullopt);
      if (c.group_size != -1 && c.group_size != 32 && c.group_size != 64 && c.group_size != 128)
        r.fail("q_group_size",
               std::to_string(c.group_size) + " is not supported (supported: 32, 64, 128, -1)");
    } else {
      c.group_size = check_group_size(r);
    }
    c.zero_point = r.get_bool("zero_point", true);
    if (!c.zero_point)
      r.fail("zero_point", "false is not supported (AWQ GEMM checkpoints store zero points)");
    if (r.has("modules_to_not_convert")) {
      const json& m = q["modules_to_not_convert"];
      if (!m.is_array())
        r.fail("modules_to_not_convert", "must be null or a list of strings, got " + m.dump());
      for (const json& s : m) {
        if (!s.is_string())
          r.fail("modules_to_not_convert", "must be a list of strings, got " + m.dump());
        c.modules_to_not_convert.push_back(s.get<std::string>());
      }
    }
  } else {
    r.fail("quant_method", "'" + method + "' is not supported (supported: gptq, awq)");
  }
  return c;
}

const std::vector<std::string>& quantization_flag_values() {
  static const std::vector<std::string> v = {"gptq", "gptq_marlin", "awq", "awq_marlin"};
  return v;
}

void check_quantization_flag(const QuantConfig& ck, const std::string& flag,
                             const std::string& config_path) {
  if (flag.empty()) return;
  QuantMethod want;
  if (flag == "gptq" || flag == "gptq_marlin")
    want = QuantMethod::GPTQ;
  else if (flag == "awq" || flag == "awq_marlin")
    want = QuantMethod::AWQ;
  else
    throw std::runtime_error("--quantization '" + flag +
                             "' is not supported (supported: gptq, gptq_marlin, awq, awq_marlin)");
  if (!ck.enabled())
    throw std::runtime_error("--quantization " + flag + " was given but " + config_path +
                             " has no quantization_config (the checkpoint is not quantized)");
  if (ck.method != want)
    throw std::runtime_error(
        "Quantization method specified in the model config (" +
        std::string(quant_method_name(ck.method)) + " in " + config_path +
        ") does not match the quantization method specified in the `quantization` argument (" +
        flag + ")");
  const bool marlin = flag == "gptq_marlin" || flag == "awq_marlin";
  if (marlin && ck.method == QuantMethod::GPTQ && !ck.sym)
    throw std::runtime_error(
        "--quantization " + flag + ": the checkpoint (" + ck.describe() + ", " + config_path +
        ") is not Marlin-compatible (gptq_marlin needs sym true); use --quantization gptq");
}

}  // namespace pagoda
