// RequestQueue: the lock-free multi-producer queue from network threads to
// the engine thread (design card: the only network → engine path). Holds
// owning pointers to small Commands (add a request / abort some) in a
// boost::lockfree::queue; producers never block on the engine. A sequence
// number bumped after every push lets the engine thread sleep with
// std::atomic::wait until something arrives (no spinning, no polling).
#pragma once
#include <atomic>
#include <boost/lockfree/queue.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"

namespace pagoda {

struct Command {
  enum class Kind { kAdd, kAbort } kind = Kind::kAdd;
  std::unique_ptr<GenerateRequest> request;  // kAdd
  std::vector<std::string> request_ids;      // kAbort: one command for many
};

class RequestQueue {
 public:
  RequestQueue() : queue_(64) {}
  ~RequestQueue() {
    Command* c = nullptr;
    while (queue_.pop(c)) delete c;
  }
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // Any thread. Takes ownership. Throws std::bad_alloc if a node cannot be
  // allocated (the command is then destroyed).
  void push(std::unique_ptr<Command> cmd) {
    Command* raw = cmd.get();
    if (!queue_.push(raw)) throw std::bad_alloc();
    cmd.release();
    wake();
  }
  // Engine thread. Null when empty.
  std::unique_ptr<Command> pop() {
    Command* c = nullptr;
    if (!queue_.pop(c)) return nullptr;
    return std::unique_ptr<Command>(c);
  }
  bool empty() const { return queue_.empty(); }

  // The wake-up counter: read it, check for work, then wait_for_change(seen)
  // returns as soon as any push (or wake()) happened after the read.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  void wait_for_change(uint64_t seen) const { epoch_.wait(seen, std::memory_order_acquire); }
  void wake() {
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    epoch_.notify_all();
  }

 private:
  boost::lockfree::queue<Command*> queue_;
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace pagoda
