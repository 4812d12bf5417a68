// The progress bar vLLM's LLM.generate shows on stderr (its _run_engine:
// tqdm(total=num_requests, desc="Processed prompts", dynamic_ncols=True)
// with the postfix "est. speed input: X toks/s, output: Y toks/s"), drawn
// in tqdm's default format (tqdm/std.py format_meter):
//
//   Processed prompts: 100%|██████████| 3/3 [00:10<00:00,  3.51s/it, est. speed input: 7.69 toks/s,
//   output: 102.39 toks/s]
//
// l_bar "{desc}: {percentage:3.0f}%|", the bar, r_bar "| {n}/{total}
// [{elapsed}<{remaining}, {rate_fmt}{postfix}]". rate_fmt is "{:5.2f}it/s",
// or "{:5.2f}s/it" when one item takes more than a second, "?it/s" before
// the first; remaining is "?" then. Times as tqdm's format_interval
// (MM:SS, H:MM:SS past an hour). The rate is the average since the bar
// started (tqdm with smoothing=0; tqdm's default smooths it over recent
// updates, which only changes the figure while the bar runs). The bar uses
// tqdm's Unicode blocks (eighths) and fills the terminal's width when it is
// known (dynamic_ncols), else 10 characters (tqdm without ncols).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pagoda {

// tqdm's format_interval: seconds (floored) as "MM:SS" or "H:MM:SS".
std::string format_interval(double seconds);

struct ProgressState {
  std::string desc = "Processed prompts";
  int64_t n = 0;      // items done
  int64_t total = 0;  // items in all (> 0)
  double elapsed_s = 0.0;
  std::string postfix;  // "" or the text after ", "
  int ncols = 0;        // the line's width in characters; 0: a 10-character bar
};

// One line of the bar (no "\r", no newline), UTF-8.
std::string format_progress(const ProgressState& s);

// vLLM's postfix: "est. speed input: {:.2f} toks/s, output: {:.2f} toks/s"
// (tokens per second of elapsed time; 0.00 before any time has passed).
std::string speed_postfix(int64_t input_tokens, int64_t output_tokens, double elapsed_s);

// The bar drawn while requests finish. Modes:
//   kLive       redrawn in place ("\r") on every update, at most every
//               0.1 s (tqdm's mininterval) except the last; a newline at close.
//   kFinalOnly  one line at close (stderr is not a terminal: a log keeps
//               the final figures without the redraws).
//   kOff        nothing.
// kAuto (make): kLive when `out` is a terminal, else kFinalOnly.
class ProgressBar {
 public:
  enum class Mode { kOff, kLive, kFinalOnly, kAuto };
  ProgressBar(int64_t total, Mode mode, std::FILE* out = stderr);
  ~ProgressBar();  // close()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` more requests finished, with their prompt tokens (x choices, as
  // vLLM counts them) and generated tokens.
  void update(int64_t done, int64_t input_tokens, int64_t output_tokens);
  // Draws the final line (once).
  void close();
  Mode mode() const { return mode_; }

 private:
  void draw(bool final);
  Mode mode_;
  std::FILE* out_;
  ProgressState state_;
  int64_t in_toks_ = 0, out_toks_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool closed_ = false;
};

}  // namespace pagoda
