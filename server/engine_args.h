// EngineArgs: the engine/model flags `pagoda serve` and `pagoda generate`
// share, with vLLM's names and defaults (vllm/engine/arg_utils.py), and the
// loading of everything they describe (config, tokenizer, chat template,
// model executor, Engine).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/engine.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/batch_defaults.h"
#include "server/serving_model.h"

namespace CLI {
class App;
}

namespace pagoda {

struct EngineArgs {
  std::string model_dir;  // resolved by resolve_model_dir
  std::string model;      // --model (vLLM's flag); merged into model_dir by apply_model_flag
  std::string served_model_name;  // "" → model_dir as given
  int64_t max_model_len = 0;      // 0 → config.max_position_embeddings
  // Unset: vLLM's default for the device and the front end
  // (server/batch_defaults.h: 1024 sequences on an H200), resolved by
  // load_model.
  std::optional<int64_t> max_num_seqs;
  std::optional<int64_t> max_num_batched_tokens;
  int64_t long_prefill_token_threshold = 0;  // vLLM's flag; 0 = off
  // --max-prefill-tokens-with-decodes (SchedulerConfig; Pagoda's own):
  // 0 = off (the default: steps schedule as vLLM's do).
  int64_t max_prefill_tokens_with_decodes = 0;
  int64_t block_size = 16;
  uint64_t seed = 0;
  std::string chat_template;  // file path or inline Jinja ("" → tokenizer_config's)
  std::string device = "auto";
  std::string dtype = "auto";
  std::string load_format = "auto";
  double gpu_memory_utilization = 0.9;
  int64_t num_gpu_blocks_override = 0;
  uint64_t kv_cache_memory = 0;  // CPU KV budget, bytes (0 → backend default)
  bool enforce_eager = false;
  bool enable_prefix_caching = true;  // --[no-]enable-prefix-caching (vLLM v1's default)
  // --swap-space: GiB of host memory for swapped-out KV blocks, for the
  // engine (vLLM's default 4); not allocated with --preemption-mode recompute.
  double swap_space = 4.0;
  // --preemption-mode: "recompute" | "swap" | "" (vLLM's default rule:
  // recompute for one running sequence per request, swap for several).
  std::string preemption_mode;
  bool disable_log_stats = false;
  bool enable_log_requests = false;      // a log line per finished request with its timings
  int64_t tensor_parallel_size = 1;      // --tensor-parallel-size / -tp (vLLM's name)
  int64_t max_num_waiting_requests = 0;  // serve's --max-num-waiting-requests (0 = no bound)
  std::string quantization;  // --quantization / -q: "" or gptq|gptq_marlin|awq|awq_marlin
  // --max-logprobs (vLLM's, default 20): the most top logprobs a request may
  // ask for, and so the beam width (ServingModel::max_logprobs). In [0, 20]:
  // the samplers compute at most kMaxLogprobs.
  int64_t max_logprobs = kMaxLogprobs;
};

// The largest --seed: vLLM seeds Python's, numpy's and torch's generators
// with it (Platform.seed_everything), and np.random.seed refuses anything
// outside [0, 2**32 - 1], so vLLM fails at startup on the rest.
inline constexpr uint64_t kMaxEngineSeed = 4'294'967'295;

// Registers the shared flags on a CLI11 (sub)command, among them --model
// (vLLM accepts it beside the positional model), and a callback on `app`
// that runs apply_model_flag after parsing (its error becomes a CLI11
// ValidationError: "--model: ...", exit code 105).
void add_engine_flags(CLI::App& app, EngineArgs& args);

// The machine's physical memory in bytes (psutil's virtual_memory().total,
// what vLLM's get_cpu_memory reads).
uint64_t total_cpu_memory_bytes();

// The engine arguments' ranges, checked once for every front end (the CLI's
// flags, the Python module's LLM(...) keywords, offline::LLM): counts >= 1
// (max_num_seqs, max_num_batched_tokens, block_size, tensor_parallel_size),
// >= 0 (max_model_len, num_gpu_blocks_override, swap_space, finite),
// seed <= kMaxEngineSeed, gpu_memory_utilization in [0, 1], max_logprobs in
// [0, kMaxLogprobs], device / dtype / load_format /
// preemption_mode among their values, swap_space within the machine's
// memory (check_swap_space). Throws EngineArgError naming the
// argument by vLLM's name ("max_num_seqs must be >= 1, got 0").
struct EngineArgError : std::invalid_argument {
  EngineArgError(std::string arg_name, const std::string& message)
      : std::invalid_argument(message), arg(std::move(arg_name)) {}
  std::string arg;  // vLLM's name: "max_num_seqs" (the flag: --max-num-seqs)
};
// total_cpu_memory: the machine's memory in bytes, for check_swap_space.
void validate_engine_args(const EngineArgs& args,
                          uint64_t total_cpu_memory = total_cpu_memory_bytes());

// vLLM's CacheConfig.verify_with_parallel_config: the swap space against the
// machine's memory. Above 70% of total_cpu_memory, EngineArgError
// (swap_space) "Too large swap space. X GiB out of the Y GiB total CPU
// memory is allocated for the swap space."; above 40%, returns the warning
// ("Possibly too large swap space. ...", which load_model logs); else "".
// Pagoda's swap space is the whole engine's (its tensor-parallel ranks share
// it; vLLM's is per GPU), so it is compared alone; with preemption_mode
// "recompute" none is allocated and nothing is checked.
std::string check_swap_space(const EngineArgs& args, uint64_t total_cpu_memory);

// Merges --model into model_dir: either alone is the model directory; both
// must name the same directory (as given) or std::invalid_argument is thrown
// naming both values.
void apply_model_flag(EngineArgs& args);

// argv with vLLM's multi-letter short aliases spelled out, for CLI11 (which
// takes one-letter short names only): "-tp N" / "-tp=N" become
// "--tensor-parallel-size N" / "--tensor-parallel-size=N". Only a token in
// option position is expanded: not the value of an option that takes one
// (`takes_value("--prompt")` true: `--prompt -tp` keeps its text), and
// nothing after "--".
std::vector<std::string> expand_flag_aliases(
    int argc, const char* const* argv, const std::function<bool(const std::string&)>& takes_value);
// takes_value for expand_flag_aliases from a CLI11 app and its subcommands:
// true when any of them has an option named `name` that expects a value.
std::function<bool(const std::string&)> cli_takes_value(const CLI::App& app);

// MODEL_DIR as given, or (empty) the bundled models/stories260K looked up
// relative to the current directory, then the executable, then
// PAGODA_SOURCE_DIR. Throws std::runtime_error listing where it looked.
std::string resolve_model_dir(const std::string& given);
// Why `given` is not a model directory: "model directory 'x' does not
// exist", or "... is not a directory ..." for a file.
std::string model_dir_problem(const std::string& given);

// Everything loaded from EngineArgs. The Engine is created, not started.
struct LoadedModel {
  ModelConfig config;
  GenerationConfig generation_config;
  TokenizerConfig tokenizer_config;
  std::shared_ptr<Tokenizer> tokenizer;
  std::shared_ptr<ChatTemplate> chat_template;  // null: no template
  std::unique_ptr<Engine> engine;
  std::string backend;  // ModelExecutor::describe()
  int64_t max_model_len = 0;
  std::string served_model_name;
  int64_t max_logprobs = kMaxLogprobs;  // EngineArgs::max_logprobs
};

// Throws std::runtime_error with a clear message (missing files, bad
// template, max_model_len beyond the model's, no GPU for --device cuda,
// a tensor_parallel_size that is < 1, does not divide the heads, or needs
// NCCL or GPUs the build/machine lacks). generation_config: args.model_dir's
// generation_config.json when the caller has already read it (`pagoda
// generate` checks the sampling flags against it before the load), so the
// file is read once; nullptr: read here.
// usage: who runs the engine, for vLLM's batch defaults (an unset
// max_num_seqs / max_num_batched_tokens; server/batch_defaults.h); the
// limits chosen are logged.
LoadedModel load_model(const EngineArgs& args, UsageContext usage,
                       const GenerationConfig* generation_config = nullptr);

// The ServingModel the protocol layer reads (chat rendering serialized by a
// mutex: one template instance shared by all network threads).
ServingModel make_serving_model(const LoadedModel& m, const std::string& model_dir);

}  // namespace pagoda
