// `pagoda generate` (server/cli.h): input lines → request objects →
// offline::LLM::run → one output line per prompt.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "engine/tokenizer/bpe_byte_level.h"
#include "server/cli.h"
#include "server/cli_checks.h"
#include "server/guided_fields.h"
#include "server/llm.h"
#include "server/openai_request.h"
#include "server/strict_json.h"

namespace pagoda {

using nlohmann::json;

void add_generate_command(CLI::App& app, GenerateArgs& a) {
  // As `pagoda serve`: a repeated scalar option keeps its last value
  // (vLLM's argparse); --prompt, --stop, ... collect one value per use.
  // Every occurrence is checked all the same (check_every_occurrence below).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("model_dir", a.engine.model_dir,
                 "Hugging Face model directory (default: the bundled stories260K)");
  // Vector options take one value per occurrence (repeat the flag), so a
  // trailing positional is MODEL_DIR, not one more value.
  app.add_option("--prompt", a.prompts, "A text prompt (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_option(
      "--prompts-file", a.prompts_file,
      "A file of prompts, one a line: plain text, or JSON lines ({\"prompt\": ...} | "
      "{\"prompt_token_ids\": [...]} | {\"messages\": [...]} plus SamplingParams fields); "
      "\"-\": stdin");
  app.add_option("--input-format", a.input_format,
                 "auto (JSON lines when the first non-empty line starts with '{'; a line that "
                 "is not valid JSON is then that prompt's error), text or jsonl")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  app.add_option("--output-format", a.output_format,
                 "json (one line a prompt: its \"index\" in the input, then vLLM's RequestOutput) "
                 "or text (\"Prompt: ..., Generated text: ...\")")
      ->check(CLI::IsMember({"json", "text"}));
  app.add_flag("--disable-progress-bar", a.disable_progress_bar,
               "No progress bar (else on stderr: redrawn on a terminal, its final line otherwise)");
  // SamplingParams (vLLM's names), the defaults of every prompt.
  app.add_option("--n", a.n, "Completions per prompt");
  app.add_option("--best-of", a.best_of, "Candidates per prompt (the n most likely are returned)");
  app.add_option("--max-tokens", a.max_tokens,
                 "Most tokens per completion (default: generation_config.json's max_new_tokens, "
                 "else 16, as vLLM's LLM.generate without SamplingParams; capped by "
                 "max_model_len)");
  app.add_option("--min-tokens", a.min_tokens, "Tokens before EOS/stop may end a completion");
  app.add_option("--temperature", a.temperature, "Sampling temperature (0 = greedy)");
  app.add_option("--top-p", a.top_p, "Nucleus sampling");
  app.add_option("--top-k", a.top_k, "Top-k sampling (0/-1 = off)");
  app.add_option("--min-p", a.min_p, "Min-p sampling");
  app.add_option("--sampling-seed", a.sampling_seed,
                 "Per-request seed (prompt i gets seed + i; a line's own seed wins)");
  app.add_option("--presence-penalty", a.presence_penalty);
  app.add_option("--frequency-penalty", a.frequency_penalty);
  app.add_option("--repetition-penalty", a.repetition_penalty);
  app.add_option("--stop", a.stop, "Stop string (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_option("--stop-token-ids", a.stop_token_ids, "Stop token id (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_option("--bad-words", a.bad_words, "A word never generated (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_option("--allowed-token-ids", a.allowed_token_ids,
                 "Only these ids may be sampled (repeat the flag for more)")
      ->allow_extra_args(false);
  app.add_option("--logit-bias", a.logit_bias, "A JSON object of token id → bias in [-100, 100]");
  app.add_flag("--ignore-eos", a.ignore_eos, "Keep generating past EOS");
  app.add_flag("--include-stop-str-in-output", a.include_stop_str_in_output);
  app.add_flag("--skip-special-tokens,!--no-skip-special-tokens", a.skip_special_tokens);
  app.add_flag("--spaces-between-special-tokens,!--no-spaces-between-special-tokens",
               a.spaces_between_special_tokens);
  app.add_option("--logprobs", a.logprobs,
                 "Logprobs of each sampled token and of the N most likely");
  app.add_option("--prompt-logprobs", a.prompt_logprobs,
                 "Logprobs of each prompt token and of the N most likely");
  app.add_option("--truncate-prompt-tokens", a.truncate_prompt_tokens,
                 "Keep each prompt's last K tokens (-1: max_model_len)");
  app.add_option("--sampling-params", a.sampling_params,
                 "A JSON object of SamplingParams fields (the flags above win)");
  add_engine_flags(app, a.engine);
  cli::check_every_occurrence(app);
  app.footer(
      "Exit status: 0 every prompt completed; 1 a prompt failed (its output line carries the "
      "error; the others still run) or the run did (model load, engine); 2 a usage error, "
      "nothing run: a bad flag or value (the sampling flags and --sampling-params are checked as "
      "vLLM's SamplingParams, before the model loads), --sampling-params / --logit-bias not a "
      "JSON object, an unreadable --prompts-file, a prompt or --prompts-file line that is not "
      "UTF-8, no prompts, a MODEL_DIR that does not exist or "
      "is not a directory.");
}

namespace {

// One input prompt: its request object, or why it has none.
struct Input {
  std::optional<nlohmann::ordered_json> request;  // keys in the line's order
  std::string error;  // a line that is not a JSON object
  size_t line = 0;    // 1-based line in the file; 0: --prompt
};

// A command-line mistake: exit 2 before anything loads.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A flag's JSON object value ("--sampling-params", "--logit-bias"), read
// as the server reads a request body (parse_strict_json: never throws, so a
// number beyond double range, 1e400, is a usage error naming the flag, not
// nlohmann's out_of_range escaping as a failed run; a key twice is refused).
json parse_object_flag(const char* flag, const std::string& text) {
  std::variant<json, JsonParseFailure> parsed = parse_strict_json(text, flag);
  if (auto* f = std::get_if<JsonParseFailure>(&parsed)) throw UsageError(f->message);
  json v = std::move(std::get<json>(parsed));
  if (!v.is_object())
    throw UsageError(fmt::format("{} must be a JSON object, got {}", flag, v.type_name()));
  return v;
}

// "max_tokens" -> "--max-tokens": the flag that sets a SamplingParams field.
std::string flag_of(const std::string& field) {
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// The model's generation_config.json, whose max_new_tokens is the
// max_tokens of a prompt that sets none (the request pipeline's default),
// read once: the sampling flags are checked against it before the load and
// the load takes it (LLM's generation_config). nullopt when the model
// directory or the file cannot be read: the checks use an empty config and
// the load reads the file itself, to report what is wrong with it.
std::optional<GenerationConfig> model_generation_config(const EngineArgs& e) {
  try {
    return GenerationConfig::from_dir(resolve_model_dir(e.model_dir));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Every prompt's SamplingParams defaults: --sampling-params, then the
// flags over it, checked as vLLM's SamplingParams(**kwargs) checks them,
// by check_sampling_fields (the request pipeline's own checks that need no
// model: types, ranges, names, stop strings, logit_bias, min_tokens <=
// max_tokens (unset: the model's default, as the pipeline resolves it),
// truncate_prompt_tokens, the checks across fields of
// server/sampling_checks.h with --max-logprobs; token ids against the
// vocabulary, the context and the model's eos ids wait for the prompts).
// The values checked are the merged ones (a flag may fix what
// --sampling-params alone got wrong). Throws UsageError naming the flag, or
// --sampling-params for a value from there.
json sampling_defaults(const GenerateArgs& a, const GenerationConfig& generation_config) {
  json d = json::object();
  if (!a.sampling_params.empty()) {
    d = parse_object_flag("--sampling-params", a.sampling_params);
    openai_fields::keep_schema_key_order(d, a.sampling_params);
  }
  const json from_params = d;
  auto set = [&d](const char* k, const auto& v) {
    if (v) d[k] = *v;
  };
  set("n", a.n);
  set("best_of", a.best_of);
  set("max_tokens", a.max_tokens);
  set("min_tokens", a.min_tokens);
  set("temperature", a.temperature);
  set("top_p", a.top_p);
  set("top_k", a.top_k);
  set("min_p", a.min_p);
  set("presence_penalty", a.presence_penalty);
  set("frequency_penalty", a.frequency_penalty);
  set("repetition_penalty", a.repetition_penalty);
  set("skip_special_tokens", a.skip_special_tokens);
  set("spaces_between_special_tokens", a.spaces_between_special_tokens);
  set("logprobs", a.logprobs);
  set("prompt_logprobs", a.prompt_logprobs);
  set("truncate_prompt_tokens", a.truncate_prompt_tokens);
  if (!a.stop.empty()) d["stop"] = a.stop;
  if (!a.stop_token_ids.empty()) d["stop_token_ids"] = a.stop_token_ids;
  if (!a.bad_words.empty()) d["bad_words"] = a.bad_words;
  if (!a.allowed_token_ids.empty()) d["allowed_token_ids"] = a.allowed_token_ids;
  if (a.ignore_eos) d["ignore_eos"] = true;
  if (a.include_stop_str_in_output) d["include_stop_str_in_output"] = true;
  if (!a.logit_bias.empty()) d["logit_bias"] = parse_object_flag("--logit-bias", a.logit_bias);
  if (auto e = check_sampling_fields(d, a.engine.max_logprobs, generation_config)) {
    if (e->param.empty()) throw UsageError(e->message);
    // Named by the flag that set the field, else by --sampling-params.
    const auto p = from_params.find(e->param);
    const bool by_flag = p == from_params.end() || *p != d[e->param];
    throw UsageError(
        fmt::format("{}: {}", by_flag ? flag_of(e->param) : "--sampling-params", e->message));
  }
  return d;
}

// A JSON-lines line, as parse_strict_json reads it: the object, or why not.
std::variant<json, JsonParseFailure> parse_line(const std::string& line) {
  return parse_strict_json(line, "the line");
}

// Whether the line is meant as a JSON object: it starts with "{". Whether
// it parses is the line's own business: a malformed one (a trailing comma)
// is that prompt's error, with its line number, not a plain-text prompt.
bool starts_like_json_object(const std::string& line) {
  const size_t i = line.find_first_not_of(" \t\r");
  return i != std::string::npos && line[i] == '{';
}

// Prompts are UTF-8 text, as vLLM reads them (a Python str; a file opened
// as UTF-8 fails to read at an invalid byte): text that is not is a usage
// error naming where it came from, never a prompt with its bytes replaced.
void check_utf8(std::string_view text, const std::string& where) {
  if (const std::optional<size_t> at = bpe::first_invalid_utf8(text))
    throw UsageError(
        fmt::format("{}: not valid UTF-8 (byte {} is 0x{:02X}); "
                    "prompts are read as UTF-8 text",
                    where, *at + 1, static_cast<unsigned char>(text[*at])));
}

// The file's prompts: plain lines (empty ones skipped) or JSON lines.
// `source` names the file in errors (UsageError: a line that is not UTF-8).
std::vector<Input> read_prompts_file(std::istream& in, const std::string& format,
                                     const std::string& source) {
  std::vector<std::pair<size_t, std::string>> lines;
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    check_utf8(line, fmt::format("--prompts-file {}:{}", source, n));
    // A UTF-8 byte order mark (Windows editors write one) is not text.
    if (n == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) lines.emplace_back(n, line);
  }
  bool jsonl = format == "jsonl";
  if (format == "auto") jsonl = !lines.empty() && starts_like_json_object(lines.front().second);
  std::vector<Input> out;
  for (auto& [number, line] : lines) {
    Input p;
    p.line = number;
    if (!jsonl) {
      p.request = nlohmann::ordered_json{{"prompt", line}};
    } else {
      auto parsed = parse_line(line);
      if (auto* f = std::get_if<JsonParseFailure>(&parsed)) {
        p.error = std::move(f->message);
        // Auto-detected: the way back to plain text.
        if (format == "auto" && f->not_json)
          p.error +=
              " (the file was read as JSON lines because its first line starts with '{'; "
              "--input-format text reads each line as a plain-text prompt)";
      } else if (std::get<json>(parsed).is_object()) {
        // Read again keeping the key order (the chat template sees it; it
        // parsed strictly above, so it parses here).
        p.request = nlohmann::ordered_json::parse(line);
      } else {
        p.error = "not a JSON object";
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string dump(const nlohmann::ordered_json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

int run_generate(GenerateArgs a) {
  try {
    // Usage errors first (exit 2), before the model loads.
    const std::optional<GenerationConfig> generation_config = model_generation_config(a.engine);
    json defaults;
    try {
      defaults = sampling_defaults(a, generation_config.value_or(GenerationConfig{}));
    } catch (const UsageError& e) {
      spdlog::error("{}", e.what());
      return 2;
    }
    std::error_code ec;
    if (!a.engine.model_dir.empty() && !std::filesystem::is_directory(a.engine.model_dir, ec)) {
      spdlog::error("{}", model_dir_problem(a.engine.model_dir));
      return 2;
    }
    std::vector<Input> inputs;
    try {
      for (size_t i = 0; i < a.prompts.size(); ++i)
        check_utf8(a.prompts[i], fmt::format("--prompt (prompt {})", i));
    } catch (const UsageError& e) {
      spdlog::error("{}", e.what());
      return 2;
    }
    for (const std::string& p : a.prompts)
      inputs.push_back({nlohmann::ordered_json{{"prompt", p}}, "", 0});
    if (!a.prompts_file.empty()) {
      std::ifstream file;
      if (a.prompts_file != "-") {
        // A directory opens as a stream that reads no line ("no prompts").
        if (std::filesystem::is_directory(a.prompts_file, ec)) {
          spdlog::error("cannot read --prompts-file {}: it is a directory", a.prompts_file);
          return 2;
        }
        file.open(a.prompts_file);
        if (!file) {
          spdlog::error("cannot read --prompts-file {}: {}", a.prompts_file, std::strerror(errno));
          return 2;
        }
      }
      std::vector<Input> more;
      try {
        more = read_prompts_file(a.prompts_file == "-" ? std::cin : file, a.input_format,
                                 a.prompts_file == "-" ? "stdin" : a.prompts_file);
      } catch (const UsageError& e) {
        spdlog::error("{}", e.what());
        return 2;
      }
      for (Input& p : more) inputs.push_back(std::move(p));
    }
    if (inputs.empty()) {
      spdlog::error("no prompts: give --prompt TEXT or --prompts-file FILE");
      return 2;
    }
    std::vector<nlohmann::ordered_json> requests;
    std::vector<size_t> request_input;  // requests[k] is inputs[request_input[k]]
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].request) continue;
      nlohmann::ordered_json r = *inputs[i].request;
      for (const auto& [k, v] : defaults.items())
        if (!r.contains(k)) r[k] = v;
      if (a.sampling_seed && !r.contains("seed"))
        r["seed"] = *a.sampling_seed + static_cast<int64_t>(i);
      requests.push_back(std::move(r));
      request_input.push_back(i);
    }

    offline::LLM llm(a.engine.model_dir, a.engine, generation_config);
    const auto mode = a.disable_progress_bar ? ProgressBar::Mode::kOff : ProgressBar::Mode::kAuto;
    std::vector<offline::Result> ran = llm.run(requests, mode);
    std::vector<offline::Result> results(inputs.size());
    for (size_t k = 0; k < ran.size(); ++k) results[request_input[k]] = std::move(ran[k]);

    size_t failed = 0;
    const std::string source = a.prompts_file == "-" ? "stdin" : a.prompts_file;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Input& in = inputs[i];
      offline::Result& r = results[i];
      if (!r.output) {
        ++failed;
        const std::string message = r.error ? r.error->message : in.error;
        const std::string param = r.error ? r.error->param : "";
        // "prompt <index>" as the output line's index (0-based, as
        // LLMError's); a file line also by its 1-based line number.
        const std::string where = in.line ? fmt::format("prompt {}, {}:{}", i, source, in.line)
                                          : fmt::format("prompt {}, --prompt", i);
        spdlog::error("{}: {}{}", where, message,
                      param.empty() ? "" : fmt::format(" (field '{}')", param));
        if (a.output_format == "json") {
          json line = {{"index", i},
                       {"line", in.line ? json(in.line) : json(nullptr)},
                       {"error", message},
                       {"param", param.empty() ? json(nullptr) : json(param)}};
          std::printf("%s\n", dump(line).c_str());
        } else {
          // A line for every input, so outputs stay aligned with them.
          const nlohmann::ordered_json* text = in.request ? &*in.request : nullptr;
          const json prompt = text && text->contains("prompt") && (*text)["prompt"].is_string()
                                  ? json((*text)["prompt"])
                                  : json(nullptr);
          std::printf("Prompt: %s, Error: %s\n", dump(prompt).c_str(), dump(json(message)).c_str());
        }
        continue;
      }
      if (a.output_format == "json") {
        // "index" first: the prompt's position in the input, as an error
        // line has it (request_id counts only the requests that ran).
        nlohmann::ordered_json line = {{"index", i}};
        nlohmann::ordered_json out = offline::to_json(*r.output);
        for (auto& [k, v] : out.items()) line[k] = std::move(v);
        std::printf("%s\n", dump(line).c_str());
      } else {
        for (const offline::CompletionOutput& o : r.output->outputs)
          std::printf("Prompt: %s, Generated text: %s\n",
                      dump(r.output->prompt ? json(*r.output->prompt) : json(nullptr)).c_str(),
                      dump(json(o.text)).c_str());
      }
    }
    std::fflush(stdout);
    if (failed > 0) {
      // A run in which a prompt failed is a failed run (scripts check the
      // status); each failed prompt's line on stdout carries its "error".
      spdlog::error("{} of {} prompt(s) failed; their output lines carry the error", failed,
                    inputs.size());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace pagoda
