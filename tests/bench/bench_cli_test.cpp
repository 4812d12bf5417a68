// pagoda-bench's command line: usage errors exit 2 with a readable message
// (argparse's status; CLI11's own codes are 100+), and options the result
// file needs are checked before anything is sent. Runs the binary.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/bench/drip_server.h"

namespace {

namespace fs = std::filesystem;

const std::string kModel = PAGODA_SOURCE_DIR "/models/stories260K";

struct Ran {
  int status = -1;
  std::string out;  // stdout and stderr
};

Ran bench(const std::string& args, const std::string& prefix = "") {
  const std::string cmd = fmt::format("{}'{}' serve --model '{}' --disable-tqdm {} 2>&1", prefix,
                                      PAGODA_BENCH_BIN, kModel, args);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  Ran r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A port with nothing listening (bound, then closed).
uint16_t closed_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

const std::string kRandom = "--dataset-name random --random-input-len 16 --random-output-len 4";

TEST(BenchCli, UsageErrorsExit2WithReadableMessages) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--random-output-len 0", "--random-output-len: must be in [1, 10000000], got 0"},
      {"--random-input-len x1", "--random-input-len: invalid int value: 'x1'"},
      {"--no-such-option", "no-such-option"},
      {"--backend nope", "--backend"},
      {"--max-concurrency -1", "--max-concurrency: must be in [0, 1000000], got -1"},
      {"--request-timeout 0", "--request-timeout must be > 0"},
      {"--request-timeout -5", "--request-timeout must be > 0"},
      {"--request-timeout 0.0001", "at least 0.001 seconds"},
      {"--metric-percentiles abc", "--metric-percentiles: 'abc' is not a number"},
      {"--metadata foo", "--metadata takes KEY=VALUE, got 'foo'"},
      {"--base-url http://127.0.0.1:8123abc", "port '8123abc'"},
      {"--base-url https://127.0.0.1:8123", "https is not supported"},
      {"--request-rate 1e-12", "--request-rate 1e-12 is too low"},
      {"--base-url http://no-such-host.invalid:80", "cannot resolve host 'no-such-host.invalid'"},
      // Every occurrence of an option is converted, as argparse does: a
      // bad value that a later one replaces is still an error, and one
      // after a good value is named alone.
      {"--request-rate abc --request-rate 5", "--request-rate: invalid float value: 'abc'"},
      {"--burstiness 1 --burstiness x", "--burstiness: invalid float value: 'x'"},
      {"--num-prompts x --num-prompts 2", "--num-prompts: invalid int value: 'x'"},
      {"--port 8000 --port 80a", "--port: invalid int value: '80a'"},
  };
  for (const Case& c : cases) {
    const Ran r = bench(kRandom + " --num-prompts 2 " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("1797693"), std::string::npos) << r.out;           // no DBL_MAX
    EXPECT_EQ(r.out.find("boost/"), std::string::npos) << r.out;            // no source location
    EXPECT_EQ(r.out.find("Starting initial"), std::string::npos) << r.out;  // nothing sent
  }
  Ran r = bench("--num-prompts 0");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--num-prompts: must be in [1, 1000000], got 0"), std::string::npos)
      << r.out;
  EXPECT_EQ(bench("--help").status, 0);
}

