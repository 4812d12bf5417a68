// A tqdm-style progress bar on a terminal stream (stderr), redrawn in place
// with "\r": " 45%|████▌     | 45/100 [00:03<00:04, 12.34it/s]".
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pagoda::bench {

// The bar's text for `done` of `total` after elapsed_s seconds: percent,
// a bar of `width` cells (eighth-block resolution), counts, elapsed time,
// the estimated time left and the rate (items/s; "?" before the first).
std::string format_progress(int64_t done, int64_t total, double elapsed_s, int width = 40);

class ProgressBar {
 public:
  // enabled false: does nothing (--disable-tqdm).
  ProgressBar(int64_t total, bool enabled, std::FILE* out = stderr);
  // n more items done; redraws at most every 100 ms, and at the last item.
  void update(int64_t n = 1);
  // Draws the final state unless the last frame already shows it, and ends
  // the line (once).
  void close();

 private:
  void draw();
  int64_t total_;
  int64_t done_ = 0;
  int64_t drawn_done_ = -1;  // done_ when last drawn
  bool enabled_;
  bool closed_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace pagoda::bench
