#include "loadtest/bench/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pagoda::bench {

namespace {

std::string clock_text(double s) {
  const auto t = static_cast<int64_t>(std::max(0.0, s));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{:02}:{:02}", t / 60, t % 60);
}

}  // namespace

std::string format_progress(int64_t done, int64_t total, double elapsed_s, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const double frac =
      total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0)
                : 0.0;
  const int eighths = static_cast<int>(frac * width * 8);
  std::string bar;
  for (int i = 0; i < eighths / 8; ++i) bar += "█";
  int cells = eighths / 8;
  if (cells < width && eighths % 8) {
    bar += kEighths[eighths % 8];
    ++cells;
  }
  bar.append(static_cast<size_t>(width - cells), ' ');
  std::string rate = "?it/s";
  std::string left = "?";
  if (done > 0 && elapsed_s > 0) {
    const double r = static_cast<double>(done) / elapsed_s;
    rate = r >= 1.0 ? fmt::format("{:.2f}it/s", r) : fmt::format("{:.2f}s/it", 1.0 / r);
    left = clock_text(static_cast<double>(total - done) / r);
  }
  return fmt::format("{:3d}%|{}| {}/{} [{}<{}, {}]", static_cast<int>(frac * 100), bar, done, total,
                     clock_text(elapsed_s), left, rate);
}

ProgressBar::ProgressBar(int64_t total, bool enabled, std::FILE* out)
    : total_(total), enabled_(enabled), out_(out) {
  if (enabled_) draw();
}

void ProgressBar::update(int64_t n) {
  done_ += n;
  if (!enabled_ || closed_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done_ >= total_ || now - last_draw_ >= std::chrono::milliseconds(100)) draw();
}

void ProgressBar::close() {
  if (!enabled_ || closed_) return;
  if (drawn_done_ != done_) draw();  // the last update drew the final state already
  std::fputc('\n', out_);
  std::fflush(out_);
  closed_ = true;
}

void ProgressBar::draw() {
  last_draw_ = std::chrono::steady_clock::now();
  drawn_done_ = done_;
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  std::fprintf(out_, "\r%s", format_progress(done_, total_, elapsed).c_str());
  std::fflush(out_);
}

}  // namespace pagoda::bench
