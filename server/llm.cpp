#include "server/llm.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>
#include <variant>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "server/engine_handle.h"
#include "server/generation_group.h"
#include "server/openai_prompt_logprobs.h"
#include "server/openai_request.h"
#include "server/version.h"

namespace pagoda::offline {

using nlohmann::json;

namespace {

double clamped(float lp) {
  if (std::isnan(lp)) return -9999.0;
  return std::max(static_cast<double>(lp), -9999.0);
}

// Most likely first (ties: the lower rank, then the lower id), as the
// OpenAI endpoints order top logprobs: a position's map is by id.
nlohmann::ordered_json position_json(const PositionLogprobs& p) {
  std::vector<std::pair<int32_t, const Logprob*>> entries;
  for (const auto& [id, lp] : p) entries.emplace_back(id, &lp);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    constexpr int64_t kNoRank = std::numeric_limits<int64_t>::max();
    if (a.second->logprob != b.second->logprob) return a.second->logprob > b.second->logprob;
    return a.second->rank.value_or(kNoRank) < b.second->rank.value_or(kNoRank);
  });
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const auto& [id, lp] : entries)
    o[fmt::format("{}", id)] = {
        {"logprob", clamped(lp->logprob)},
        {"rank", lp->rank ? nlohmann::ordered_json(*lp->rank) : nlohmann::ordered_json(nullptr)},
        {"decoded_token", lp->decoded_token ? nlohmann::ordered_json(*lp->decoded_token)
                                            : nlohmann::ordered_json(nullptr)}};
  return o;
}

// A token's decoded_token: none without a tokenizer (detokenize false:
// vLLM's RequestState gives its LogprobsProcessor none, and every
// decoded_token is None).
std::optional<std::string> decoded(const Tokenizer* tok, int32_t id) {
  if (!tok) return std::nullopt;
  return decoded_token(*tok, id);
}

// A sampled position: the token with its rank in the distribution (as
// vLLM's; the top entry keeps its top-k rank when it is the same token) and
// the k most likely (ranks 1..k).
PositionLogprobs sample_position(const Tokenizer* tok, const TokenLogprob& lp) {
  PositionLogprobs p;
  p[lp.token_id] = Logprob{lp.logprob, lp.rank > 0 ? std::optional<int64_t>(lp.rank) : std::nullopt,
                           decoded(tok, lp.token_id)};
  for (size_t i = 0; i < lp.top.size(); ++i) {
    const auto [id, v] = lp.top[i];
    p[id] = Logprob{v, static_cast<int64_t>(i) + 1, decoded(tok, id)};
  }
  return p;
}

// A prompt position: the prompt token with its rank (the top entry keeps
// its top-k rank when it is the same token, as vLLM's dict update).
PositionLogprobs prompt_position(const Tokenizer* tok, const PromptLogprob& lp) {
  PositionLogprobs p;
  p[lp.token_id] = Logprob{lp.logprob, lp.rank, decoded(tok, lp.token_id)};
  for (size_t i = 0; i < lp.top.size(); ++i) {
    const auto [id, v] = lp.top[i];
    p[id] = Logprob{v, static_cast<int64_t>(i) + 1, decoded(tok, id)};
  }
  return p;
}

// What the tap collects of one choice's engine deltas.
struct RawChoice {
  std::vector<TokenLogprob> logprobs;
  double cumulative_logprob = 0.0;
};

// One request in flight.
struct Job {
  size_t index = 0;  // into run()'s requests
  std::unique_ptr<GenerationGroup> group;
  std::vector<RawChoice> raw;  // per choice
  std::optional<std::vector<PromptLogprob>> prompt_logprobs;
  bool counted = false;  // in the progress bar
};

