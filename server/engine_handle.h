// EngineHandle: the engine as the network threads see it (design card: the
// request queue, the output channels, the stats snapshot) — the only way they
// reach it. All methods are callable from any thread. An interface so the
// HTTP layer can be tested against a scripted fake engine.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"
#include "engine/stats.h"

namespace pagoda {

// GET /health's verdict: healthy, or the reason it is not (answered 503).
struct EngineHealth {
  bool healthy = true;
  std::string reason;
};

class EngineHandle {
 public:
  virtual ~EngineHandle() = default;
  virtual void add_request(std::unique_ptr<GenerateRequest> request) = 0;
  virtual void abort_request(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual bool running() const = 0;
  // All-or-nothing admission of one client request's engine requests
  // (Engine::try_add_requests). Default: add_request each, accepted.
  virtual Admission add_requests(std::vector<std::unique_ptr<GenerateRequest>>& requests) {
    for (auto& r : requests) add_request(std::move(r));
    return Admission::kAccepted;
  }
  // Aborts several requests at once (one engine command). Default: one
  // abort_request each.
  virtual void abort_requests(std::vector<std::string> request_ids) {
    for (const std::string& id : request_ids) abort_request(id);
  }
  // GET /health. Default: healthy while running().
  virtual EngineHealth health() const {
    if (running()) return {};
    return {false, "The engine is not taking requests (starting up or shutting down)"};
  }
  // The --max-num-waiting-requests bound (0 = none), for error messages.
  virtual int64_t max_num_waiting_requests() const { return 0; }
};

// The real engine. running() is what the owner last set (true between
// Engine::start() and Engine::stop()). While not running, add_request
// answers at once with a 503 error ("The server is shutting down") instead
// of queueing; once set_running(false) has returned, no request reaches the
// engine's queue any more (shutdown: everything the engine holds then ends
// with its abort delta when it stops).
//
// health() is unhealthy (503) when not running (also while shutting down),
// when the engine has had work but has not finished a step for longer than
// `hang_timeout` (vLLM's hung-engine case: the process is up, nothing
// progresses; 0 disables the check), and when the waiting queue is full
// (max_num_waiting_requests reached: overloaded, new requests get 503).
class EngineAdapter final : public EngineHandle {
 public:
  explicit EngineAdapter(Engine& engine,
                         std::chrono::milliseconds hang_timeout = std::chrono::milliseconds(0))
      : engine_(engine), hang_timeout_(hang_timeout) {}
  void add_request(std::unique_ptr<GenerateRequest> request) override;
  Admission add_requests(std::vector<std::unique_ptr<GenerateRequest>>& requests) override;
  void abort_request(const std::string& request_id) override;
  void abort_requests(std::vector<std::string> request_ids) override;
  EngineStats stats() const override;
  bool running() const override { return running_.load(); }
  EngineHealth health() const override;
  int64_t max_num_waiting_requests() const override;
  void set_running(bool r);

 private:
  Engine& engine_;
  std::chrono::milliseconds hang_timeout_;
  std::mutex add_mu_;  // orders add_request against set_running(false)
  std::atomic<bool> running_{false};
};

}  // namespace pagoda
