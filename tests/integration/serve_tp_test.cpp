// `pagoda serve --device cpu --tensor-parallel-size 2` (and `-tp 2`) on
// stories260K: the same greedy /v1/completions text as TP=1, which is
// llama2.c's run.c text; a size that does not divide the heads exits with
// the clear error before listening.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

std::string model_dir() { return std::string(PAGODA_SOURCE_DIR) + "/models/stories260K"; }

std::string greedy_text(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {model_dir(), "--device", "cpu", "--max-model-len", "256"};
  args.insert(args.end(), extra.begin(), extra.end());
  PagodaServer server(args);
  json r = post_json(server.port(), "/v1/completions",
                     {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"temperature", 0}});
  const int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << status;
  EXPECT_EQ(r["usage"]["completion_tokens"], 200) << r.dump();
  return r["choices"][0]["text"].get<std::string>();
}

TEST(ServeTensorParallel, Tp2GreedyTextEqualsTp1AndLlama2c) {
  const std::string one = greedy_text({});
  const std::string two = greedy_text({"--tensor-parallel-size", "2"});
  const std::string alias = greedy_text({"-tp", "2"});
  EXPECT_EQ(two, one);
  EXPECT_EQ(alias, one);
  // And both are run.c's: its file starts with the prompt and this text.
  std::string ref = read_text_file(shared_path("testvectors/stories260K_runc_greedy_once_upon_a_time.txt"));
  ASSERT_GT(ref.size(), one.size());
  EXPECT_EQ(ref.substr(0, 16 + one.size()), "Once upon a time" + one);
  EXPECT_GT(one.size(), 400u);
}

TEST(ServeTensorParallel, SizeNotDividingHeadsIsAClearError) {
  try {
    PagodaServer server({model_dir(), "--device", "cpu", "--tensor-parallel-size", "3"}, 60);
    server.stop();
    FAIL() << "pagoda listened with --tensor-parallel-size 3 on an 8-head model";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exited before listening"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda::testing_http
