#include "server/progress_bar.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace pagoda {

std::string format_interval(double seconds) {
  const auto t = static_cast<int64_t>(std::max(0.0, seconds));
  const int64_t h = t / 3600, m = (t / 60) % 60, s = t % 60;
  if (h) return fmt::format("{:d}:{:02d}:{:02d}", h, m, s);
  return fmt::format("{:02d}:{:02d}", m, s);
}

std::string format_progress(const ProgressState& s) {
  const double total = static_cast<double>(std::max<int64_t>(1, s.total));
  const double frac = std::clamp(static_cast<double>(s.n) / total, 0.0, 1.0);
  const std::string l_bar = fmt::format("{}: {:3.0f}%|", s.desc, frac * 100.0);
  const double rate = s.elapsed_s > 0 && s.n > 0 ? static_cast<double>(s.n) / s.elapsed_s : 0.0;
  std::string rate_fmt = "?it/s";
  std::string remaining = "?";
  if (rate > 0) {
    rate_fmt = 1.0 / rate > 1.0 ? fmt::format("{:5.2f}s/it", 1.0 / rate)
                                : fmt::format("{:5.2f}it/s", rate);
    remaining = format_interval(static_cast<double>(s.total - s.n) / rate);
  }
  const std::string r_bar =
      fmt::format("| {}/{} [{}<{}, {}{}]", s.n, s.total, format_interval(s.elapsed_s), remaining,
                  rate_fmt, s.postfix.empty() ? "" : ", " + s.postfix);
  // tqdm's Bar: full blocks, one partial block (eighths), then spaces.
  static const char* const kEighths[] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};
  const int64_t text = static_cast<int64_t>(l_bar.size() + r_bar.size());  // ASCII
  const int64_t bars = s.ncols > 0 ? std::max<int64_t>(1, s.ncols - text) : 10;
  const auto eighths = static_cast<int64_t>(frac * static_cast<double>(bars) * 8);
  const int64_t full = eighths / 8;
  std::string bar;
  for (int64_t i = 0; i < full; ++i) bar += kEighths[8];
  if (full < bars) {
    bar += kEighths[eighths % 8];
    bar.append(static_cast<size_t>(bars - full - 1), ' ');
  }
  return l_bar + bar + r_bar;
}

std::string speed_postfix(int64_t input_tokens, int64_t output_tokens, double elapsed_s) {
  const double in = elapsed_s > 0 ? static_cast<double>(input_tokens) / elapsed_s : 0.0;
  const double out = elapsed_s > 0 ? static_cast<double>(output_tokens) / elapsed_s : 0.0;
  return fmt::format("est. speed input: {:.2f} toks/s, output: {:.2f} toks/s", in, out);
}

namespace {

// The terminal's width in columns; 0 when `f` is not a terminal.
int terminal_columns(std::FILE* f) {
  winsize w{};
  if (ioctl(fileno(f), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 0;
}

}  // namespace

ProgressBar::ProgressBar(int64_t total, Mode mode, std::FILE* out)
    : mode_(mode), out_(out), start_(std::chrono::steady_clock::now()), last_draw_(start_) {
  if (mode_ == Mode::kAuto) mode_ = isatty(fileno(out_)) ? Mode::kLive : Mode::kFinalOnly;
  state_.total = total;
  state_.postfix = speed_postfix(0, 0, 0);
  if (mode_ == Mode::kLive) draw(false);
}

ProgressBar::~ProgressBar() { close(); }

void ProgressBar::update(int64_t done, int64_t input_tokens, int64_t output_tokens) {
  state_.n += done;
  in_toks_ += input_tokens;
  out_toks_ += output_tokens;
  state_.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  state_.postfix = speed_postfix(in_toks_, out_toks_, state_.elapsed_s);
  if (mode_ != Mode::kLive) return;
  // tqdm's mininterval: 0.1 s between redraws (the last one always drawn).
  const auto now = std::chrono::steady_clock::now();
  if (state_.n < state_.total && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (mode_ == Mode::kOff) return;
  state_.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  draw(true);
}

void ProgressBar::draw(bool final) {
  state_.ncols = terminal_columns(out_);
  const std::string line = format_progress(state_);
  if (mode_ == Mode::kLive) {
    std::fprintf(out_, "\r%s%s", line.c_str(), final ? "\n" : "");
  } else if (final) {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace pagoda
