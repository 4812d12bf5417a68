#include "server/engine_args.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/model/model_executor.h"
#include "server/chat_renderer.h"
#include "server/cli_checks.h"

namespace pagoda {

namespace fs = std::filesystem;

void add_engine_flags(CLI::App& app, EngineArgs& a) {
  app.add_option("--model", a.model,
                 "Hugging Face model directory (same as the positional MODEL_DIR)");
  app.add_option("--served-model-name", a.served_model_name,
                 "Model name in the API (default: MODEL_DIR)");
  app.add_option("--max-model-len", a.max_model_len,
                 "Context length (default: config max_position_embeddings)");
  app.add_option("--max-num-seqs", a.max_num_seqs,
                 "Most sequences per step (default: vLLM's for the device; 1024 on an H200, 256 "
                 "on smaller GPUs, 128 serving / 256 offline on the CPU)");
  app.add_option("--long-prefill-token-threshold", a.long_prefill_token_threshold,
                 "Most prompt tokens one request prefills per step (vLLM's flag; 0: off, only "
                 "--max-num-batched-tokens caps it): bounds how long a step carrying a prefill "
                 "chunk stalls the decodes batched with it");
  app.add_option("--max-prefill-tokens-with-decodes", a.max_prefill_tokens_with_decodes,
                 "Most prompt tokens a step that also decodes takes, all requests together "
                 "(Pagoda's own; 0: off, the default): a prompt arriving while others stream "
                 "goes in chunks so their next tokens are not held up; steps without decodes "
                 "keep --max-num-batched-tokens. Under steady load it also caps prompt "
                 "throughput at this many tokens a step")
      ->check(cli::int_in(0, cli::kInt64Max));
  app.add_option("--max-num-batched-tokens", a.max_num_batched_tokens,
                 "Most tokens per step (default: vLLM's for the device; 8192 serving / 16384 "
                 "offline on an H200, 2048 / 8192 on smaller GPUs, 2048 / 4096 on the CPU)");
  app.add_option("--block-size", a.block_size, "Tokens per KV-cache block");
  app.add_option("--seed", a.seed,
                 "Random seed: unseeded requests' sampling (vLLM's --seed), dummy weights")
      ->check(cli::int_in(0, static_cast<int64_t>(kMaxEngineSeed),
                          "numpy's seed range; vLLM seeds np.random with it"));
  app.add_option("--chat-template", a.chat_template,
                 "Chat template: a Jinja file (or inline template)");
  app.add_option("--device", a.device, "auto | cpu | cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--dtype", a.dtype, "auto | bfloat16 | float16 | float32")
      ->check(CLI::IsMember(
          {"auto", "bfloat16", "float16", "float32", "half", "float", "bf16", "fp16", "fp32"}));
  app.add_option("--load-format", a.load_format, "auto | safetensors | dummy")
      ->check(CLI::IsMember({"auto", "safetensors", "dummy"}));
  app.add_option("--gpu-memory-utilization", a.gpu_memory_utilization,
                 "Fraction of GPU memory to use, in [0, 1]");
  app.add_option("--num-gpu-blocks-override", a.num_gpu_blocks_override,
                 "Exactly this many KV blocks");
  app.add_option("--kv-cache-memory", a.kv_cache_memory,
                 "CPU KV-cache budget in bytes (256MiB, 1GiB, ...)")
      ->transform(CLI::AsSizeValue(true));
  app.add_flag("--enforce-eager", a.enforce_eager, "No CUDA graphs");
  app.add_flag(
      "--enable-prefix-caching,!--no-enable-prefix-caching", a.enable_prefix_caching,
      "Reuse the KV blocks of prompt prefixes seen before (automatic prefix caching; default on)");
  app.add_option("--swap-space", a.swap_space,
                 "GiB of host memory for preempted sequences' KV blocks (preemption by swap; "
                 "default 4)");
  app.add_option("--preemption-mode", a.preemption_mode,
                 "recompute | swap: how a preempted sequence's KV cache is freed (default: "
                 "recompute for a request with one running sequence, swap for several, as vLLM)")
      ->check(CLI::IsMember({"recompute", "swap"}));
  app.add_option("--max-logprobs", a.max_logprobs,
                 "Most top logprobs a request may ask for (logprobs, top_logprobs, "
                 "prompt_logprobs); beam search asks for 2 (or 1 + its eos ids) x the beam "
                 "width (default 20, at most 20)");
  app.add_flag("--disable-log-stats", a.disable_log_stats, "No periodic stats log line");
  app.add_flag("--enable-log-requests", a.enable_log_requests,
               "Log each finished request's engine-side TTFT and end-to-end latency");
  app.add_option("--tensor-parallel-size", a.tensor_parallel_size,
                 "Tensor-parallel ranks (alias -tp): CPU threads, or one GPU each over NCCL");
  app.add_option(
         "-q,--quantization", a.quantization,
         "gptq | gptq_marlin | awq | awq_marlin: must match config.json's quantization_config "
         "(which is used without the flag too)")
      ->check(CLI::IsMember(quantization_flag_values()));
  app.callback([&a] {
    try {
      apply_model_flag(a);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--model", e.what());
    }
    try {
      validate_engine_args(a);
    } catch (const EngineArgError& e) {
      std::string flag = "--" + e.arg;
      std::replace(flag.begin(), flag.end(), '_', '-');
      throw CLI::ValidationError(flag, e.what());
    }
  });
}

uint64_t total_cpu_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string check_swap_space(const EngineArgs& a, uint64_t total_cpu_memory) {
  if (a.preemption_mode == "recompute" || total_cpu_memory == 0) return "";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const double total = static_cast<double>(total_cpu_memory);
  const double swap = a.swap_space * kGiB;
  const std::string share = fmt::format(
      "{:.2f} GiB out of the {:.2f} GiB total CPU memory is allocated for the swap space.",
      swap / kGiB, total / kGiB);
  if (swap > 0.7 * total)
    throw EngineArgError("swap_space",
                         fmt::format("Too large swap space. {} (at most 70% of it)", share));
  if (swap > 0.4 * total) return "Possibly too large swap space. " + share;
  return "";
}

void validate_engine_args(const EngineArgs& a, uint64_t total_cpu_memory) {
  auto at_least = [](const char* name, auto v, auto lo) {
    if (!(v >= lo))
      throw EngineArgError(name, fmt::format("{} must be >= {}, got {}", name, lo, v));
  };
  at_least("max_model_len", a.max_model_len, 0);
  if (a.max_num_seqs) at_least("max_num_seqs", *a.max_num_seqs, 1);
  if (a.max_num_batched_tokens) at_least("max_num_batched_tokens", *a.max_num_batched_tokens, 1);
  at_least("long_prefill_token_threshold", a.long_prefill_token_threshold, 0);
  at_least("max_prefill_tokens_with_decodes", a.max_prefill_tokens_with_decodes, 0);
  at_least("block_size", a.block_size, 1);
  at_least("num_gpu_blocks_override", a.num_gpu_blocks_override, 0);
  at_least("tensor_parallel_size", a.tensor_parallel_size, 1);
  if (a.seed > kMaxEngineSeed)
    throw EngineArgError("seed", fmt::format("seed must be in [0, {}] (numpy's seed range; vLLM "
                                             "seeds np.random with it), got {}",
                                             kMaxEngineSeed, a.seed));
  if (!std::isfinite(a.swap_space) || a.swap_space < 0)
    throw EngineArgError(
        "swap_space",
        fmt::format("swap_space must be a finite number >= 0 (GiB), got {}", a.swap_space));
  check_swap_space(a, total_cpu_memory);
  if (a.max_logprobs < 0 || a.max_logprobs > kMaxLogprobs)
    throw EngineArgError(
        "max_logprobs",
        fmt::format("max_logprobs must be in [0, {}], got {} (vLLM's -1, no cap, and values "
                    "above {} are not supported: the samplers compute at most {} top logprobs)",
                    kMaxLogprobs, a.max_logprobs, kMaxLogprobs, kMaxLogprobs));
  if (!(a.gpu_memory_utilization >= 0 && a.gpu_memory_utilization <= 1))
    throw EngineArgError(
        "gpu_memory_utilization",
        fmt::format("gpu_memory_utilization must be in [0, 1], got {}", a.gpu_memory_utilization));
  auto one_of = [](const char* name, const std::string& v,
                   std::initializer_list<const char*> values) {
    for (const char* ok : values)
      if (v == ok) return;
    std::string list;
    for (const char* ok : values) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", ok);
    throw EngineArgError(name, fmt::format("{} must be one of {}, got '{}'", name, list, v));
  };
  one_of("device", a.device, {"auto", "cpu", "cuda"});
  one_of("dtype", a.dtype,
         {"auto", "bfloat16", "float16", "float32", "half", "float", "bf16", "fp16", "fp32"});
  one_of("load_format", a.load_format, {"auto", "safetensors", "dummy"});
  if (!a.preemption_mode.empty())
    one_of("preemption_mode", a.preemption_mode, {"recompute", "swap"});
}

void apply_model_flag(EngineArgs& a) {
  if (a.model.empty()) return;
  if (!a.model_dir.empty() && a.model_dir != a.model)
    throw std::invalid_argument(
        fmt::format("the positional model '{}' and --model '{}' differ; give the model once",
                    a.model_dir, a.model));
  a.model_dir = a.model;
}

std::vector<std::string> expand_flag_aliases(
    int argc, const char* const* argv, const std::function<bool(const std::string&)>& takes_value) {
  std::vector<std::string> out;
  bool rest = false;
  bool is_value = false;  // this token is the previous option's value
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    if (!rest && !is_value && s == "--") rest = true;
    if (!rest && !is_value) {
      if (s == "-tp")
        s = "--tensor-parallel-size";
      else if (s.rfind("-tp=", 0) == 0)
        s = "--tensor-parallel-size=" + s.substr(4);
    }
    is_value = !rest && !is_value && i > 0 && s.size() > 1 && s[0] == '-' &&
               s.find('=') == std::string::npos && takes_value(s);
    out.push_back(std::move(s));
  }
  return out;
}

