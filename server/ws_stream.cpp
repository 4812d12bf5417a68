#include "server/ws_stream.h"

#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

namespace pagoda {

void WsStream::drain_locked() {
  if (!group) return;
  for (ChoiceDelta& d : group->drain()) {
    if (finished) continue;  // nothing follows an error
    const bool error = !d.error.empty();
    log.push_back(std::move(d));
    finished = error;
  }
  finished = finished || group->done();
}

void WsStream::abort_locked() {
  if (group && !finished) group->abort();
}

bool StreamHub::add(const std::shared_ptr<WsStream>& s) {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.emplace(s->client_id, s).second;
}

std::shared_ptr<WsStream> StreamHub::find(const std::string& client_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(client_id);
  return it == streams_.end() ? nullptr : it->second;
}

void StreamHub::remove(const std::shared_ptr<WsStream>& s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(s->client_id);
  if (it != streams_.end() && it->second == s) streams_.erase(it);
}

void StreamHub::abort(const std::shared_ptr<WsStream>& s) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->abort_locked();
  }
  remove(s);
}

size_t StreamHub::sweep(Clock::time_point now) {
  std::vector<std::shared_ptr<WsStream>> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : streams_) {
      std::lock_guard<std::mutex> slock(s->mu);
      if (!s->owner.expired()) continue;
      // A session that died without detaching (server shutdown) left no
      // detach time: its grace period starts now.
      if (s->detached_at == Clock::time_point{}) s->detached_at = now;
      if (now - s->detached_at >= grace_) expired.push_back(s);
    }
  }
  for (auto& s : expired) {
    spdlog::info("Aborted request {}: not resumed within {} ms", s->request_id, grace_.count());
    abort(s);
  }
  return expired.size();
}

namespace {

void arm_sweeper(StreamHub* hub, std::shared_ptr<boost::asio::steady_timer> timer, std::chrono::milliseconds period) {
  timer->expires_after(period);
  timer->async_wait([hub, timer, period](const boost::system::error_code& ec) {
    if (ec) return;
    hub->sweep();
    arm_sweeper(hub, timer, period);
  });
}

}  // namespace

void StreamHub::start_sweeper(boost::asio::any_io_executor ex, std::chrono::milliseconds period) {
  arm_sweeper(this, std::make_shared<boost::asio::steady_timer>(ex), period);
}

size_t StreamHub::num_detached() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, s] : streams_) {
    std::lock_guard<std::mutex> slock(s->mu);
    n += s->owner.expired() ? 1 : 0;
  }
  return n;
}

size_t StreamHub::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

}  // namespace pagoda
