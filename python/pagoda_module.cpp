// _pagoda: the pybind11 extension under the `pagoda` Python package
// (python/pagoda/__init__.py holds vLLM's classes: LLM, SamplingParams,
// RequestOutput, CompletionOutput, Logprob). It wraps server/llm.h's
// offline::LLM; requests and outputs cross as JSON text (the shapes of
// offline::make_requests and offline::to_json), parsed and written in C++
// with the GIL released, so other Python threads run while the engine does.
// Errors: offline::LLMError and std::invalid_argument → ValueError (vLLM
// raises ValueError for invalid requests), std::runtime_error (a model that
// does not load) → RuntimeError.
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "server/engine_args.h"
#include "server/llm.h"
#include "server/openai_request.h"
#include "server/prompt_tokenizer.h"

namespace py = pybind11;
using nlohmann::json;

namespace {

template <typename T>
struct ValueOf {
  using type = T;
};
template <typename T>
struct ValueOf<std::optional<T>> {
  using type = T;
};

// The engine arguments vLLM's LLM(...) takes that Pagoda has, by vLLM's
// names (a JSON object; __init__.py refuses the others).
pagoda::EngineArgs engine_args(const json& a) {
  pagoda::EngineArgs e;
  // A value of the wrong type is a ValueError naming the argument (not
  // nlohmann's type_error).
  auto get = [&a](const char* k, auto& field) {
    auto it = a.find(k);
    if (it == a.end() || it->is_null()) return;
    using T = typename ValueOf<std::decay_t<decltype(field)>>::type;  // optional<T>'s T
    const bool ok = std::is_same_v<T, std::string> ? it->is_string()
                    : std::is_same_v<T, bool>      ? it->is_boolean()
                    : std::is_floating_point_v<T>  ? it->is_number()
                    : std::is_unsigned_v<T>        ? it->is_number_unsigned()
                                                   : it->is_number_integer();
    if (!ok)
      throw std::invalid_argument(fmt::format("LLM argument '{}' must be {}, got {}", k,
                                              std::is_same_v<T, std::string> ? "a string"
                                              : std::is_same_v<T, bool>      ? "a bool"
                                              : std::is_floating_point_v<T>  ? "a number"
                                              : std::is_unsigned_v<T> ? "a non-negative integer"
                                                                      : "an integer",
                                              it->dump()));
    field = it->get<T>();
  };
  get("served_model_name", e.served_model_name);
  get("max_model_len", e.max_model_len);
  get("max_num_seqs", e.max_num_seqs);
  get("max_num_batched_tokens", e.max_num_batched_tokens);
  get("long_prefill_token_threshold", e.long_prefill_token_threshold);
  get("swap_space", e.swap_space);
  get("max_logprobs", e.max_logprobs);
  get("preemption_mode", e.preemption_mode);
  get("block_size", e.block_size);
  get("seed", e.seed);
  get("chat_template", e.chat_template);
  get("device", e.device);
  get("dtype", e.dtype);
  get("load_format", e.load_format);
  get("gpu_memory_utilization", e.gpu_memory_utilization);
  get("num_gpu_blocks_override", e.num_gpu_blocks_override);
  get("kv_cache_memory", e.kv_cache_memory);
  get("enforce_eager", e.enforce_eager);
  get("enable_prefix_caching", e.enable_prefix_caching);
  get("disable_log_stats", e.disable_log_stats);
  get("tensor_parallel_size", e.tensor_parallel_size);
  get("quantization", e.quantization);
  return e;
}

class PyLLM {
 public:
  PyLLM(const std::string& model, const std::string& args_json) {
    const json args = json::parse(args_json);
    py::gil_scoped_release release;
    llm_ = std::make_unique<pagoda::offline::LLM>(model, engine_args(args));
  }