std::function<bool(const std::string&)> cli_takes_value(const CLI::App& app) {
  return [&app](const std::string& name) {
    std::vector<const CLI::App*> apps = {&app};
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      apps.push_back(sub);
    for (const CLI::App* a : apps) {
      for (const CLI::Option* o : a->get_options()) {
        if (o->check_name(name)) return o->get_expected_min() > 0;
      }
    }
    return false;
  };
}

namespace {

std::string canonical_dtype(const std::string& d) {
  if (d == "half" || d == "fp16") return "float16";
  if (d == "bf16") return "bfloat16";
  if (d == "float" || d == "fp32") return "float32";
  return d;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

std::string chat_template_source(const EngineArgs& a, const TokenizerConfig& tc) {
  if (a.chat_template.empty()) return tc.chat_template;
  std::error_code ec;
  if (fs::is_regular_file(a.chat_template, ec)) {
    std::string t = read_file(a.chat_template);
    if (t.find_first_not_of(" \t\r\n") == std::string::npos)
      throw std::runtime_error(fmt::format("--chat-template: file '{}' is empty", a.chat_template));
    return t;
  }
  // vLLM accepts the template itself in place of a path.
  if (a.chat_template.find("{{") != std::string::npos ||
      a.chat_template.find("{%") != std::string::npos)
    return a.chat_template;
  throw std::runtime_error(fmt::format("--chat-template: cannot open file '{}'", a.chat_template));
}

}  // namespace

std::string model_dir_problem(const std::string& given) {
  std::error_code ec;
  if (fs::exists(given, ec))
    return fmt::format(
        "model directory '{}' is not a directory (a model is a directory holding "
        "config.json and the weights)",
        given);
  return fmt::format("model directory '{}' does not exist", given);
}

std::string resolve_model_dir(const std::string& given) {
  if (!given.empty()) {
    std::error_code ec;
    if (!fs::is_directory(given, ec)) throw std::runtime_error(model_dir_problem(given));
    return given;
  }
  const fs::path rel = "models/stories260K";
  std::vector<fs::path> candidates = {fs::current_path() / rel};
  fs::path exe = executable_dir();
  if (!exe.empty()) {
    candidates.push_back(exe / rel);
    candidates.push_back(exe.parent_path() / rel);
  }
  candidates.push_back(fs::path(PAGODA_SOURCE_DIR) / rel);
  std::string tried;
  for (const fs::path& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c / "config.json", ec)) return c.lexically_normal().string();
    tried += "\n  " + c.string();
  }
  throw std::runtime_error(
      "no MODEL_DIR given and the bundled models/stories260K was not found; looked in:" + tried);
}

