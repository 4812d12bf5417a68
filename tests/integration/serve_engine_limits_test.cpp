// Requests against the engine's own limits, on the real `pagoda serve` with
// small ones (--max-num-seqs 2): n above max_num_seqs runs its samples in
// turn (vLLM v1 schedules child requests without that bound).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeEngineLimits : public BundledServerSuite<ServeEngineLimits> {
 public:
  static std::vector<std::string> server_args() { return {"--max-num-seqs", "2"}; }
};

// Choice i of a seeded request is the request alone with seed + i.
TEST_F(ServeEngineLimits, MoreChoicesThanMaxNumSeqs) {
  const json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 12},
                     {"temperature", 0.8},
                     {"seed", 5},
                     {"n", 3},
                     {"return_token_ids", true}};
  const json r = post_json(port(), "/v1/completions", body);
  ASSERT_EQ(r["choices"].size(), 3u) << r.dump();
  for (int i = 0; i < 3; ++i) {
    json one = body;
    one["n"] = 1;
    one["seed"] = 5 + i;
    const json alone = post_json(port(), "/v1/completions", one);
    const json& c = r["choices"][static_cast<size_t>(i)];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["token_ids"], alone["choices"][0]["token_ids"]) << "choice " << i;
    EXPECT_EQ(c["text"], alone["choices"][0]["text"]) << "choice " << i;
  }
}

}  // namespace
}  // namespace pagoda::testing_http