RequestOutput make_output(const Job& j, const Tokenizer& tokenizer) {
  const ParsedRequest& req = j.group->request();
  const Tokenizer* tok = req.detokenize ? &tokenizer : nullptr;
  RequestOutput out;
  out.request_id = req.request_id;
  if (!req.prompts.front().token_ids_only) out.prompt = req.prompts.front().text;
  out.prompt_token_ids = req.prompts.front().token_ids;
  if (req.sampling.prompt_logprobs) {
    std::vector<std::optional<PositionLogprobs>> pl{std::nullopt};
    if (j.prompt_logprobs)
      for (const PromptLogprob& lp : *j.prompt_logprobs) pl.emplace_back(prompt_position(tok, lp));
    out.prompt_logprobs = std::move(pl);
  }
  const bool logprobs = req.sampling.logprobs.has_value();
  for (const ChoiceDelta& c : j.group->choices()) {
    CompletionOutput o;
    o.index = c.index;
    if (req.detokenize) o.text = c.text;
    o.token_ids = c.token_ids;
    // Beam search: the beam's cumulative logprob, as vLLM's beam search.
    if (req.beam_search)
      o.cumulative_logprob = j.raw.at(static_cast<size_t>(c.index)).cumulative_logprob;
    if (logprobs) {
      const RawChoice& r = j.raw.at(static_cast<size_t>(c.index));
      o.cumulative_logprob = r.cumulative_logprob;
      std::vector<PositionLogprobs> lps;
      for (const TokenLogprob& lp : r.logprobs) lps.push_back(sample_position(tok, lp));
      o.logprobs = std::move(lps);
    }
    if (c.finished) o.finish_reason = finish_reason_str(c.finish_reason);
    o.stop_reason = c.stop_reason;
    out.outputs.push_back(std::move(o));
  }
  out.finished = true;
  out.num_cached_tokens = cached_tokens(req, j.group->choices());
  return out;
}

}  // namespace

nlohmann::ordered_json to_json(const RequestOutput& out) {
  using json = nlohmann::ordered_json;  // vLLM's field order; logprobs in rank order
  json outputs = json::array();
  for (const CompletionOutput& o : out.outputs) {
    json lps = nullptr;
    if (o.logprobs) {
      lps = json::array();
      for (const PositionLogprobs& p : *o.logprobs) lps.push_back(position_json(p));
    }
    outputs.push_back(
        {{"index", o.index},
         {"text", o.text},
         {"token_ids", o.token_ids},
         {"cumulative_logprob", o.cumulative_logprob ? json(*o.cumulative_logprob) : json(nullptr)},
         {"logprobs", std::move(lps)},
         {"finish_reason", o.finish_reason ? json(*o.finish_reason) : json(nullptr)},
         {"stop_reason", o.stop_reason}});
  }
  json prompt_lps = nullptr;
  if (out.prompt_logprobs) {
    prompt_lps = json::array();
    for (const auto& p : *out.prompt_logprobs)
      prompt_lps.push_back(p ? position_json(*p) : json(nullptr));
  }
  return {{"request_id", out.request_id},
          {"prompt", out.prompt ? json(*out.prompt) : json(nullptr)},
          {"prompt_token_ids", out.prompt_token_ids},
          {"prompt_logprobs", std::move(prompt_lps)},
          {"outputs", std::move(outputs)},
          {"finished", out.finished},
          {"num_cached_tokens", out.num_cached_tokens}};
}

Prompt::Prompt(std::string text) { request_["prompt"] = std::move(text); }
Prompt::Prompt(const char* text) : Prompt(std::string(text)) {}
Prompt::Prompt(std::vector<int32_t> token_ids) {
  request_["prompt_token_ids"] = std::move(token_ids);
}

Prompt Prompt::chat(nlohmann::ordered_json messages, nlohmann::ordered_json options) {
  Prompt p;
  p.request_ = options.is_object() ? std::move(options) : nlohmann::ordered_json::object();
  p.request_["messages"] = std::move(messages);
  return p;
}

Prompt Prompt::from_json(nlohmann::ordered_json request) {
  if (!request.is_object()) throw std::invalid_argument("a request must be a JSON object");
  Prompt p;
  p.request_ = std::move(request);
  return p;
}

LLMError::LLMError(RequestError e)
    : std::invalid_argument(fmt::format("prompt {}: {}", e.index, e.message)),
      error_(std::move(e)) {}

namespace {
template <typename Json>
void sampling_params_defaults(Json& fields) {
  for (const auto& [k, v] : {std::pair<const char*, Json>{"temperature", 1.0},
                             {"top_p", 1.0},
                             {"top_k", 0},
                             {"repetition_penalty", 1.0},
                             {"min_p", 0.0}})
    if (!fields.contains(k) || fields[k].is_null()) fields[k] = v;
  // max_tokens: absent is SamplingParams' 16; None (null) stays, "until the
  // context is full".
  if (!fields.contains("max_tokens")) fields["max_tokens"] = 16;
}
}  // namespace

void apply_sampling_params_defaults(json& fields) { sampling_params_defaults(fields); }
void apply_sampling_params_defaults(nlohmann::ordered_json& fields) {
  sampling_params_defaults(fields);
}