LoadedModel load_model(const EngineArgs& a, UsageContext usage,
                       const GenerationConfig* generation_config) {
  LoadedModel m;
  m.config = ModelConfig::from_dir(a.model_dir);
  check_quantization_flag(
      m.config.quantization, a.quantization,
      (fs::path(a.model_dir) / "config.json").string());  // before the slow loads
  if (a.quantization.find("marlin") != std::string::npos)
    spdlog::warn(
        "--quantization {}: Marlin kernels are not implemented yet; the quantized linears "
        "take the same dequantized path as '{}' (docs/QUANTIZATION.md)",
        a.quantization, a.quantization.substr(0, a.quantization.find('_')));
  validate_tensor_parallel(m.config, a.tensor_parallel_size);  // before the slow loads
  m.generation_config =
      generation_config ? *generation_config : GenerationConfig::from_dir(a.model_dir);
  m.tokenizer_config = TokenizerConfig::from_dir(a.model_dir);
  m.tokenizer = load_tokenizer(a.model_dir);
  m.served_model_name = a.served_model_name.empty() ? a.model_dir : a.served_model_name;
  m.max_logprobs = a.max_logprobs;

  const int64_t derived = derived_max_model_len(m.config);
  m.max_model_len = a.max_model_len > 0 ? a.max_model_len : derived;
  if (m.max_model_len > derived)
    throw std::runtime_error(fmt::format(
        "User-specified max_model_len ({}) is greater than the derived max_model_len ({}: "
        "max_position_embeddings={}{} in {}/config.json)",
        m.max_model_len, derived, m.config.max_position_embeddings,
        m.config.rope_scaling.rope_type.empty()
            ? std::string()
            : fmt::format(" with {} rope scaling", m.config.rope_scaling.rope_type),
        a.model_dir));

  std::string tmpl = chat_template_source(a, m.tokenizer_config);
  if (!tmpl.empty()) {
    try {
      m.chat_template = std::make_shared<ChatTemplate>(tmpl);
    } catch (const ChatTemplateError& e) {
      throw std::runtime_error(fmt::format("chat template does not parse: {}", e.what()));
    }
  }

  const TargetDevice target = resolve_target_device(a.device);
  const BatchLimits limits = resolve_batch_limits(a.max_num_seqs, a.max_num_batched_tokens, usage,
                                                  target, a.tensor_parallel_size, m.max_model_len);
  const std::string device_words = target.cuda ? target.name : std::string("the CPU");
  const char* usage_words = usage == UsageContext::kLlmClass ? "offline" : "serving";
  const auto origin = [&](bool defaulted) {
    return defaulted ? fmt::format("vLLM's default for {}, {}", device_words, usage_words)
                     : std::string("given");
  };
  spdlog::info("max_num_seqs {} ({}), max_num_batched_tokens {} ({})", limits.max_num_seqs,
               origin(limits.seqs_defaulted), limits.max_num_batched_tokens,
               origin(limits.tokens_defaulted));

  ExecutorOptions eo;
  eo.model_dir = a.model_dir;
  eo.device = a.device;
  eo.dtype = canonical_dtype(a.dtype);
  eo.load_format = a.load_format;
  eo.seed = a.seed;
  eo.block_size = a.block_size;
  eo.max_num_seqs = limits.max_num_seqs;
  eo.max_num_batched_tokens = limits.max_num_batched_tokens;
  eo.max_model_len = m.max_model_len;
  eo.num_gpu_blocks_override = a.num_gpu_blocks_override;
  eo.kv_cache_memory_bytes = a.kv_cache_memory;
  const std::optional<PreemptionMode> preemption_mode = parse_preemption_mode(a.preemption_mode);
  // Checked before (validate_engine_args) by every front end; again here, so
  // that the size below is in range for any caller, and for the warning.
  if (!(a.swap_space >= 0.0))  // NaN fails too
    throw std::runtime_error(fmt::format("--swap-space must be >= 0 GiB (got {})", a.swap_space));
  if (const std::string warning = check_swap_space(a, total_cpu_memory_bytes()); !warning.empty())
    spdlog::warn("{}", warning);
  // No swap space where nothing is ever swapped.
  eo.swap_space_bytes =
      preemption_mode == PreemptionMode::kRecompute
          ? 0
          : static_cast<size_t>(a.swap_space * static_cast<double>(size_t{1} << 30));
  eo.gpu_memory_utilization = a.gpu_memory_utilization;
  eo.enforce_eager = a.enforce_eager;
  eo.tensor_parallel_size = static_cast<int>(a.tensor_parallel_size);
  eo.quantization = a.quantization;
  std::unique_ptr<ModelExecutor> executor = make_model_executor(m.config, eo);
  m.backend = executor->describe();

  EngineConfig ec;
  ec.max_num_seqs = limits.max_num_seqs;
  ec.max_num_batched_tokens = limits.max_num_batched_tokens;
  ec.long_prefill_token_threshold = a.long_prefill_token_threshold;
  ec.max_prefill_tokens_with_decodes = a.max_prefill_tokens_with_decodes;
  ec.max_model_len = m.max_model_len;
  ec.log_stats = !a.disable_log_stats;
  ec.log_requests = a.enable_log_requests;
  ec.max_num_waiting_requests = a.max_num_waiting_requests;
  ec.enable_prefix_caching = a.enable_prefix_caching;
  ec.preemption_mode = preemption_mode;
  ec.seed = a.seed;  // the engine's sampling seed (vLLM's --seed), besides the dummy weights'
  ec.eos_token_ids = m.generation_config.eos_token_ids;
  if (ec.eos_token_ids.empty())
    for (int64_t id : m.config.eos_token_ids) ec.eos_token_ids.push_back(static_cast<int32_t>(id));
  if (ec.eos_token_ids.empty() && m.tokenizer->eos_token_id())
    ec.eos_token_ids.push_back(*m.tokenizer->eos_token_id());
  m.engine = std::make_unique<Engine>(ec, std::move(executor), m.tokenizer);
  return m;
}

ServingModel make_serving_model(const LoadedModel& m, const std::string& model_dir) {
  ServingModel s;
  s.served_model_name = m.served_model_name;
  s.model_dir = model_dir;
  s.max_model_len = m.max_model_len;
  s.max_logprobs = m.max_logprobs;
  s.tokenizer = m.tokenizer;
  s.model_vocab_size = m.config.vocab_size;
  s.generation_config = m.generation_config;
  s.has_chat_template = m.chat_template != nullptr;
  s.template_content_format =
      resolve_chat_content_format(ChatContentFormat::kAuto, m.chat_template.get());
  s.chat_renderer = make_chat_renderer(m.chat_template, m.tokenizer_config.bos_token,
                                       m.tokenizer_config.eos_token);
  return s;
}

}  // namespace pagoda
