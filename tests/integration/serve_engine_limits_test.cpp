// Requests against the engine's own limits, on the real `pagoda serve` with
// small ones: n above max_num_seqs (--max-num-seqs 2) runs its samples in
// turn (vLLM v1 schedules child requests without that bound); --max-logprobs
// 4 bounds the logprobs asked for and the beam width (2 x the beams).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

class ServeEngineLimits : public BundledServerSuite<ServeEngineLimits> {
 public:
  static std::vector<std::string> server_args() {
    return {"--max-num-seqs", "2", "--max-logprobs", "4"};
  }
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

TEST_F(ServeEngineLimits, MaxLogprobsBoundsLogprobsAndTheBeamWidth) {
  const json over = post_json(port(), "/v1/completions",
                              {{"prompt", "Once"}, {"max_tokens", 2}, {"logprobs", 5}}, 400);
  EXPECT_EQ(over["error"]["param"], "logprobs") << over.dump();
  EXPECT_NE(over["error"]["message"].get<std::string>().find("max_logprobs is 4"),
            std::string::npos)
      << over.dump();
  const json four = post_json(port(), "/v1/completions",
                              {{"prompt", "Once"}, {"max_tokens", 2}, {"logprobs", 4}});
  ASSERT_EQ(four["choices"].size(), 1u) << four.dump();
  for (const json& top : four["choices"][0]["logprobs"]["top_logprobs"])
    EXPECT_GE(top.size(), 4u) << top.dump();
  const json beams =
      post_json(port(), "/v1/completions",
                {{"prompt", "Once"}, {"use_beam_search", true}, {"temperature", 0}, {"n", 3}}, 400);
  EXPECT_EQ(beams["error"]["param"], "n") << beams.dump();
  const json two = post_json(port(), "/v1/completions",
                             {{"prompt", "Once"},
                              {"use_beam_search", true},
                              {"temperature", 0},
                              {"n", 2},
                              {"max_tokens", 3}});
  EXPECT_EQ(two["choices"].size(), 2u) << two.dump();
}

}  // namespace
}  // namespace pagoda::testing_http
