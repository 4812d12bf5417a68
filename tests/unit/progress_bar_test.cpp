// server/progress_bar.h: tqdm's format as vLLM's LLM.generate shows it.
#include "server/progress_bar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace pagoda {
namespace {

// Code points, as a terminal counts the bar's width.
size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

TEST(ProgressBar, TheIssuesExampleLine) {
  // 3 prompts in 10.53 s: 3.51 s each (tqdm writes the rate "{:5.2f}",
  // hence two spaces before a rate under 10).
  ProgressState s;
  s.n = 3;
  s.total = 3;
  s.elapsed_s = 10.53;
  s.postfix = "est. speed input: 7.69 toks/s, output: 102.39 toks/s";
  EXPECT_EQ(format_progress(s),
            "Processed prompts: 100%|██████████| 3/3 [00:10<00:00,  3.51s/it, est. speed input: "
            "7.69 toks/s, output: 102.39 toks/s]");
}

TEST(ProgressBar, BeforeTheFirstRequestFinishes) {
  ProgressState s;
  s.total = 4;
  s.postfix = speed_postfix(0, 0, 0);
  EXPECT_EQ(format_progress(s),
            "Processed prompts:   0%|          | 0/4 [00:00<?, ?it/s, est. speed input: 0.00 "
            "toks/s, output: 0.00 toks/s]");
}

TEST(ProgressBar, PartialBlocksRateAndRemaining) {
  ProgressState s;
  s.n = 1;
  s.total = 3;
  s.elapsed_s = 0.5;  // 2 it/s: 2 more take 1 s
  // 1/3 of 10 bars: 3 full blocks and 2 eighths (26 of 80 eighths).
  EXPECT_EQ(format_progress(s), "Processed prompts:  33%|███▎      | 1/3 [00:00<00:01,  2.00it/s]");
  s.n = 50;
  s.total = 100;
  s.elapsed_s = 3.95;
  EXPECT_EQ(format_progress(s),
            "Processed prompts:  50%|█████     | 50/100 [00:03<00:03, 12.66it/s]");
}

TEST(ProgressBar, FillsTheTerminalWidth) {
  ProgressState s;
  s.n = 2;
  s.total = 5;
  s.elapsed_s = 1.0;
  s.postfix = speed_postfix(10, 20, 1.0);
  s.ncols = 120;
  const std::string line = format_progress(s);
  EXPECT_EQ(columns(line), 120u) << line;
  s.ncols = 20;  // narrower than the text: one bar character (3 eighths of 0.4), as tqdm
  EXPECT_NE(format_progress(s).find(" 40%|▍| 2/5"), std::string::npos) << format_progress(s);
}

TEST(ProgressBar, Intervals) {
  EXPECT_EQ(format_interval(0), "00:00");
  EXPECT_EQ(format_interval(59.9), "00:59");
  EXPECT_EQ(format_interval(61), "01:01");
  EXPECT_EQ(format_interval(3725), "1:02:05");
}

TEST(ProgressBar, SpeedPostfix) {
  EXPECT_EQ(speed_postfix(81, 1078, 10.0), "est. speed input: 8.10 toks/s, output: 107.80 toks/s");
  EXPECT_EQ(speed_postfix(5, 5, 0.0), "est. speed input: 0.00 toks/s, output: 0.00 toks/s");
}

std::string read_back(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(ProgressBar, NotATerminalGetsOnlyTheFinalLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(2, ProgressBar::Mode::kAuto, f);
    EXPECT_EQ(bar.mode(), ProgressBar::Mode::kFinalOnly);
    bar.update(1, 5, 16);
    bar.update(1, 5, 16);
    EXPECT_EQ(read_back(f), "");  // nothing until close
  }
  const std::string out = read_back(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.rfind("Processed prompts: 100%|██████████| 2/2 [", 0), 0u) << out;
  EXPECT_NE(out.find("toks/s]\n"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // one line
  std::fclose(f);
}

TEST(ProgressBar, LiveRedrawsInPlaceAndOffWritesNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(1, ProgressBar::Mode::kLive, f);
    bar.update(1, 5, 16);
  }
  const std::string out = read_back(f);
  EXPECT_EQ(out.rfind("\rProcessed prompts:   0%|", 0), 0u) << out;
  EXPECT_NE(out.find("\rProcessed prompts: 100%|"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
  std::fclose(f);
  std::FILE* g = std::tmpfile();
  {
    ProgressBar bar(1, ProgressBar::Mode::kOff, g);
    bar.update(1, 5, 16);
  }
  EXPECT_EQ(read_back(g), "");
  std::fclose(g);
}

}  // namespace
}  // namespace pagoda
