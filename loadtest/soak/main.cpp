// pagoda_soak: a bounded-time soak of `pagoda serve` over loopback (see
// loadtest/README.md). Thousands of connections mix streamed and
// non-streamed completions and chats, /v1/ws requests, hang-ups, cancels,
// slow readers, malformed and oversized input; every request's outcome is
// tracked. Afterwards /metrics must show no running or waiting request, no
// used KV block and no WebSocket stream, and the server's RSS must not grow
// more than a bound after the warm-up. Exit status: 0 all held, 1 a
// violation, 2 a setup error, 77 the open-file limit is too low for the
// connections asked for (ctest's skip code).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "loadtest/common/http_client.h"
#include "loadtest/common/metrics_text.h"
#include "loadtest/common/process_stats.h"
#include "loadtest/common/server_process.h"
#include "loadtest/soak/rss_monitor.h"
#include "loadtest/soak/scenarios.h"

namespace pagoda::loadtest {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Options {
  std::string url;
  std::string pagoda_bin;
  std::vector<std::string> server_args;
  std::string server_log;
  int server_pid = 0;
  double duration_s = 60;
  int connections = 1000;
  double ws_fraction = 0.3;
  int threads = 1;
  double ramp_s = -1;
  double warmup_s = -1;
  double warmup_fraction = 0.5;
  double rss_growth_limit = 0.05;
  int rss_interval_ms = 1000;
  double timeout_s = 120;
  double settle_s = 10;
  uint64_t max_body_bytes = 32u << 20;
  uint64_t seed = 1;
  bool no_chat = false;
  std::vector<std::string> weights;
  std::string json_out;
};

// kind=weight overrides of the default mix.
void apply_weights(SoakContext& ctx, const std::vector<std::string>& specs) {
  for (const auto& spec : specs) {
    size_t eq = spec.find('=');
    bool found = false;
    for (size_t k = 0; k < static_cast<size_t>(Kind::kCount) && eq != std::string::npos; ++k) {
      if (spec.substr(0, eq) == kind_name(static_cast<Kind>(k))) {
        ctx.weights[k] = static_cast<unsigned>(std::stoul(spec.substr(eq + 1)));
        found = true;
      }
    }
    if (!found) throw std::invalid_argument("--weight wants KIND=N with a known kind, got " + spec);
  }
}

void default_weights(SoakContext& ctx) {
  auto set = [&](Kind k, unsigned w) { ctx.weights[static_cast<size_t>(k)] = w; };
  set(Kind::kSseCompletion, 22);
  set(Kind::kSseChat, 12);
  set(Kind::kCompletion, 12);
  set(Kind::kChat, 8);
  set(Kind::kHttpDisconnect, 14);
  set(Kind::kSlowReader, 4);
  set(Kind::kMalformed, 12);
  set(Kind::kOversizedPrompt, 6);
  set(Kind::kOversizedBody, 4);
  set(Kind::kPartialRequest, 4);
  set(Kind::kWsRequest, 40);
  set(Kind::kWsCancel, 14);
  set(Kind::kWsClose, 10);
  set(Kind::kWsDrop, 8);
  set(Kind::kWsResume, 8);
  set(Kind::kWsMalformed, 12);
  set(Kind::kWsOversized, 6);
}

struct Gauges {
  std::map<std::string, double> values;
  std::vector<std::string> missing;
};

const std::vector<std::string> kIdleGauges = {
    "pagoda:num_requests_running", "pagoda:num_requests_waiting", "pagoda:kv_cache_used_blocks",
    "pagoda:ws_streams", "pagoda:ws_streams_detached"};

Gauges read_gauges(const Target& target) {
  HttpResult r = blocking_request(target, "/metrics", "", seconds(30));
  if (r.status != 200) throw std::runtime_error(fmt::format("/metrics answered {}", r.status));
  auto samples = sum_samples_by_name(r.body);
  Gauges g;
  for (const auto& name : kIdleGauges) {
    auto v = sample(samples, name);
    if (v)
      g.values[name] = *v;
    else
      g.missing.push_back(name);
  }
  return g;
}

bool idle(const Gauges& g) {
  if (!g.missing.empty()) return false;
  for (const auto& [name, v] : g.values)
    if (v != 0) return false;
  return true;
}

int run(const Options& opt) {
  std::vector<std::string> violations;

  // Descriptors: one per connection here, and as many in a server we start.
  FileLimit lim = raise_file_limit();
  const uint64_t need = static_cast<uint64_t>(opt.connections) + 64;
  fmt::print("RLIMIT_NOFILE: soft {} (raised to the hard limit {}); {} connections need about {}\n",
             lim.soft, lim.hard, opt.connections, need);
  if (lim.soft < need) {
    fmt::print(stderr,
               "pagoda_soak: the open-file hard limit ({}) is below the {} descriptors {} "
               "connections need in this "
               "process (and as many in the server): raise it (ulimit -Hn, limits.conf, the "
               "container's nofile) or "
               "use fewer --connections\n",
               lim.hard, need, opt.connections);
    return 77;
  }

  std::unique_ptr<ServerProcess> server;
  Target target;
  pid_t pid = opt.server_pid;
  if (!opt.pagoda_bin.empty()) {
    server = std::make_unique<ServerProcess>(opt.pagoda_bin, opt.server_args, opt.server_log,
                                             seconds(120));
    target.port = server->port();
    pid = server->pid();
    fmt::print("started pagoda serve (pid {}) on port {}; log: {}\n", pid, target.port,
               opt.server_log.empty() ? "discarded" : opt.server_log);
  } else {
    target = parse_target_url(opt.url);
  }

  SoakContext ctx;
  Tally tally;
  ctx.tally = &tally;
  ctx.endpoint = {boost::asio::ip::make_address(target.host), target.port};
  ctx.timeout = milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  ctx.max_body_bytes = opt.max_body_bytes;
  ctx.id_prefix = fmt::format("soak-{}-{}-", ::getpid(), opt.seed);
  default_weights(ctx);
  apply_weights(ctx, opt.weights);

  // The model: its id and context length (oversized prompts are sized from it).
  {
    HttpResult r = blocking_request(target, "/v1/models", "", seconds(30));
    json j = json::parse(r.body, nullptr, false);
    if (r.status != 200 || j.is_discarded() || !j.contains("data") || j["data"].empty()) {
      fmt::print(stderr, "pagoda_soak: /v1/models answered {}: {}\n", r.status,
                 r.body.substr(0, 200));
      return 2;
    }
    ctx.model.id = j["data"][0].value("id", "");
    ctx.model.max_model_len = j["data"][0].value("max_model_len", int64_t{2048});
  }
  // Chat needs a chat template: probe once (a 400 here turns the chat kinds off).
  ctx.model.chat = !opt.no_chat;
  if (ctx.model.chat) {
    json probe = {{"model", ctx.model.id},
                  {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                  {"max_tokens", 1}};
    HttpResult r = blocking_request(target, "/v1/chat/completions", probe.dump(), seconds(60));
    if (r.status != 200) {
      fmt::print("chat disabled: a one-token chat answered {}: {}\n", r.status,
                 r.body.substr(0, 200));
      ctx.model.chat = false;
    }
  }
  if (!ctx.model.chat)
    for (Kind k : {Kind::kSseChat, Kind::kChat}) ctx.weights[static_cast<size_t>(k)] = 0;
  Gauges before = read_gauges(target);
  for (const auto& m : before.missing) violations.push_back("metric missing from /metrics: " + m);

  const double ramp_s = opt.ramp_s >= 0 ? opt.ramp_s : std::min(10.0, opt.duration_s / 10);
  const double warmup_s =
      opt.warmup_s >= 0 ? opt.warmup_s : std::min(60.0, opt.duration_s * opt.warmup_fraction);
  const int ws_clients = static_cast<int>(opt.connections * opt.ws_fraction);
  fmt::print(
      "model {} (max_model_len {}, chat {}); {} connections ({} HTTP, {} WebSocket) for {} s, ramp "
      "{} s, "
      "warm-up {} s, {} client thread(s), seed {}\n",
      ctx.model.id, ctx.model.max_model_len, ctx.model.chat ? "on" : "off", opt.connections,
      opt.connections - ws_clients, ws_clients, opt.duration_s, ramp_s, warmup_s, opt.threads,
      opt.seed);
  std::fflush(stdout);

  std::unique_ptr<RssMonitor> rss;
  if (pid > 0) {
    rss = std::make_unique<RssMonitor>(pid, milliseconds(opt.rss_interval_ms));
    rss->start();
  }
  const auto t0 = std::chrono::steady_clock::now();
  ctx.stop_at = t0 + milliseconds(static_cast<int64_t>(opt.duration_s * 1000));

  std::vector<std::unique_ptr<boost::asio::io_context>> iocs;
  for (int t = 0; t < opt.threads; ++t)
    iocs.push_back(std::make_unique<boost::asio::io_context>(1));
  std::atomic<int> running_clients{opt.connections};
  for (int i = 0; i < opt.connections; ++i) {
    auto delay =
        milliseconds(static_cast<int64_t>(ramp_s * 1000 * i / std::max(1, opt.connections)));
    auto& ioc = *iocs[static_cast<size_t>(i % opt.threads)];
    uint64_t seed = opt.seed * 1000003 + static_cast<uint64_t>(i);
    auto done = [&running_clients](std::exception_ptr e) {
      running_clients.fetch_sub(1);
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          fmt::print(stderr, "client ended with an exception: {}\n", ex.what());
        }
      }
    };
    // WebSocket clients spread evenly among the HTTP ones.
    bool ws =
        ws_clients > 0 && (i * static_cast<int64_t>(ws_clients)) % opt.connections < ws_clients;
    if (ws)
      boost::asio::co_spawn(ioc, ws_client(ctx, seed, delay), done);
    else
      boost::asio::co_spawn(ioc, http_client(ctx, seed, delay), done);
  }
  std::vector<std::thread> threads;
  for (auto& ioc : iocs) threads.emplace_back([&ioc] { ioc->run(); });
  // Progress once every 10 s, and the drain bound: clients still running
  // 2 × timeout after the end are stopped and reported.
  const auto drain_deadline = ctx.stop_at + 2 * ctx.timeout;
  auto next_report = t0 + seconds(10);
  while (running_clients.load() > 0 && std::chrono::steady_clock::now() < drain_deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    if (std::chrono::steady_clock::now() >= next_report) {
      next_report += seconds(10);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      auto s = rss ? rss->samples() : std::vector<RssSample>{};
      fmt::print(
          "[{:6.1f} s] requests {} (completed {}, client-aborted {}, rejected {}, lost {}), "
          "clients {}{}\n",
          t, tally.total(), tally.total(Outcome::kCompleted), tally.total(Outcome::kClientAborted),
          tally.total(Outcome::kRejectedAsExpected), tally.total(Outcome::kLost),
          running_clients.load(),
          s.empty() ? "" : fmt::format(", server RSS {} MiB", s.back().kib / 1024));
      std::fflush(stdout);
    }
  }
  if (running_clients.load() > 0) {
    violations.push_back(fmt::format("{} clients still running {} s after the end",
                                     running_clients.load(), 2 * opt.timeout_s));
    for (auto& ioc : iocs) ioc->stop();
  }
  for (auto& t : threads) t.join();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rss) rss->stop();

  // The server must return to idle: nothing running or waiting, no KV block,
  // no WebSocket stream kept. Every client has finished or left by now, so
  // this takes the server's abort handling only; the default bound (10 s) is
  // below the WebSocket resume grace (30 s), so a stream wrongly kept for a
  // resume shows.
  Gauges after;
  const auto settle_start = std::chrono::steady_clock::now();
  const auto settle_deadline =
      settle_start + milliseconds(static_cast<int64_t>(opt.settle_s * 1000));
  for (;;) {
    after = read_gauges(target);
    if (idle(after) || std::chrono::steady_clock::now() >= settle_deadline) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  const double settle_took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - settle_start).count();
  for (const auto& [name, v] : after.values)
    if (v != 0)
      violations.push_back(fmt::format("{} = {} after {} s of settling", name, v, opt.settle_s));
  HttpResult health = blocking_request(target, "/health", "", seconds(30));
  if (health.status != 200) violations.push_back(fmt::format("/health answered {}", health.status));

  RssVerdict rv = rss ? rss->verdict(warmup_s) : RssVerdict{};
  if (rss && !rv.measured) violations.push_back("RSS: no samples both in and after the warm-up");
  if (rv.measured && rv.growth >= opt.rss_growth_limit)
    violations.push_back(fmt::format("server RSS grew {:.1f} % after the warm-up (limit {:.1f} %)",
                                     rv.growth * 100, opt.rss_growth_limit * 100));

  bool clean_exit = true;
  int exit_status = 0;
  if (server) {
    if (!server->alive()) violations.push_back("the server exited during the soak");
    exit_status = server->stop(seconds(15), &clean_exit);
    if (!clean_exit)
      violations.push_back("the server did not exit within 15 s of SIGTERM");
    else if (!WIFEXITED(exit_status) || WEXITSTATUS(exit_status) != 0)
      violations.push_back(
          fmt::format("the server's exit status after SIGTERM is {}", exit_status));
  }

  const uint64_t lost = tally.total(Outcome::kLost);
  if (lost > 0) violations.push_back(fmt::format("{} requests lost", lost));

  fmt::print(
      "\n== pagoda_soak summary ==\n{} connections, {:.0f} s of load ({:.1f} s with the drain), {} "
      "requests "
      "({:.1f}/s)\n\n{}\n",
      opt.connections, opt.duration_s, load_s, tally.total(), tally.total() / load_s,
      tally.table());
  fmt::print("lost = {}\n", lost);
  for (const auto& why : tally.lost_reasons()) fmt::print("  lost: {}\n", why);
  const double leaked = after.values.count("pagoda:kv_cache_used_blocks")
                            ? after.values["pagoda:kv_cache_used_blocks"]
                            : -1;
  fmt::print(
      "leaked KV blocks = {}; running = {}, waiting = {}, ws_streams = {}, ws_streams_detached = "
      "{} ({:.1f} s after the last client finished)\n",
      leaked, after.values["pagoda:num_requests_running"],
      after.values["pagoda:num_requests_waiting"], after.values["pagoda:ws_streams"],
      after.values["pagoda:ws_streams_detached"], settle_took_s);
  if (rss) {
    fmt::print(
        "server RSS (MiB): first {:.1f}, warm-up max {:.1f}, last {:.1f}, max {:.1f}, max after "
        "warm-up {:.1f} "
        "(growth {:+.2f} %, limit {:.1f} %)\n",
        rv.first_kib / 1024.0, rv.baseline_kib / 1024.0, rv.last_kib / 1024.0, rv.max_kib / 1024.0,
        rv.max_after_kib / 1024.0, rv.growth * 100, opt.rss_growth_limit * 100);
  } else {
    fmt::print(
        "server RSS: not measured (give --server-pid, or let pagoda_soak start the server with "
        "--pagoda)\n");
  }
  if (server)
    fmt::print("server shutdown after SIGTERM: {}\n", clean_exit ? "clean" : "NOT within 15 s");
  for (const auto& v : violations) fmt::print("VIOLATION: {}\n", v);
  fmt::print("{}\n", violations.empty() ? "SOAK PASSED" : "SOAK FAILED");

  if (!opt.json_out.empty()) {
    json out = {{"connections", opt.connections},
                {"duration_s", opt.duration_s},
                {"load_s", load_s},
                {"requests", tally.total()},
                {"by_kind", tally.to_json()},
                {"lost", lost},
                {"lost_reasons", tally.lost_reasons()},
                {"final_gauges", after.values},
                {"settle_s", settle_took_s},
                {"rss_kib",
                 {{"first", rv.first_kib},
                  {"warmup_max", rv.baseline_kib},
                  {"last", rv.last_kib},
                  {"max", rv.max_kib},
                  {"max_after_warmup", rv.max_after_kib},
                  {"growth", rv.growth}}},
                {"violations", violations},
                {"passed", violations.empty()}};
    std::ofstream(opt.json_out) << out.dump(2) << "\n";
  }
  return violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace pagoda::loadtest