std::vector<nlohmann::ordered_json> make_requests(const std::vector<Prompt>& prompts,
                                                  const std::vector<SamplingParams>& params) {
  if (params.size() > 1 && params.size() != prompts.size())
    throw std::invalid_argument(
        fmt::format("The lengths of prompts ({}) and sampling params ({}) must be the same.",
                    prompts.size(), params.size()));
  std::vector<nlohmann::ordered_json> out;
  out.reserve(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    nlohmann::ordered_json r = prompts[i].request();
    if (!params.empty()) {
      const json& f = params[params.size() == 1 ? 0 : i].fields;
      if (!f.is_object())
        throw std::invalid_argument("SamplingParams fields must be a JSON object");
      for (const auto& [k, v] : f.items())
        if (!r.contains(k)) r[k] = v;
      apply_sampling_params_defaults(r);
    }
    out.push_back(std::move(r));
  }
  return out;
}

LLM::LLM(std::string model_dir, EngineArgs args,
         std::optional<GenerationConfig> generation_config) {
  // vLLM serves a model under the name it was given; the bundled default
  // (no model_dir) is "stories260K".
  if (model_dir.empty() && args.served_model_name.empty()) args.served_model_name = "stories260K";
  validate_engine_args(args);
  args.model_dir = resolve_model_dir(model_dir);
  args.disable_log_stats = true;  // vLLM's LLM: unless asked
  spdlog::info("Pagoda {} generating with {}", pagoda_version(), args.model_dir);
  model_ = std::make_unique<LoadedModel>(
      load_model(args, UsageContext::kLlmClass, generation_config ? &*generation_config : nullptr));
  serving_ = make_serving_model(*model_, args.model_dir);
  handle_ = std::make_unique<EngineAdapter>(*model_->engine);
  handle_->set_running(true);
}

LLM::~LLM() = default;

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const std::optional<SamplingParams>& params,
                                         bool use_tqdm) {
  std::vector<SamplingParams> p;
  if (params) p.push_back(*params);
  return generate_requests(make_requests(prompts, p), use_tqdm);
}

std::vector<RequestOutput> LLM::generate(const std::vector<Prompt>& prompts,
                                         const std::vector<SamplingParams>& params, bool use_tqdm) {
  if (params.size() != prompts.size())
    throw std::invalid_argument(
        fmt::format("The lengths of prompts ({}) and sampling params ({}) must be the same.",
                    prompts.size(), params.size()));
  return generate_requests(make_requests(prompts, params), use_tqdm);
}

std::vector<RequestOutput> LLM::chat(const std::vector<json>& conversations,
                                     const std::optional<SamplingParams>& params,
                                     const json& options, bool use_tqdm) {
  std::vector<Prompt> prompts;
  for (const json& c : conversations)
    prompts.push_back(Prompt::chat(nlohmann::ordered_json(c), nlohmann::ordered_json(options)));
  return generate(prompts, params, use_tqdm);
}

std::vector<RequestOutput> LLM::generate_requests(std::vector<nlohmann::ordered_json> requests,
                                                  bool use_tqdm) {
  // vLLM validates every request before the engine runs any.
  std::vector<ParseResult> parsed;
  parsed.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    parsed.push_back(parse_offline_object(std::move(requests[i]), serving_));
    if (auto* e = std::get_if<OpenAIError>(&parsed.back()))
      throw LLMError({i, e->message, e->param});
  }
  std::vector<Result> results =
      run_parsed(std::move(parsed), use_tqdm ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  std::vector<RequestOutput> out;
  out.reserve(results.size());
  for (Result& r : results) {
    if (r.error) throw LLMError(*r.error);
    out.push_back(std::move(*r.output));
  }
  return out;
}

std::vector<Result> LLM::run(const std::vector<nlohmann::ordered_json>& requests,
                             ProgressBar::Mode bar_mode) {
  std::vector<ParseResult> parsed;
  parsed.reserve(requests.size());
  for (const nlohmann::ordered_json& r : requests)
    parsed.push_back(parse_offline_object(r, serving_));
  return run_parsed(std::move(parsed), bar_mode);
}

void LLM::log_guided_masks(const guided::MaskFillTotals& before, int64_t steps_before) const {
  const guided::MaskFillTotals now = guided::mask_fill_totals();
  const int64_t masks = now.masks - before.masks,
                bg = now.background_masks - before.background_masks;
  if (masks <= 0 && bg <= 0) return;
  const int64_t steps = std::max<int64_t>(1, model_->engine->stats().steps_total - steps_before);
  const double engine_ms =
      (now.seconds - before.seconds + now.wait_seconds - before.wait_seconds) * 1e3;
  spdlog::info(
      "Guided decoding: the engine thread spent {:.1f} ms on token masks ({:.3f} ms per engine "
      "step "
      "over {} steps; {} computed lazily there); {} computed by {} workers in {:.1f} ms of their "
      "time",
      engine_ms, engine_ms / static_cast<double>(steps), steps, masks, bg,
      guided::num_mask_workers(), (now.background_seconds - before.background_seconds) * 1e3);
}

