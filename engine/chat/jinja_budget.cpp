// RenderScope (see jinja_budget.h).
#include "engine/chat/jinja_budget.h"

#include <string>

#include "engine/chat/chat_template.h"
#include "engine/chat/jinja_value.h"

namespace pagoda::jinja {
namespace {

thread_local RenderScope* current = nullptr;

[[noreturn]] void over_budget() {
  throw ChatTemplateError("chat template rendering exceeded its memory limit of " +
                          std::to_string(RenderScope::kMaxBytes >> 20) + " MiB");
}

}  // namespace

RenderScope::RenderScope(std::chrono::milliseconds time_limit)
    : previous_(current),
      time_limit_(time_limit),
      deadline_(std::chrono::steady_clock::now() + time_limit) {
  current = this;
}

RenderScope::~RenderScope() {
  current = previous_;
  // Cycles run only through namespaces; emptying them all (while this
  // vector still holds each one) frees every value without deep recursion.
  for (auto& entries : namespaces_) {
    Dict dropped;
    dropped.swap(*entries);
  }
}

void time_limit_error() {
  const long long ms = current ? static_cast<long long>(current->time_limit_.count()) : 0;
  throw ChatTemplateError("chat template rendering exceeded its time limit of " +
                          std::to_string(ms) + " ms");
}

void tick(size_t units) {
  RenderScope* s = current;
  if (!s) return;
  s->work_ += units;
  if (s->work_ < s->next_check_) return;
  s->next_check_ = s->work_ + 4096;
  if (s->past_deadline()) time_limit_error();
}

void charge(size_t bytes) {
  RenderScope* s = current;
  if (!s) return;
  if (bytes > RenderScope::kMaxBytes - s->used_) over_budget();
  s->used_ += bytes;
  tick();
}

void check_room(size_t bytes) {
  const RenderScope* s = current;
  if (s && bytes > RenderScope::kMaxBytes - s->used_) over_budget();
}

void track_namespace(const std::shared_ptr<Dict>& entries) {
  if (current) current->namespaces_.push_back(entries);
}

}  // namespace pagoda::jinja
