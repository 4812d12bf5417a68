#include <chrono>
#include <cstdio>
#include <fstream>
#include <variant>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "server/cli.h"
#include "server/engine_handle.h"
#include "server/generation_group.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/version.h"

namespace pagoda {

using nlohmann::json;

void add_generate_command(CLI::App& app, GenerateArgs& a) {
  app.add_option("model_dir", a.engine.model_dir, "Hugging Face model directory (default: the bundled stories260K)");
  app.add_option("--prompt", a.prompts, "A prompt (repeatable)");
  app.add_option("--prompts-file", a.prompts_file, "A file with one prompt per line")->check(CLI::ExistingFile);
  app.add_option("--max-tokens", a.max_tokens, "Most tokens per completion (default: 16, as /v1/completions and vLLM; capped by max_model_len)");
  app.add_option("--temperature", a.temperature, "Sampling temperature (0 = greedy)");
  app.add_option("--top-p", a.top_p, "Nucleus sampling");
  app.add_option("--top-k", a.top_k, "Top-k sampling (0/-1 = off)");
  app.add_option("--min-p", a.min_p, "Min-p sampling");
  app.add_option("--min-tokens", a.min_tokens, "Tokens before EOS/stop may end a completion");
  app.add_option("--sampling-seed", a.sampling_seed, "Per-request seed (prompt i gets seed + i)");
  app.add_option("--presence-penalty", a.presence_penalty);
  app.add_option("--frequency-penalty", a.frequency_penalty);
  app.add_option("--repetition-penalty", a.repetition_penalty);
  app.add_option("--stop", a.stop, "Stop string (repeatable)");
  app.add_flag("--ignore-eos", a.ignore_eos, "Keep generating past EOS");
  app.add_option(
      "--logprobs", a.logprobs,
      "Log probabilities of each sampled token and of the N most likely, in each line's logprobs "
      "(/v1/completions' logprobs: its range, its format)");
  add_engine_flags(app, a.engine);
}

namespace {

// The request body the API would get for this prompt: generate goes through
// the same protocol layer, so defaults and validation are identical.
json request_body(const GenerateArgs& a, const std::string& prompt, size_t index) {
  json b = {{"prompt", prompt}};
  if (a.max_tokens) b["max_tokens"] = *a.max_tokens;
  if (a.temperature) b["temperature"] = *a.temperature;
  if (a.top_p) b["top_p"] = *a.top_p;
  if (a.top_k) b["top_k"] = *a.top_k;
  if (a.min_p) b["min_p"] = *a.min_p;
  if (a.min_tokens) b["min_tokens"] = *a.min_tokens;
  if (a.sampling_seed) b["seed"] = *a.sampling_seed + static_cast<int64_t>(index);
  if (a.presence_penalty) b["presence_penalty"] = *a.presence_penalty;
  if (a.frequency_penalty) b["frequency_penalty"] = *a.frequency_penalty;
  if (a.repetition_penalty) b["repetition_penalty"] = *a.repetition_penalty;
  if (!a.stop.empty()) b["stop"] = a.stop;
  if (a.ignore_eos) b["ignore_eos"] = true;
  if (a.logprobs) b["logprobs"] = *a.logprobs;
  return b;
}

void progress(size_t done, size_t total, int64_t tokens, double seconds) {
  const int width = 30;
  int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\rProcessed prompts: %3zu/%zu [%s%s] %.1f tok/s", done, total,
               std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
               seconds > 0 ? tokens / seconds : 0.0);
  std::fflush(stderr);
}

}  // namespace

int run_generate(GenerateArgs a) {
  try {
    if (!a.prompts_file.empty()) {
      std::ifstream in(a.prompts_file);
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) a.prompts.push_back(line);
    }
    if (a.prompts.empty()) {
      spdlog::error("no prompts: give --prompt TEXT or --prompts-file FILE");
      return 2;
    }
    // vLLM serves a model under the name it was given; the bundled default
    // model (no MODEL_DIR) is served as "stories260K".
    if (a.engine.model_dir.empty() && a.engine.served_model_name.empty())
      a.engine.served_model_name = "stories260K";
    a.engine.model_dir = resolve_model_dir(a.engine.model_dir);
    a.engine.disable_log_stats = true;
    // The executor logs the architecture, backend and KV cache once.
    spdlog::info("Pagoda {} generating with {}", pagoda_version(), a.engine.model_dir);
    LoadedModel m = load_model(a.engine);
    ServingModel serving = make_serving_model(m, a.engine.model_dir);

    // The server's request pipeline (GenerationGroup), stepped on this
    // thread: the same choices, text, logprobs and usage as the API.
    EngineAdapter handle(*m.engine);
    handle.set_running(true);
    struct Job {
      std::unique_ptr<GenerationGroup> group;
      std::string error;  // rejected by the parser
    };
    std::vector<Job> jobs(a.prompts.size());
    size_t pending = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      ParseResult r = parse_completion_request(request_body(a, a.prompts[i], i).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), serving);
      if (auto* e = std::get_if<OpenAIError>(&r)) {
        jobs[i].error = e->message;
        continue;
      }
      jobs[i].group =
          std::make_unique<GenerationGroup>(std::move(std::get<ParsedRequest>(r)), handle, [] {});
      jobs[i].group->submit();
      ++pending;
    }
    auto unfinished = [](const Job& j) { return j.group && !j.group->done(); };

    auto t0 = std::chrono::steady_clock::now();
    size_t finished = jobs.size() - pending;
    int64_t tokens = 0;
    progress(finished, jobs.size(), 0, 0);
    size_t shown = finished;
    double shown_at = 0;
    // Engine::add_request may reject a request at once (its error delta is
    // already in the channel): drain before the first step.
    for (bool worked = true; pending > 0; worked = m.engine->step()) {
      for (Job& j : jobs) {
        if (!unfinished(j)) continue;
        for (const ChoiceDelta& d : j.group->drain())
          tokens += static_cast<int64_t>(d.token_ids.size());
        if (j.group->done()) {
          --pending;
          ++finished;
        }
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (finished != shown || secs - shown_at >= 0.2) {  // redraw on progress, at most 5/s otherwise
        progress(finished, jobs.size(), tokens, secs);
        shown = finished;
        shown_at = secs;
      }
      if (!worked && pending > 0) {
        std::fputc('\n', stderr);
        spdlog::error("the engine went idle with {} request(s) unfinished", pending);
        return 1;
      }
    }
    std::fputc('\n', stderr);

    size_t failed = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = jobs[i];
      json line = {{"index", i}, {"prompt", a.prompts[i]}};
      if (!j.group || j.group->failed()) {
        line["error"] = j.group ? j.group->error().error : j.error;
        ++failed;
      } else {
        // One prompt, n = 1: one choice.
        const ChoiceDelta& c = j.group->choices().front();
        line["text"] = c.text;
        line["token_ids"] = c.token_ids;
        if (!c.logprobs.is_null()) line["logprobs"] = c.logprobs;
        line["finish_reason"] = finish_reason_str(c.finish_reason);
        line["stop_reason"] = c.stop_reason;
        line["usage"] = {{"prompt_tokens", j.group->prompt_tokens()},
                         {"completion_tokens", j.group->completion_tokens()},
                         {"total_tokens", j.group->prompt_tokens() + j.group->completion_tokens()}};
      }
      std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
    std::fflush(stdout);
    if (failed > 0) {
      // A run in which a prompt failed is a failed run (scripts check the
      // status); each failed prompt's line on stdout carries its "error".
      spdlog::error("{} of {} prompt(s) failed; their output lines carry the error", failed, jobs.size());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace pagoda
