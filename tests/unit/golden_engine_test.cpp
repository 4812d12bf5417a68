// Acceptance 1 through the engine API: the bundled default model
// (models/stories260K) on the CPU backend, greedy, reproduces llama2.c run.c's
// text and token ids (shared/testvectors/stories260K_*), all three cases at
// once in one continuous batch with a KV cache big enough for all.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/output_channel.h"
#include "tests/support/test_engine.h"

namespace pagoda {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::unique_ptr<Engine> make_engine() {
  ExecutorOptions opts = test::stories_options();
  opts.num_threads = 0;  // all cores
  opts.max_model_len = 512;
  opts.max_num_batched_tokens = 512;
  return test::make_test_engine(opts);
}

TEST(GoldenEngine, BundledModelReproducesLlama2cTextAndIds) {
  auto tok = load_tokenizer(test::stories_dir());
  const nlohmann::json vec =
      nlohmann::json::parse(read_file(std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_greedy.json"));
  const std::string want_text = read_file(
      std::string(PAGODA_SHARED_DIR) + "/testvectors/stories260K_runc_greedy_once_upon_a_time.txt");
  auto engine = make_engine();

  // The three reference cases, prompts tokenized by our tokenizer (BOS added),
  // plus "Once upon a time" for the text comparison; all in one batch.
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> want_ids;
  int i = 0;
  for (const nlohmann::json& c : vec["cases"]) {
    auto req = std::make_unique<GenerateRequest>();
    req->request_id = "case" + std::to_string(i++);
    req->prompt_token_ids = tok->encode(c["prompt"].get<std::string>(), true);
    ASSERT_EQ(req->prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
    want_ids.push_back(c["greedy_ids"].get<std::vector<int32_t>>());
    req->sampling.temperature = 0.0f;
    req->sampling.max_tokens = static_cast<int64_t>(want_ids.back().size());
    req->output = std::make_shared<OutputChannel>();
    chans.push_back(req->output);
    engine->add_request(std::move(req));
  }
  engine->run_until_idle();
  for (size_t k = 0; k < chans.size(); ++k) {
    RequestOutput got = collect(*chans[k]);
    EXPECT_EQ(got.error, "");
    EXPECT_EQ(got.finish_reason, FinishReason::kLength) << "case " << k;
    EXPECT_EQ(got.token_ids, want_ids[k]) << "case " << k;
    if (vec["cases"][k]["prompt"] == "Once upon a time") {
      // run.c prints the prompt, then each generated piece, then one "\n"
      // when generation ends (llama2.c run.c generate(): printf("\n")).
      ASSERT_EQ(want_text.back(), '\n');
      EXPECT_EQ("Once upon a time" + got.text + "\n", want_text);
    }
  }
  EngineStats st = engine->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.num_preemptions_total, 0);
}

}  // namespace
}  // namespace pagoda