// Integer options are read exactly and bounded before anything is built:
// CLI11 alone saturates 99999999999999999999 to INT64_MAX and reads -1 as
// UINT64_MAX for --seed, and --num-prompts INT64_MAX built prompts until
// std::bad_alloc. --seed takes numpy's range (vLLM's benchmark seeds
// np.random with it, which rejects the rest).
TEST(BenchCli, IntegerOptionsOutOfRangeAreRejectedNamingTheFlag) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--num-prompts 9223372036854775807",
       "--num-prompts: must be in [1, 1000000], got 9223372036854775807"},
      {"--num-prompts 99999999999999999999999",
       "--num-prompts: must be in [1, 1000000], got 99999999999999999999999"},
      {"--num-prompts -99999999999999999999999",
       "--num-prompts: must be in [1, 1000000], got -99999999999999999999999"},
      {"--num-prompts 1.5", "--num-prompts: invalid int value: '1.5'"},
      {"--max-concurrency 99999999999999999999",
       "--max-concurrency: must be in [0, 1000000], got 99999999999999999999"},
      {"--seed -1", "--seed: must be in [0, 4294967295], got -1"},
      {"--seed 4294967296", "--seed: must be in [0, 4294967295], got 4294967296"},
      {"--seed 99999999999999999999",
       "--seed: must be in [0, 4294967295], got 99999999999999999999"},
      {"--random-output-len 99999999999999999999",
       "--random-output-len: must be in [1, 10000000], got 99999999999999999999"},
      {"--sharegpt-output-len -3", "--sharegpt-output-len: must be in [1, 10000000], got -3"},
      {"--port 99999999999", "--port: must be in [1, 65535], got 99999999999"},
      {"--logprobs -5", "--logprobs: must be in [0, 2147483647], got -5"},
      // Each within its range, their product not: refused before building.
      {"--num-prompts 1000000 --random-input-len 1000000 --random-output-len 4",
       "more than the 1000000000 prompt tokens pagoda-bench builds"},
  };
  for (const Case& c : cases) {
    // Were the counts not bounded: ulimit -v makes building the prompts
    // fail here instead of taking the machine's memory, timeout ends the
    // 10^12-token case.
    const Ran r = bench("--dataset-name random " + c.args, "ulimit -v 4000000 && timeout 60 ");
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Starting initial"), std::string::npos) << r.out;  // nothing sent
    EXPECT_EQ(r.out.find("bad_alloc"), std::string::npos) << r.out;
  }
  // In range, with a sign or leading zeros: read as decimal (CLI11 alone
  // reads "010" as octal 8). Nothing listens there: the test request fails.
  const Ran ok =
      bench(kRandom + " --num-prompts +2 --seed 4294967295 --max-concurrency 010 --port " +
            std::to_string(closed_port()));
  EXPECT_EQ(ok.status, 1) << ok.out;
  EXPECT_NE(ok.out.find("Initial test run failed"), std::string::npos) << ok.out;
}

// Every option is checked before the tokenizer is loaded and the dataset
// built (a large one takes a while to build): a bad option is the error
// even with a --dataset-path that does not exist (the percentile, goodput,
// rate, timeout, metadata, backend and URL options had been checked only
// after the dataset was built).
TEST(BenchCli, OptionsAreCheckedBeforeTheDatasetIsBuilt) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--metric-percentiles abc", "--metric-percentiles: 'abc' is not a number"},
      {"--percentile-metrics ttft,nope", "--percentile-metrics: unknown metric 'nope'"},
      {"--goodput nope:5", "--goodput: unknown metric 'nope'"},
      {"--request-rate 1e-12", "--request-rate 1e-12 is too low"},
      {"--request-timeout 0", "--request-timeout must be > 0"},
      {"--metadata foo", "--metadata takes KEY=VALUE, got 'foo'"},
      {"--backend openai-chat --prompt-token-ids", "--prompt-token-ids needs a completions"},
      {"--base-url https://127.0.0.1:8123", "https is not supported"},
      {"--random-range-ratio 1", "--random-range-ratio must be in [0, 1), got 1"},
  };
  for (const Case& c : cases) {
    const std::string dataset = c.args.find("--random-") == 0
                                    ? "--dataset-name random --tokenizer /no/such/tokenizer"
                                    : "--dataset-name sharegpt --dataset-path /no/such/file.json";
    const Ran r = bench(dataset + " --num-prompts 2 " + c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("/no/such/"), std::string::npos) << c.args << "\n" << r.out;
  }
}

// A directory or a missing file as --dataset-path says so (a directory
// read as an empty stream was "/tmp is not valid JSON"); a URL as
// --endpoint is refused before anything is built.
TEST(BenchCli, DatasetPathAndEndpointMistakesAreNamed) {
  const fs::path dir = fs::temp_directory_path();
  Ran r = bench("--num-prompts 2 --dataset-name sharegpt --dataset-path " + dir.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(fmt::format("dataset path {} is a directory", dir.string())),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("not valid JSON"), std::string::npos) << r.out;
  r = bench("--num-prompts 2 --dataset-name sharegpt --dataset-path /no/such/file.json");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("dataset path /no/such/file.json does not exist"), std::string::npos)
      << r.out;
  r = bench(kRandom + " --num-prompts 2 --endpoint http://127.0.0.1:8000/v1/completions");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--endpoint takes the API path"), std::string::npos) << r.out;
}

