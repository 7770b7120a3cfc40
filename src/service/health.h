// Health endpoints: GET /healthz (the process is alive and its I/O threads answer) and
// GET /readyz (it should get traffic: every database in the catalog is open and writable, and
// the server is not shutting down). Used by the Kubernetes probes and the Dockerfile's
// HEALTHCHECK. A not-ready answer is a 503 whose text lists the reasons.
//
// Ownership: does not own the directory.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "service/directory.h"
#include "service/http_types.h"

namespace kvc::service {

class Health {
 public:
  explicit Health(Directory* directory) : directory_(directory) {}

  // From now on /readyz answers 503 (shutdown has begun). Irreversible.
  void SetDraining() { draining_ = true; }
  // Why the server is not ready; empty when it is.
  std::vector<std::string> NotReadyReasons() const;
  // Lines /readyz adds to its answer either way (e.g. the backup lag). REQUIRES: before serving.
  void SetDetailSource(std::function<std::vector<std::string>()> source) {
    details_ = std::move(source);
  }
  std::vector<std::string> Details() const {
    return details_ ? details_() : std::vector<std::string>();
  }

 private:
  Directory* const directory_;
  std::atomic<bool> draining_{false};
  std::function<std::vector<std::string>()> details_;
};

class HealthHandler : public Handler {
 public:
  enum class Kind { kLive, kReady };
  HealthHandler(const Health* health, Kind kind) : health_(health), kind_(kind) {}
  void Handle(HttpRequest request, Responder respond) override;

 private:
  const Health* health_;
  const Kind kind_;
};

}  // namespace kvc::service
