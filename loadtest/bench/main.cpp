// pagoda-bench: a benchmark client in the manner of vLLM's
// benchmarks/benchmark_serving.py (loadtest/README.md). `pagoda-bench serve
// ...` sends a dataset's prompts to an OpenAI-compatible server (or
// Pagoda's /v1/ws) at a request rate and prints vLLM's serving metrics.
// Exit status: 0 the benchmark ran (failed requests are counted, not
// fatal), 1 the initial test request failed, 2 a usage or set-up error.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "loadtest/bench/arrival.h"
#include "loadtest/bench/backends.h"
#include "loadtest/bench/dataset.h"
#include "loadtest/bench/metrics.h"
#include "loadtest/bench/report.h"
#include "loadtest/bench/runner.h"
#include "loadtest/common/process_stats.h"
#include "server/cli_checks.h"

namespace {

namespace fs = std::filesystem;
using namespace pagoda::bench;

// The most prompts pagoda-bench builds: every prompt (text and token ids)
// is made before the run, so an absurd count would allocate until
// std::bad_alloc. A million is far past vLLM's benchmarks (1,000 by
// default; ShareGPT has about 94,000 conversations).
constexpr int64_t kMaxNumPrompts = 1'000'000;
// The most tokens one prompt or output may be asked to have: past any
// model's context.
constexpr int64_t kMaxLenTokens = 10'000'000;
// The most prompt tokens the random dataset builds in all (--num-prompts x
// the longest prompt): about 12 bytes each (ids twice, text), so ~12 GB.
constexpr double kMaxRandomTokens = 1e9;
// vLLM's benchmark_serving.py seeds Python's and numpy's generators with
// --seed: np.random.seed takes 0 to 2**32 - 1 and raises on the rest.
constexpr int64_t kMaxSeed = 4'294'967'295;

struct Args {
  std::string backend = "openai";
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint;
  std::string model;
  std::string tokenizer;
  std::string dataset_name = "sharegpt";
  std::string dataset_path;
  int64_t num_prompts = 1000;
  std::optional<int64_t> sharegpt_output_len;
  RandomSpec random;
  bool prompt_token_ids = false;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool disable_tqdm = false;
  std::optional<int> logprobs;
  std::string percentile_metrics = "ttft,tpot,itl,e2el";
  std::string metric_percentiles = "90,99";
  std::vector<std::string> goodput;
  bool save_result = false;
  bool save_detailed = false;
  std::string result_dir;
  std::string result_filename;
  std::vector<std::string> metadata;
  bool skip_test_run = false;
  double request_timeout_s = 6 * 3600;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t next = s.find(sep, at);
    if (next == std::string::npos) next = s.size();
    if (next > at) out.push_back(s.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

// A double as Python prints a float: "20.0", "0.5", "inf".
std::string py_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

std::string now_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// --request-timeout: more than 0 and at least a millisecond (the clock's
// unit here); past kMaxTimeoutS it is clamped (a deadline that far away is
// "never", and now + 1e10 s would overflow the clock).
constexpr double kMaxTimeoutS = 1e7;  // about 116 days
std::chrono::milliseconds request_timeout(double s) {
  if (!(s > 0))
    throw std::invalid_argument(fmt::format("--request-timeout must be > 0 seconds, got {}", s));
  if (s < 1e-3)
    throw std::invalid_argument(
        fmt::format("--request-timeout must be at least 0.001 seconds (1 ms), got {}", s));
  if (s > kMaxTimeoutS) {
    std::cerr << fmt::format("pagoda-bench: note: --request-timeout {} clamped to {:.0e} seconds\n",
                             s, kMaxTimeoutS);
    s = kMaxTimeoutS;
  }
  return std::chrono::milliseconds(std::llround(s * 1e3));
}

// Creates --result-dir (as vLLM's os.makedirs(exist_ok=True)) and checks
// that the result file can be written there, so a run is not lost at its
// end. Throws std::runtime_error naming the path.
void check_result_location(const std::string& dir, const std::string& filename) {
  fs::path where = dir.empty() ? fs::path(".") : fs::path(dir);
  std::error_code ec;
  if (!dir.empty()) {
    fs::create_directories(where, ec);
    if (ec || !fs::is_directory(where))
      throw std::runtime_error(fmt::format("--result-dir {}: cannot create it ({})", dir,
                                           ec ? ec.message() : "not a directory"));
  }
  fs::path file = filename.empty() ? where / fmt::format(".pagoda-bench-probe-{}", ::getpid())
                                   : (dir.empty() ? fs::path(filename) : where / filename);
  const bool existed = fs::exists(file, ec);
  if (existed && fs::is_directory(file, ec))
    throw std::runtime_error(fmt::format("result file {} is a directory", file.string()));
  {
    std::ofstream probe(file, std::ios::app);  // appends nothing: an existing file is unchanged
    if (!probe)
      throw std::runtime_error(
          fmt::format("cannot write the result file {}: {}", file.string(), std::strerror(errno)));
  }
  if (!existed) fs::remove(file, ec);
}

// Warns (stderr) when the connections that may be open at once exceed the
// open-file limit: each request holds one socket, so past the limit
// requests fail on this machine (EMFILE) and would count as failed.
void warn_if_file_limit_low(const pagoda::loadtest::FileLimit& lim, int64_t num_prompts,
                            int64_t max_concurrency) {
  constexpr uint64_t kMargin = 64;  // stdio, the tokenizer's files, epoll, ...
  const auto in_flight = static_cast<uint64_t>(
      max_concurrency > 0 ? std::min(max_concurrency, num_prompts) : num_prompts);
  if (in_flight + kMargin <= lim.soft) return;
  std::cerr << fmt::format(
      "pagoda-bench: warning: up to {} requests may be in flight (one connection each) but the "
      "open-file limit is {} (hard {}); requests past it fail on this machine (EMFILE) and are "
      "counted as failed. Raise it (ulimit -n {}) or pass --max-concurrency {}\n",
      in_flight, lim.soft, lim.hard, in_flight + kMargin,
      lim.soft > kMargin ? lim.soft - kMargin : 1);
}

std::string first_client_side_error(const std::vector<RequestResult>& results) {
  for (const RequestResult& r : results)
    if (r.client_side) return r.error;
  return "";
}

// The options checked and converted: everything run() needs from them.
struct Checked {
  RunConfig cfg;
  std::string tok_dir;
  std::vector<std::string> metrics;
  std::vector<double> percentiles;
  GoodputSlo slo;
  nlohmann::json metadata = nlohmann::json::object();
  bool save = false;
};

// Checks every option before anything is loaded or built (the tokenizer,
// then the dataset's prompts, which take a while for a large dataset), so
// a bad option exits at once with its message. Throws std::invalid_argument or
// std::runtime_error naming the option.
Checked check_options(const Args& a) {
  Checked c;
  RunConfig& cfg = c.cfg;
  cfg.backend = parse_backend(a.backend);
  // The endpoint's leading "/" is added when missing (vLLM's string join
  // would run it into the port: "http://h:8000v1/completions").
  const std::string endpoint =
      a.endpoint.empty() ? default_endpoint(cfg.backend) : normalize_endpoint(a.endpoint);
  if (!a.endpoint.empty() && endpoint != a.endpoint)
    std::cerr << fmt::format("pagoda-bench: note: --endpoint {} taken as {}\n", a.endpoint,
                             endpoint);
  // The tokenizer: --tokenizer, else --model when it is a directory.
  c.tok_dir = a.tokenizer;
  if (c.tok_dir.empty() && fs::is_directory(a.model)) c.tok_dir = a.model;
  if (c.tok_dir.empty())
    throw std::invalid_argument(
        "no tokenizer: give --tokenizer DIR (a model directory), or a --model that is one");

  if (a.dataset_name == "sharegpt") {
    if (a.dataset_path.empty())
      throw std::invalid_argument("--dataset-name sharegpt needs --dataset-path FILE");
  } else if (a.dataset_name == "random") {
    check_random_spec(a.random);
    // Each count is within its flag's range, but their product need not
    // fit in memory.
    const double longest =
        static_cast<double>(a.random.prefix_len) +
        std::ceil(static_cast<double>(a.random.input_len) * (1 + a.random.range_ratio));
    if (static_cast<double>(a.num_prompts) * longest > kMaxRandomTokens)
      throw std::invalid_argument(fmt::format(
          "the random dataset would be {} prompts (--num-prompts) of up to {} tokens each "
          "(--random-prefix-len + --random-input-len x (1 + --random-range-ratio)), more than "
          "the {:.0f} prompt tokens pagoda-bench builds before a run; lower --num-prompts or "
          "--random-input-len",
          a.num_prompts, longest, kMaxRandomTokens));
  } else {
    throw std::invalid_argument("--dataset-name must be sharegpt or random");
  }
  if (a.prompt_token_ids && cfg.backend == Backend::kOpenAIChat)
    throw std::invalid_argument(
        "--prompt-token-ids needs a completions backend (openai, pagoda-ws)");

  c.metrics = split(a.percentile_metrics, ',');
  for (const std::string& m : c.metrics)
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el")
      throw std::invalid_argument(fmt::format("--percentile-metrics: unknown metric '{}'", m));
  for (const std::string& p : split(a.metric_percentiles, ',')) {
    size_t used = 0;
    double v = -1;
    try {
      v = std::stod(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != p.size() || !(v >= 0 && v <= 100))
      throw std::invalid_argument(
          fmt::format("--metric-percentiles: '{}' is not a number in [0, 100]", p));
    c.percentiles.push_back(v);
  }
  c.slo = parse_goodput(a.goodput);
  // The whole schedule, so a rate too low for the clock fails here, before
  // anything is sent (throws std::invalid_argument).
  arrival_times(static_cast<size_t>(a.num_prompts), a.request_rate, a.burstiness, a.seed);
  cfg.endpoint.timeout = request_timeout(a.request_timeout_s);

  // Everything the result file needs is checked before the run, not after.
  for (const std::string& kv : a.metadata) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument("--metadata takes KEY=VALUE, got '" + kv + "'");
    c.metadata[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  c.save = a.save_result || !a.result_filename.empty();
  if (c.save) check_result_location(a.result_dir, a.result_filename);

  BaseUrl target;
  if (!a.base_url.empty()) {
    target = parse_base_url(a.base_url);
  } else {
    if (a.port <= 0 || a.port > 65535)
      throw std::invalid_argument(fmt::format("--port must be in 1-65535, got {}", a.port));
    target.host = a.host;
    target.port = static_cast<uint16_t>(a.port);
  }
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::resolver resolver(ioc);
    boost::system::error_code ec;
    auto found = resolver.resolve(target.host, std::to_string(target.port), ec);
    if (ec || found.empty())
      throw std::runtime_error(fmt::format("cannot resolve host '{}': {}", target.host,
                                           ec ? ec.message() : "no address"));
    cfg.endpoint.address = found.begin()->endpoint();
  }
  const bool v6 = target.host.find(':') != std::string::npos;
  cfg.endpoint.host = v6 ? fmt::format("[{}]:{}", target.host, target.port)
                         : fmt::format("{}:{}", target.host, target.port);
  // vLLM's api_url = base_url + endpoint.
  cfg.endpoint.path = target.path + endpoint;
  if (const char* key = std::getenv("OPENAI_API_KEY")) cfg.endpoint.api_key = key;
  cfg.options.model = a.model;
  cfg.options.prompt_token_ids = a.prompt_token_ids;
  cfg.options.ignore_eos = a.ignore_eos;
  cfg.options.logprobs = a.logprobs;
  cfg.request_rate = a.request_rate;
  cfg.burstiness = a.burstiness;
  cfg.max_concurrency = a.max_concurrency;
  cfg.seed = a.seed;
  cfg.progress = !a.disable_tqdm;
  return c;
}

int run(const Args& a) {
  const Checked checked = check_options(a);
  const RunConfig& cfg = checked.cfg;
  const std::vector<std::string>& metrics = checked.metrics;
  const GoodputSlo& slo = checked.slo;
  std::shared_ptr<pagoda::Tokenizer> tokenizer = pagoda::load_tokenizer(checked.tok_dir);

  std::vector<SampleRequest> samples;
  if (a.dataset_name == "sharegpt") {
    samples = sample_sharegpt(load_json_file(a.dataset_path), *tokenizer, a.num_prompts, a.seed,
                              a.sharegpt_output_len);
  } else {
    int64_t mismatch = 0;
    samples = sample_random(*tokenizer, a.num_prompts, a.random, a.seed, &mismatch);
    if (mismatch != 0)
      std::cerr << fmt::format(
          "pagoda-bench: warning: across all generated prompts, there were {} {} tokens than "
          "drawn after decoding and re-encoding (prompt_len counts the real length)\n",
          std::abs(mismatch), mismatch > 0 ? "more" : "fewer");
  }
  warn_if_file_limit_low(pagoda::loadtest::raise_file_limit(), a.num_prompts, a.max_concurrency);

  if (!a.skip_test_run) {
    std::cout << "Starting initial single prompt test run..." << std::endl;
    RequestResult test = run_one(samples.front(), cfg);
    if (!test.success) {
      std::cerr << "Initial test run failed - Please make sure benchmark arguments are correctly "
                   "specified. Error: "
                << test.error << "\n";
      return 1;
    }
    std::cout << "Initial test run completed. Starting main benchmark run..." << std::endl;
  }
  std::cout << fmt::format("Traffic request rate: {}\n", py_float(a.request_rate));
  std::cout << fmt::format("Burstiness factor: {} ({})\n", py_float(a.burstiness),
                           a.burstiness == 1.0 ? "Poisson process" : "Gamma distribution");
  std::cout << fmt::format("Maximum request concurrency: {}\n",
                           a.max_concurrency > 0 ? fmt::format("{}", a.max_concurrency) : "None")
            << std::flush;

  RunOutput run = run_benchmark(samples, cfg);
  auto count = [&](const std::string& text) {
    return static_cast<int64_t>(tokenizer->encode(text, false).size());
  };
  const BenchmarkMetrics m = calculate_metrics(run.results, std::max(run.duration_s, 1e-9), count,
                                               checked.percentiles, slo);
  ReportOptions ro;
  ro.percentile_metrics = metrics;
  ro.goodput = !slo.empty();
  ro.request_rate = a.request_rate;
  ro.burstiness = a.burstiness;
  ro.max_concurrency = a.max_concurrency;
  std::cout << format_summary(m, run.duration_s, ro) << format_errors(run.results) << std::flush;
  if (m.failed_client_side > 0)
    std::cerr << fmt::format(
        "pagoda-bench: warning: {} of the {} failed requests failed on this machine, not the "
        "server (first: {}); raise the open-file limit (ulimit -n) or use --max-concurrency\n",
        m.failed_client_side, m.failed, first_client_side_error(run.results));

  if (checked.save) {
    nlohmann::json j;
    const std::string stamp = now_stamp();
    j["date"] = stamp;
    j["backend"] = a.backend;
    j["model_id"] = a.model;
    j["tokenizer_id"] = checked.tok_dir;
    j["num_prompts"] = a.num_prompts;
    j.update(checked.metadata);
    j.update(result_json(m, run.results, run.duration_s, ro, a.save_detailed));
    std::string name = a.result_filename;
    if (name.empty()) {
      std::string base = fs::path(a.model).filename().string();
      if (base.empty()) base = fs::path(a.model).parent_path().filename().string();
      name =
          fmt::format("{}-{}qps{}-{}-{}.json", a.backend, py_float(a.request_rate),
                      a.max_concurrency > 0 ? fmt::format("-concurrency{}", a.max_concurrency) : "",
                      base, stamp);
    }
    if (!a.result_dir.empty()) name = (fs::path(a.result_dir) / name).string();
    std::ofstream f(name);
    f << dump_result(j);
    f.close();
    if (!f) throw std::runtime_error("cannot write " + name);
    std::cout << "Results written to " << name << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pagoda-bench: serving benchmark in the manner of vLLM's benchmark_serving.py"};
  app.require_subcommand(1);
  Args a;
  CLI::App* serve = app.add_subcommand("serve", "Benchmark a running OpenAI-compatible server");
  // A repeated option keeps its last value, as vLLM's argparse does
  // (CLI11's default is an error); --goodput and --metadata collect. Every
  // occurrence is checked all the same (check_every_occurrence below).
  serve->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  serve->add_option("--backend", a.backend, "openai | openai-chat | pagoda-ws")
      ->check(CLI::IsMember({"openai", "openai-chat", "pagoda-ws"}));
  serve->add_option("--base-url", a.base_url, "http://HOST:PORT (instead of --host/--port)");
  serve->add_option("--host", a.host, "Server host (default 127.0.0.1)");
  serve->add_option("--port", a.port, "Server port (default 8000)")
      ->check(pagoda::cli::int_in(1, 65535));
  serve->add_option(
      "--endpoint", a.endpoint,
      "API path (default /v1/completions; openai-chat /v1/chat/completions; pagoda-ws /v1/ws)");
  serve
      ->add_option("--model", a.model,
                   "Model name sent in requests (a directory also serves as tokenizer)")
      ->required();
  serve->add_option("--tokenizer", a.tokenizer,
                    "Model directory whose tokenizer counts tokens (default --model)");
  serve->add_option("--dataset-name", a.dataset_name, "sharegpt | random")
      ->check(CLI::IsMember({"sharegpt", "random"}));
  serve->add_option("--dataset-path", a.dataset_path, "ShareGPT-format JSON file");
  serve
      ->add_option("--num-prompts", a.num_prompts,
                   fmt::format("Number of prompts (default 1000, at most {})", kMaxNumPrompts))
      ->check(pagoda::cli::int_in(1, kMaxNumPrompts,
                                  "pagoda-bench builds every prompt before the run"));
  serve
      ->add_option("--sharegpt-output-len", a.sharegpt_output_len,
                   "Output length of every ShareGPT request")
      ->check(pagoda::cli::int_in(1, kMaxLenTokens));
  serve
      ->add_option("--random-input-len", a.random.input_len,
                   "Random prompts' length in tokens, BOS included (default 1024)")
      ->check(pagoda::cli::int_in(0, kMaxLenTokens));
  serve
      ->add_option("--random-output-len", a.random.output_len,
                   "Random requests' output length (default 128)")
      ->check(pagoda::cli::int_in(1, kMaxLenTokens));
  serve->add_option("--random-range-ratio", a.random.range_ratio,
                    "Lengths drawn from [len*(1-r), len*(1+r)], r in [0, 1) (default 0)");
  serve
      ->add_option("--random-prefix-len", a.random.prefix_len,
                   "Fixed random tokens before each random prompt")
      ->check(pagoda::cli::int_in(0, kMaxLenTokens));
  serve->add_flag("--prompt-token-ids", a.prompt_token_ids,
                  "Send each prompt as its list of token ids (openai, pagoda-ws)");
  serve->add_option("--request-rate", a.request_rate, "Requests/s (default inf: all at once)");
  serve->add_option("--burstiness", a.burstiness, "Gamma shape of the arrival gaps (1: Poisson)");
  serve
      ->add_option("--max-concurrency", a.max_concurrency,
                   "Most requests in flight (default 0: no limit)")
      ->check(pagoda::cli::int_in(0, kMaxNumPrompts,
                                  "0: no limit; a run has at most 1000000 requests"));
  serve
      ->add_option("--seed", a.seed,
                   "Seed of the dataset sampling and the arrival times (default 0; 0 to 2**32 - 1, "
                   "as numpy's seed in vLLM's benchmark)")
      ->check(pagoda::cli::int_in(0, kMaxSeed,
                                  "numpy's seed range, which vLLM's benchmark_serving.py uses"));
  serve->add_flag("--ignore-eos", a.ignore_eos, "Send ignore_eos: true");
  serve->add_flag("--disable-tqdm", a.disable_tqdm, "No progress bar");
  serve->add_option("--logprobs", a.logprobs, "logprobs to ask for per token")
      ->check(pagoda::cli::int_in(0, std::numeric_limits<int>::max()));
  serve->add_option("--percentile-metrics", a.percentile_metrics,
                    "Metrics to print percentiles of: ttft,tpot,itl,e2el (default all four)");
  serve->add_option("--metric-percentiles", a.metric_percentiles,
                    "Percentiles to print (default 90,99)");
  serve->add_option("--goodput", a.goodput, "SLOs as KEY:MS (ttft, tpot, e2el)")
      ->expected(1, 3)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  serve->add_flag("--save-result", a.save_result, "Write the results as JSON");
  serve->add_flag("--save-detailed", a.save_detailed,
                  "Also vLLM's per-request lists (with generated texts)");
  serve->add_option("--result-dir", a.result_dir, "Directory of the result file");
  serve->add_option("--result-filename", a.result_filename,
                    "Result file name (implies --save-result)");
  serve->add_option("--metadata", a.metadata, "KEY=VALUE pairs recorded in the result file");
  serve->add_flag("--skip-initial-test", a.skip_test_run,
                  "Do not send the first prompt alone first");
  serve->add_option("--request-timeout", a.request_timeout_s,
                    "Seconds each request may take in all, connect to last byte (default 21600; "
                    ">= 0.001, values past 1e7 clamped)");
  pagoda::cli::check_every_occurrence(*serve);
  // Usage errors exit 2, as argparse does (CLI11's own codes are 100+);
  // --help prints and exits 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(a);
  } catch (const boost::system::system_error& e) {
    std::cerr << "pagoda-bench: " << e.code().message() << "\n";  // what() adds a source location
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "pagoda-bench: " << e.what() << "\n";
    return 2;
  }
}