// --endpoint without its leading "/" is the path a user means (vLLM's
// base_url + endpoint would make "http://127.0.0.1:8000v1/completions").
TEST(BenchCli, EndpointWithoutLeadingSlashIsThatPath) {
  std::string target;
  Ran r;
  {
    pagoda::bench::DripServer server([&target](boost::asio::ip::tcp::socket& s,
                                               std::atomic<bool>&) {
      boost::beast::flat_buffer buffer;
      boost::beast::http::request<boost::beast::http::string_body> req;
      boost::beast::http::read(s, buffer, req);
      target = std::string(req.target());
      boost::asio::write(
          s, boost::asio::buffer(std::string(
                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 "data: {\"id\":\"c\",\"choices\":[{\"text\":\"a\"}]}\n\n"
                 "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                 "\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")));
      s.shutdown(boost::asio::ip::tcp::socket::shutdown_both);
    });
    r = bench(kRandom + " --num-prompts 1 --skip-initial-test --endpoint v1/completions " +
              "--port " + std::to_string(server.port()));
  }  // the server's thread joined: target is written
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--endpoint v1/completions taken as /v1/completions"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Successful requests:                     1"), std::string::npos) << r.out;
  EXPECT_EQ(target, "/v1/completions");
}

// A repeated option keeps its last value, as vLLM's argparse (CLI11's
// default was "--num-prompts: At Most 1 required but received 2");
// --goodput and --metadata still collect every value.
TEST(BenchCli, RepeatedOptionKeepsTheLastValue) {
  const fs::path result =
      fs::temp_directory_path() / fmt::format("pagoda_bench_repeat_{}.json", ::getpid());
  const Ran r = bench(
      "--dataset-name random --random-input-len 16 --random-input-len 12 --random-output-len 4 "
      "--num-prompts 3 --num-prompts 2 --seed 1 --seed 2 --skip-initial-test --goodput ttft:100 "
      "--goodput tpot:100 --metadata a=1 --metadata b=2 --port 1 --port " +
      std::to_string(closed_port()) + " --result-filename " + result.string());
  EXPECT_EQ(r.status, 0) << r.out;
  std::ifstream in(result);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["num_prompts"], 2);
  EXPECT_EQ(j["completed"].get<int>() + j["failed"].get<int>(), 2);
  EXPECT_EQ(j["a"], "1");
  EXPECT_EQ(j["b"], "2");
  fs::remove(result);
}

TEST(BenchCli, ResultLocationCheckedBeforeTheRun) {
  const std::string port = std::to_string(closed_port());
  const std::string base =
      kRandom + " --num-prompts 2 --skip-initial-test --base-url http://127.0.0.1:" + port;
  // Unwritable: a file inside a directory that does not exist (and cannot,
  // under a regular file).
  const fs::path dir = fs::temp_directory_path() / fmt::format("pagoda_bench_cli_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::FILE* f = std::fopen((dir / "plain").c_str(), "w");
    std::fclose(f);
  }
  Ran r = bench(base + " --result-filename " + (dir / "plain" / "x.json").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cannot write the result file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  // A missing --result-dir is created (vLLM's os.makedirs), the file lands there.
  const fs::path made = dir / "a" / "b";
  r = bench(base + " --result-dir " + made.string() + " --result-filename out.json");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(made / "out.json")) << r.out;
  // --metadata is checked first too (and then recorded).
  r = bench(base + " --metadata foo --result-filename " + (dir / "m.json").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_FALSE(fs::exists(dir / "m.json"));
  fs::remove_all(dir);
}

TEST(BenchCli, LowOpenFileLimitWarnsAndCountsClientSideFailures) {
  const std::string port = std::to_string(closed_port());
  // 300 requests at once under a limit of 64: a warning first; the
  // requests that find no descriptor are counted as client-side.
  const Ran r =
      bench(kRandom + " --num-prompts 300 --skip-initial-test --base-url http://127.0.0.1:" + port,
            "ulimit -n 64 && ");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("open-file limit is 64"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("open-file limit is 64"), r.out.find("Serving Benchmark Result")) << r.out;
  EXPECT_NE(r.out.find("of which client-side:"), std::string::npos) << r.out;
}

}  // namespace