int main(int argc, char** argv) {
  pagoda::loadtest::Options opt;
  CLI::App app{"pagoda_soak: a bounded-time soak of pagoda serve (see loadtest/README.md)"};
  auto* url = app.add_option("--url", opt.url, "A running server, http://HOST:PORT");
  auto* bin = app.add_option("--pagoda", opt.pagoda_bin,
                             "Start this pagoda binary instead (`serve` on a free port)");
  url->excludes(bin);
  app.add_option("--server-arg", opt.server_args,
                 "An argument after `pagoda serve` (repeat; e.g. the model dir)")
      ->allow_extra_args(false);
  app.add_option("--server-log", opt.server_log,
                 "Where the started server's output goes (default: discarded)");
  app.add_option("--server-pid", opt.server_pid, "PID of the --url server, for its RSS");
  app.add_option("--duration", opt.duration_s, "Seconds during which scenarios start")
      ->check(CLI::PositiveNumber);
  app.add_option("--connections", opt.connections, "Concurrent client connections")
      ->check(CLI::PositiveNumber);
  app.add_option("--ws-fraction", opt.ws_fraction, "Fraction of the connections on /v1/ws")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--threads", opt.threads, "Client threads")->check(CLI::PositiveNumber);
  app.add_option("--ramp", opt.ramp_s,
                 "Seconds over which connections open (default min(10, duration/10))");
  app.add_option("--warmup", opt.warmup_s,
                 "Seconds of warm-up before RSS growth counts (default min(60, duration × "
                 "--warmup-fraction))");
  app.add_option("--warmup-fraction", opt.warmup_fraction, "Warm-up as a fraction of the duration")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--rss-growth-limit", opt.rss_growth_limit,
                 "Largest allowed RSS growth after the warm-up (fraction)");
  app.add_option("--rss-interval-ms", opt.rss_interval_ms, "RSS sampling interval")
      ->check(CLI::PositiveNumber);
  app.add_option("--timeout", opt.timeout_s,
                 "Seconds any connect, write or wait for the next bytes may take")
      ->check(CLI::PositiveNumber);
  app.add_option("--settle", opt.settle_s,
                 "Seconds the server gets to return to idle after the load");
  app.add_option("--max-body-bytes", opt.max_body_bytes,
                 "The server's request body limit (413 beyond)");
  app.add_option("--seed", opt.seed, "Random seed");
  app.add_flag("--no-chat", opt.no_chat, "No chat requests (a model without a chat template)");
  app.add_option("--weight", opt.weights,
                 "KIND=N: relative weight of a scenario kind (repeat; 0 disables)");
  app.add_option("--json-out", opt.json_out, "Write the summary as JSON here");
  CLI11_PARSE(app, argc, argv);
  if (opt.url.empty() && opt.pagoda_bin.empty()) {
    std::cerr << "pagoda_soak: give --url or --pagoda\n";
    return 2;
  }
  try {
    return pagoda::loadtest::run(opt);
  } catch (const std::exception& e) {
    std::cerr << "pagoda_soak: " << e.what() << "\n";
    return 2;
  }
}
