// EngineHandle: the engine as the network threads see it (design card: the
// request queue, the output channels, the stats snapshot) — the only way they
// reach it. All methods are callable from any thread. An interface so the
// HTTP layer can be tested against a scripted fake engine.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/request.h"
#include "engine/stats.h"

namespace pagoda {

class Engine;

class EngineHandle {
 public:
  virtual ~EngineHandle() = default;
  virtual void add_request(std::unique_ptr<GenerateRequest> request) = 0;
  virtual void abort_request(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual bool running() const = 0;  // GET /health answers 200 when true
};

// The real engine. running() is what the owner last set (true between
// Engine::start() and Engine::stop()). While not running, add_request
// answers at once with a 503 error ("The server is shutting down") instead
// of queueing; once set_running(false) has returned, no request reaches the
// engine's queue any more (shutdown: everything the engine holds then ends
// with its abort delta when it stops).
class EngineAdapter final : public EngineHandle {
 public:
  explicit EngineAdapter(Engine& engine) : engine_(engine) {}
  void add_request(std::unique_ptr<GenerateRequest> request) override;
  void abort_request(const std::string& request_id) override;
  EngineStats stats() const override;
  bool running() const override { return running_.load(); }
  void set_running(bool r);

 private:
  Engine& engine_;
  std::mutex add_mu_;  // orders add_request against set_running(false)
  std::atomic<bool> running_{false};
};

}  // namespace pagoda
