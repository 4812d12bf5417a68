// Token masks computed off the engine thread, or in parallel when the
// engine needs them (xgrammar and vLLM's structured-output backends compile
// masks ahead and fill them with a thread pool; this is the lazy
// Guide::mask spread over a small process-wide pool of workers):
//  - precompute_masks: when a regular guide (regex, choice, JSON schema: a
//    DFA whose states are all known) with at most kPrecomputeMaxStates
//    states is compiled, its masks are queued for the workers, so the
//    engine finds them cached;
//  - fill_masks: the masks a step's guided rows need and lack (a new state
//    costs ~3 ms on a 150k-token vocabulary) are filled by the workers and
//    the calling thread together, ahead of any queued precompute work, and
//    the call returns when all are cached.
// Concurrent fills of one state are harmless (Guide::fill keeps the first).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/guided/guide.h"

namespace pagoda::guided {

// Larger guides are left to fill_masks / lazy filling (memory: a mask is
// vocab / 8 bytes; 512 states x 152k tokens = 9.7 MB).
inline constexpr size_t kPrecomputeMaxStates = 512;

// Workers: min(8, max(1, hardware threads / 2)), started on first use,
// joined at exit.
int num_mask_workers();

// Queues every state of `guide` (when it has at most kPrecomputeMaxStates)
// for the workers. The queue holds weak references: a guide evicted from
// compile_guide's cache and released is skipped.
void precompute_masks(const std::shared_ptr<const Guide>& guide);

// Fills the masks of `states` ((guide, state) pairs; the guides must
// outlive the call; duplicates and cached states cost nothing) with the
// workers' help and returns when every one is cached. The wall time spent
// here is counted in MaskFillTotals::wait_seconds, the fills as background.
// Throws what Guide::mask throws (a state that does not exist), after the
// other fills are done.
void fill_masks(const std::vector<std::pair<const Guide*, int32_t>>& states);

// fill_masks in two halves: the constructor queues the missing states for
// the workers (ahead of queued work) and returns; wait() helps fill what is
// left, returns when all are cached (counting the wait as fill_masks does)
// and rethrows a fill's exception. The destructor waits if wait() was not
// called (the guides must outlive the fill).
class MaskFill {
 public:
  explicit MaskFill(const std::vector<std::pair<const Guide*, int32_t>>& states);
  ~MaskFill();
  MaskFill(const MaskFill&) = delete;
  MaskFill& operator=(const MaskFill&) = delete;
  void wait();

 private:
  std::shared_ptr<struct MaskFillJob> job_;
  bool waited_ = false;
};

}  // namespace pagoda::guided
