// Health endpoints: GET /healthz (the process is alive and its I/O threads answer) and
// GET /readyz (it should get traffic: every database in the catalog is open and writable, and
// the server is not shutting down). Used by the Kubernetes probes and the Dockerfile's
// HEALTHCHECK, so both answer without a token. A not-ready answer is a 503 with a short reason
// that names no database; GET /readyz?verbose=1 adds the names and the detail lines (backup
// lag and errors) for whoever the OperatorGate admits.
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
#include "service/ops/operator_gate.h"

namespace kvc::service {

class Health {
 public:
  explicit Health(Directory* directory) : directory_(directory) {}

  // From now on /readyz answers 503 (shutdown has begun). Irreversible.
  void SetDraining() { draining_ = true; }
  // Why the server is not ready; empty when it is. `detailed`: each database by name; else
  // counts only (what an unauthenticated caller may see).
  std::vector<std::string> NotReadyReasons(bool detailed) const;
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
  // `gate` decides who gets the detailed readiness (kReady); it must outlive the handler.
  HealthHandler(const Health* health, Kind kind, const OperatorGate* gate = nullptr)
      : health_(health), kind_(kind), gate_(gate) {}
  void Handle(HttpRequest request, Responder respond) override;

 private:
  // The /readyz answer; `detailed`: with names and detail lines.
  HttpResponse Ready(bool detailed) const;

  const Health* health_;
  const Kind kind_;
  const OperatorGate* gate_;  // null: the detailed answer is refused
};

}  // namespace kvc::service