  // prompts_json: [request object]; params_json: [SamplingParams fields]
  // (one for all, one per prompt, or none). Returns [RequestOutput JSON].
  std::string generate(const std::string& prompts_json, const std::string& params_json,
                       bool use_tqdm) {
    // Ctrl-C: the engine polls this between steps; with the GIL taken back,
    // Python's SIGINT handler runs and raises KeyboardInterrupt, which is
    // kept (PyErr_Fetch) until the aborted run has unwound, then raised.
    PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
    llm_->set_interrupt_check([&] {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      PyErr_Fetch(&type, &value, &trace);
      return true;
    });
    struct Reset {
      pagoda::offline::LLM& llm;
      ~Reset() { llm.set_interrupt_check({}); }
    } reset{*llm_};
    try {
      return generate_released(prompts_json, params_json, use_tqdm);
    } catch (const pagoda::offline::Interrupted&) {
      PyErr_Restore(type, value, trace);
      throw py::error_already_set();
    }
  }

  // LLM.get_tokenizer(): the model's tokenizer, as the server tokenizes
  // prompts (add_special_tokens: BOS when the tokenizer adds it).
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const {
    return pagoda::encode_prompt(*llm_->serving_model().tokenizer, text, add_special_tokens);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
    const pagoda::Tokenizer& tok = *llm_->serving_model().tokenizer;
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size())
        throw std::invalid_argument(fmt::format("token id {} is out of vocabulary", id));
    return tok.decode(ids, skip_special_tokens);
  }

  int64_t max_model_len() const { return llm_->serving_model().max_model_len; }
  std::string model_dir() const { return llm_->serving_model().model_dir; }

 private:
  std::string generate_released(const std::string& prompts_json, const std::string& params_json,
                                bool use_tqdm) {
    py::gil_scoped_release release;
    std::vector<pagoda::offline::Prompt> prompts;
    // Ordered: the template sees each dict's keys in the script's order.
    for (nlohmann::ordered_json& r : nlohmann::ordered_json::parse(prompts_json))
      prompts.push_back(pagoda::offline::Prompt::from_json(std::move(r)));
    std::vector<pagoda::offline::SamplingParams> params;
    for (json& f : json::parse(params_json)) params.emplace_back(std::move(f));
    std::vector<pagoda::offline::RequestOutput> outs =
        llm_->generate_requests(pagoda::offline::make_requests(prompts, params), use_tqdm);
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& o : outs) arr.push_back(pagoda::offline::to_json(o));
    return arr.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  std::unique_ptr<pagoda::offline::LLM> llm_;
};

}  // namespace

PYBIND11_MODULE(_pagoda, m) {
  // The engine's log lines go to stderr, as the `pagoda` binary's (stdout
  // is the script's own output).
  if (!spdlog::get("pagoda")) spdlog::set_default_logger(spdlog::stderr_color_mt("pagoda"));
  m.doc() =
      "Pagoda's offline engine (use the pagoda package: from pagoda import LLM, SamplingParams)";
  py::register_exception<pagoda::offline::LLMError>(m, "LLMError", PyExc_ValueError);
  // SamplingParams(...)'s checks at construction (vLLM's __post_init__):
  // the engine's field tables, no model, vLLM's defaults for the fields
  // left out (as generate() sends them). ValueError naming the field.
  m.def("check_sampling_params", [](const std::string& fields_json) {
    json fields = json::parse(fields_json);
    pagoda::offline::apply_sampling_params_defaults(fields);
    const auto e = pagoda::check_sampling_fields(fields);
    if (e) throw std::invalid_argument(e->message);
  });
  py::class_<PyLLM>(m, "_LLM")
      .def(py::init<const std::string&, const std::string&>(), py::arg("model"),
           py::arg("engine_args_json"))
      .def("generate", &PyLLM::generate, py::arg("prompts_json"), py::arg("params_json"),
           py::arg("use_tqdm"))
      .def("encode", &PyLLM::encode, py::arg("text"), py::arg("add_special_tokens"))
      .def("decode", &PyLLM::decode, py::arg("ids"), py::arg("skip_special_tokens"))
      .def_property_readonly("max_model_len", &PyLLM::max_model_len)
      .def_property_readonly("model_dir", &PyLLM::model_dir);
}