std::vector<Result> LLM::run_parsed(std::vector<ParseResult> parsed, ProgressBar::Mode bar_mode) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Result> results(parsed.size());
  std::vector<std::unique_ptr<Job>> jobs;
  for (size_t i = 0; i < parsed.size(); ++i) {
    if (auto* e = std::get_if<OpenAIError>(&parsed[i])) {
      results[i].error = RequestError{i, e->message, e->param};
      continue;
    }
    ParsedRequest req = std::move(std::get<ParsedRequest>(parsed[i]));
    req.request_id = fmt::format("{}", next_request_++);
    auto job = std::make_unique<Job>();
    job->index = i;
    job->raw.resize(static_cast<size_t>(req.sampling.n));
    job->group = std::make_unique<GenerationGroup>(std::move(req), *handle_, [] {});
    Job* jp = job.get();
    job->group->set_delta_tap([jp](const pagoda::RequestOutput& d) {
      if (d.prompt_logprobs) jp->prompt_logprobs = d.prompt_logprobs;
      if (d.index < 0 || static_cast<size_t>(d.index) >= jp->raw.size()) return;
      RawChoice& c = jp->raw[static_cast<size_t>(d.index)];
      c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      c.cumulative_logprob = d.cumulative_logprob;
    });
    jobs.push_back(std::move(job));
  }

  // No request to run: no bar (tqdm's would read "0it").
  if (jobs.empty()) bar_mode = ProgressBar::Mode::kOff;
  ProgressBar bar(static_cast<int64_t>(jobs.size()), bar_mode);
  const guided::MaskFillTotals masks_before = guided::mask_fill_totals();
  const int64_t steps_before = model_->engine->stats().steps_total;
  std::vector<Job*> pending;
  for (auto& j : jobs) {
    if (auto refusal = j->group->submit()) {
      results[j->index].error =
          RequestError{j->index, refusal->error.message, refusal->error.param};
      continue;
    }
    pending.push_back(j.get());
  }
  const Tokenizer& tok = *serving_.tokenizer;
  // Engine::add_request may reject a request at once (its error delta is
  // already in the channel): drain before the first step.
  bool interrupted = false;
  auto last_check = std::chrono::steady_clock::now();
  for (bool worked = true; !pending.empty(); worked = model_->engine->step()) {
    if (interrupt_ &&
        std::chrono::steady_clock::now() - last_check >= std::chrono::milliseconds(50)) {
      last_check = std::chrono::steady_clock::now();
      if (interrupt_()) {
        for (Job* j : pending) j->group->abort();
        interrupted = true;
        break;
      }
    }
    for (Job* j : pending) {
      j->group->drain();
      if (!j->group->done()) continue;
      if (j->group->failed()) {
        j->group->abort();
        const ChoiceDelta& e = j->group->error();
        results[j->index].error = RequestError{j->index, e.error, ""};
      } else {
        results[j->index].output = make_output(*j, tok);
      }
      // vLLM's figures: prompt tokens x n in, every choice's tokens out.
      int64_t out_tokens = 0;
      for (const ChoiceDelta& c : j->group->choices())
        out_tokens += static_cast<int64_t>(c.token_ids.size());
      const auto& req = j->group->request();
      bar.update(1, static_cast<int64_t>(req.prompt_token_ids.size()) * req.sampling.n, out_tokens);
      j->counted = true;
    }
    std::erase_if(pending, [](const Job* j) { return j->counted; });
    if (!worked && !pending.empty()) {
      // Nothing left to step yet requests unfinished: an engine bug; end
      // them rather than spin.
      for (Job* j : pending) {
        j->group->abort();
        results[j->index].error =
            RequestError{j->index, "the engine went idle with this request unfinished", ""};
      }
      spdlog::error("the engine went idle with {} request(s) unfinished", pending.size());
      break;
    }
  }
  bar.close();
  if (bar_mode != ProgressBar::Mode::kOff) log_guided_masks(masks_before, steps_before);
  // Aborted requests' final deltas are consumed by the next run's steps;
  // step until the engine holds nothing of this run.
  while (model_->engine->step()) {
  }
  if (interrupted) throw Interrupted();
  return results;
}

}  // namespace pagoda::offline
