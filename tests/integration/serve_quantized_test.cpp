// A GPTQ checkpoint end to end on the CPU: `pagoda serve --quantization
// gptq_marlin` on shared/models/quantized/tiny-gptq-qwen2-actorder answers
// each reference prompt (as token ids) with the reference's 32 greedy ids;
// `pagoda generate` logs the weight memory and the quantized-linear path,
// and refuses a --quantization that does not match the checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/integration/serve_test_util.h"

namespace pagoda::testing_http {
namespace {

using nlohmann::json;

const std::string kDir = "models/quantized/tiny-gptq-qwen2-actorder";

TEST(ServeQuantized, GptqActOrderGreedyCompletionsMatchTransformers) {
  PagodaServer server({shared_path(kDir), "--quantization", "gptq_marlin", "--device", "cpu",
                       "--served-model-name", "q", "--max-model-len", "512"});
  const json ref = read_json_file(shared_path(kDir) + "/reference.json");
  HttpClient client(server.port());
  int cases = 0;
  for (const json& c : ref["cases"]) {
    const json body = {{"model", "q"},     {"prompt", c["prompt_ids"]}, {"max_tokens", 32},
                       {"temperature", 0}, {"ignore_eos", true},        {"return_token_ids", true}};
    HttpResponse r = client.post("/v1/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["token_ids"], c["greedy_ids"])
        << "prompt of " << c["prompt_ids"].size() << " tokens";
    ++cases;
  }
  EXPECT_EQ(cases, 4);
  const int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

struct GenerateResult {
  int exit_status = -1;
  std::string err;
};

// `pagoda generate <kDir> <args>`, its stderr kept (the strings are built
// with append: GCC 12's -Wrestrict misfires on "literal" + std::string).
GenerateResult run_generate(const std::string& name, const std::string& args) {
  std::string err = ::testing::TempDir();
  err.append("pagoda_quantized_").append(name).append(".err");
  std::string cmd = PAGODA_BIN;
  cmd.append(" generate '").append(shared_path(kDir)).append("' ").append(args);
  cmd.append(" >/dev/null 2>'").append(err).append("'");
  const int status = std::system(cmd.c_str());
  GenerateResult r;
  if (status != -1 && WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  r.err = read_text_file(err);
  return r;
}

TEST(ServeQuantized, GenerateLogsWeightMemoryAndQuantizedPath) {
  GenerateResult r =
      run_generate("log", "--device cpu --max-model-len 64 --prompt hello --max-tokens 2");
  EXPECT_EQ(r.exit_status, 0) << r.err;
  EXPECT_NE(r.err.find("Loading model weights took "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(
                "Quantization: gptq 4-bit, group 64, sym, desc_act (14 linears); quantized linears "
                "dequantized at load to F32 (no int4/int8 kernel yet) on cpu"),
            std::string::npos)
      << r.err;
}

TEST(ServeQuantized, MismatchedQuantizationFlagIsAStartupError) {
  GenerateResult r = run_generate("awq_flag", "--device cpu --quantization awq --prompt hello");
  EXPECT_NE(r.exit_status, 0) << r.err;
  EXPECT_NE(r.exit_status, -1) << "did not exit normally";
  EXPECT_NE(r.err.find("Quantization method specified in the model config (gptq in "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("`quantization` argument (awq)"), std::string::npos) << r.err;
  r = run_generate("bad_flag", "--device cpu --quantization fp8 --prompt hello");
  EXPECT_NE(r.exit_status, 0) << r.err;
  EXPECT_NE(r.err.find("--quantization"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pagoda::testing_http
