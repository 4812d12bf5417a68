// EngineHandle: the engine as the network threads see it (design card: the
// request queue, the output channels, the stats snapshot) — the only way they
// reach it. All methods are callable from any thread. An interface so the
// HTTP layer can be tested against a scripted fake engine.
#pragma once
#include <atomic>
#include <memory>
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
// Engine::start() and Engine::stop()).
class EngineAdapter final : public EngineHandle {
 public:
  explicit EngineAdapter(Engine& engine) : engine_(engine) {}
  void add_request(std::unique_ptr<GenerateRequest> request) override;
  void abort_request(const std::string& request_id) override;
  EngineStats stats() const override;
  bool running() const override { return running_.load(); }
  void set_running(bool r) { running_.store(r); }

 private:
  Engine& engine_;
  std::atomic<bool> running_{false};
};

}  // namespace pagoda
