// pagoda-bench's datasets (loadtest/bench/dataset.h): vLLM's ShareGPT
// filter on tests/data/sharegpt_sample.json (each conversation's `id` says
// whether the filter keeps it: "keep-*" or "drop-<why>") and the random
// dataset's length ranges, with stories260K's tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "loadtest/bench/dataset.h"

namespace pagoda::bench {
namespace {

using nlohmann::json;

const Tokenizer& stories() {
  static std::shared_ptr<Tokenizer> t = load_tokenizer(PAGODA_SOURCE_DIR "/models/stories260K");
  return *t;
}

json sample_file() { return load_json_file(PAGODA_SOURCE_DIR "/tests/data/sharegpt_sample.json"); }

// prompt text → id, for the conversations whose id starts with `prefix`.
std::map<std::string, std::string> prompts_with_id(const json& data, const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (const json& e : data)
    if (e.value("id", "").rfind(prefix, 0) == 0 && e.contains("conversations") &&
        !e["conversations"].empty())
      out[e["conversations"][0]["value"]] = e["id"];
  return out;
}

TEST(BenchDataset, IsValidSequenceBoundaries) {
  EXPECT_TRUE(is_valid_sequence(4, 4));
  EXPECT_FALSE(is_valid_sequence(3, 100));
  EXPECT_FALSE(is_valid_sequence(100, 3));
  EXPECT_TRUE(is_valid_sequence(100, 3, /*skip_min_output_len_check=*/true));
  EXPECT_TRUE(is_valid_sequence(1024, 1024));
  EXPECT_FALSE(is_valid_sequence(1025, 4));
  EXPECT_FALSE(is_valid_sequence(1024, 1025));  // 2049 in all
}

TEST(BenchDataset, ShareGptKeepsExactlyTheConversationsVllmKeeps) {
  const json data = sample_file();
  const auto keep = prompts_with_id(data, "keep-");
  ASSERT_EQ(keep.size(), 23u);
  const auto samples = sample_sharegpt(data, stories(), 23, 0, std::nullopt);
  ASSERT_EQ(samples.size(), 23u);
  std::set<std::string> seen;
  for (const SampleRequest& s : samples) {
    ASSERT_TRUE(keep.count(s.prompt)) << "kept a dropped conversation: " << s.prompt.substr(0, 60);
    seen.insert(s.prompt);
    // Lengths as HF's tokenizer(text).input_ids counts them: BOS included.
    EXPECT_EQ(s.prompt_len, static_cast<int64_t>(stories().encode(s.prompt, true).size()));
    EXPECT_EQ(s.prompt_token_ids, stories().encode(s.prompt, true));
    EXPECT_GE(s.prompt_len, 4);
    EXPECT_LE(s.prompt_len, 1024);
    EXPECT_GE(s.expected_output_len, 4);
    EXPECT_LE(s.prompt_len + s.expected_output_len, 2048);
  }
  EXPECT_EQ(seen.size(), 23u);  // each once: no oversampling needed
  // The reply's length is the output length.
  for (const json& e : data)
    if (e.value("id", "") == "keep-0") {
      auto it = std::find_if(samples.begin(), samples.end(), [&](const SampleRequest& s) {
        return s.prompt == e["conversations"][0]["value"];
      });
      ASSERT_NE(it, samples.end());
      EXPECT_EQ(
          it->expected_output_len,
          static_cast<int64_t>(
              stories().encode(e["conversations"][1]["value"].get<std::string>(), true).size()));
    }
  // The dropped ones fail for the reason their id gives.
  for (const json& e : data) {
    const std::string id = e.value("id", "");
    if (id.rfind("drop-", 0) != 0 || !e.contains("conversations") || e["conversations"].size() < 2)
      continue;
    const int64_t p = static_cast<int64_t>(
        stories().encode(e["conversations"][0]["value"].get<std::string>(), true).size());
    const int64_t o = static_cast<int64_t>(
        stories().encode(e["conversations"][1]["value"].get<std::string>(), true).size());
    if (id == "drop-short-prompt") {
      EXPECT_LT(p, 4);
    } else if (id == "drop-short-reply") {
      EXPECT_LT(o, 4);
    } else if (id == "drop-long-prompt") {
      EXPECT_GT(p, 1024);
    } else if (id == "drop-long-total") {
      EXPECT_LE(p, 1024);
      EXPECT_GT(p + o, 2048);
    }
  }
}

TEST(BenchDataset, ShareGptShufflesBySeedAndOversamples) {
  const json data = sample_file();
  const auto keep = prompts_with_id(data, "keep-");
  auto a = sample_sharegpt(data, stories(), 5, 1, std::nullopt);
  auto b = sample_sharegpt(data, stories(), 5, 1, std::nullopt);
  auto c = sample_sharegpt(data, stories(), 5, 2, std::nullopt);
  ASSERT_EQ(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].prompt != c[i].prompt;
  EXPECT_TRUE(differs);
  // More than the 23 valid: drawn again from the valid ones.
  auto many = sample_sharegpt(data, stories(), 60, 0, std::nullopt);
  ASSERT_EQ(many.size(), 60u);
  for (const SampleRequest& s : many) EXPECT_TRUE(keep.count(s.prompt));
}

TEST(BenchDataset, ShareGptFixedOutputLenSkipsOnlyTheMinimumOutputCheck) {
  const json data = sample_file();
  auto samples = sample_sharegpt(data, stories(), 100, 0, 2);
  std::set<std::string> ids;
  const auto all = prompts_with_id(data, "");
  for (const SampleRequest& s : samples) {
    EXPECT_EQ(s.expected_output_len, 2);
    ids.insert(all.at(s.prompt));
  }
  // 23 kept, and now the short reply and the long reply too (their replies
  // no longer count); the short and the long prompt stay out.
  EXPECT_EQ(ids.size(), 25u);
  EXPECT_TRUE(ids.count("drop-short-reply"));
  EXPECT_TRUE(ids.count("drop-long-total"));
  EXPECT_FALSE(ids.count("drop-short-prompt"));
  EXPECT_FALSE(ids.count("drop-long-prompt"));
}

TEST(BenchDataset, ShareGptRejectsDataWithoutValidConversations) {
  EXPECT_THROW(sample_sharegpt(json::object(), stories(), 1, 0, std::nullopt), std::runtime_error);
  EXPECT_THROW(sample_sharegpt(json::array(), stories(), 1, 0, std::nullopt), std::runtime_error);
}

// Entries that are not conversations are counted in the error, not reported
// as conversations that failed the length filter.
TEST(BenchDataset, MalformedShareGptEntriesAreCountedInTheError) {
  const json turn = {{"from", "human"}, {"value", "Once upon a time there was a little dog"}};
  const json malformed = json::array({
      json(5),
      json{{"id", "no conversations"}},
      json{{"conversations", "not a list"}},
      json{{"conversations", json::array({turn})}},  // one turn
      json{{"conversations", json::array({turn, json{{"value", 3}}})}},
  });
  auto message = [](const json& data) {
    try {
      sample_sharegpt(data, stories(), 1, 0, std::nullopt);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message(malformed);
  EXPECT_NE(m.find("no ShareGPT entry is a conversation"), std::string::npos) << m;
  EXPECT_NE(m.find("5 of the 5 entries are not conversations"), std::string::npos) << m;
  EXPECT_EQ(m.find("length filter"), std::string::npos) << m;
  // Well-formed conversations that all fail the length filter (a 1-token
  // reply), beside 5 malformed entries: both counts.
  json data = malformed;
  data.push_back(json{{"conversations", json::array({turn, json{{"value", "a"}}})}});
  m = message(data);
  EXPECT_NE(m.find("no ShareGPT conversation passes the length filter (1 conversations"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("5 of the 6 entries are not conversations"), std::string::npos) << m;
}

TEST(BenchDataset, RandomLengthsStayInTheirRanges) {
  RandomSpec spec;
  spec.input_len = 100;
  spec.output_len = 20;
  spec.range_ratio = 0.5;
  int64_t mismatch = -1;
  const auto s = sample_random(stories(), 400, spec, 3, &mismatch);
  ASSERT_EQ(s.size(), 400u);
  int64_t in_lo = 1 << 30, in_hi = 0, out_lo = 1 << 30, out_hi = 0;
  for (const SampleRequest& r : s) {
    in_lo = std::min(in_lo, r.prompt_len), in_hi = std::max(in_hi, r.prompt_len);
    out_lo = std::min(out_lo, r.expected_output_len),
    out_hi = std::max(out_hi, r.expected_output_len);
    ASSERT_EQ(static_cast<int64_t>(r.prompt_token_ids.size()), r.prompt_len);
    ASSERT_EQ(r.prompt_token_ids.front(), *stories().bos_token_id());
    for (size_t j = 1; j < r.prompt_token_ids.size(); ++j)
      ASSERT_FALSE(stories().is_special(r.prompt_token_ids[j]));
  }
  // BOS counts towards the length: 99 drawn from [floor(99 · 0.5),
  // ceil(99 · 1.5)] = [49, 149], plus BOS; outputs [10, 30], both ends
  // reachable. A text that does not re-encode to its drawn length is made
  // shorter, never longer (stories260K's byte pieces decode to invalid
  // UTF-8 now and then).
  EXPECT_LE(mismatch, 0);
  EXPECT_GT(mismatch, -400);
  EXPECT_GE(in_lo, 45);  // a shortened prompt may fall a few under the low end
  EXPECT_LE(in_hi, 150);
  EXPECT_LE(in_lo, 53);  // 400 uniform draws spread over the range
  EXPECT_GE(in_hi, 145);
  EXPECT_EQ(out_lo, 10);
  EXPECT_EQ(out_hi, 30);
}

// The tester's case: consecutive ids decoded to text re-tokenize to another
// length, so prompt_len must be the re-encoded text's length as the server
// counts it (BOS included), not the number of ids drawn.
TEST(BenchDataset, RandomPromptLenIsWhatTheServerCountsForTheText) {
  RandomSpec spec;
  spec.input_len = 100;
  spec.output_len = 20;
  spec.range_ratio = 0.5;
  int64_t total = 0, server_total = 0;
  for (const SampleRequest& r : sample_random(stories(), 50, spec, 0)) {
    const auto server = static_cast<int64_t>(server_prompt_ids(stories(), r.prompt).size());
    EXPECT_EQ(r.prompt_len, server) << r.prompt;
    // Plain text (no special-token text in it): the same as HF's tokenizer(text).
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>(stories().encode(r.prompt, true).size()));
    EXPECT_EQ(r.prompt_token_ids, server_prompt_ids(stories(), r.prompt));
    total += r.prompt_len;
    server_total += server;
  }
  EXPECT_EQ(total, server_total);
  // 200 in, 300 out: every prompt + output fits stories260K's 512 context
  // (before, prompts counted 200 were 202-204 tokens to the server).
  spec.input_len = 200;
  spec.output_len = 300;
  spec.range_ratio = 0.0;
  int64_t at_target = 0;
  for (const SampleRequest& r : sample_random(stories(), 20, spec, 0)) {
    const auto server = static_cast<int64_t>(server_prompt_ids(stories(), r.prompt).size());
    EXPECT_EQ(r.prompt_len, server);
    EXPECT_LE(server, 200);
    EXPECT_GE(server, 190);
    at_target += server == 200;
  }
  EXPECT_GE(at_target, 10);  // most converge exactly
}

TEST(BenchDataset, RandomOutputLenIsNeverZero) {
  RandomSpec spec;
  spec.input_len = 16;
  spec.output_len = 1;
  spec.range_ratio = 0.9;  // floor(1 · 0.1) = 0, clamped to 1 as vLLM
  for (const SampleRequest& r : sample_random(stories(), 200, spec, 0)) {
    EXPECT_GE(r.expected_output_len, 1);
    EXPECT_LE(r.expected_output_len, 2);  // ceil(1 · 1.9)
  }
}

TEST(BenchDataset, RandomRatioZeroAndPrefix) {
  RandomSpec spec;
  spec.input_len = 32;
  spec.output_len = 8;
  spec.prefix_len = 5;
  const auto s = sample_random(stories(), 20, spec, 0);
  for (const SampleRequest& r : s) {
    EXPECT_LE(r.prompt_len, 37);  // BOS + 5 + 31 (shorter when the text would re-encode longer)
    EXPECT_GE(r.prompt_len, 32);
    EXPECT_EQ(r.expected_output_len, 8);
  }
  spec.range_ratio = 1.0;
  EXPECT_THROW(sample_random(stories(), 1, spec, 0), std::invalid_argument);
  spec.range_ratio = -0.1;
  EXPECT_THROW(sample_random(stories(), 1, spec, 0), std::invalid_argument);
  // Only BOS would be left: no token of the prompt's own.
  spec.range_ratio = 0.0;
  spec.prefix_len = 0;
  spec.input_len = 1;
  EXPECT_THROW(sample_random(stories(), 1, spec, 0), std::invalid_argument);
}

}  // namespace
}  // namespace pagoda::bench
