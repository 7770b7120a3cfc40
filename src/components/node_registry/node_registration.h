// NodeRegistration: this server's entry in the node registry of a storage several nodes serve at
// once (storage/node_registry.h; PostgreSQL), as a component (components/component.h).
//
// Wire picks this node's random id and role ("eventual" when it reads from a standby, else
// "strong") and hands the KV Connect service the other live nodes for its metadata answers;
// Start registers the node under the URL clients reach it at (--advertise-url, else
// --public-url, else the main listener's) and starts the heartbeat; when shutdown begins (a
// drain hook) the node leaves the registry, so other nodes stop listing it while it drains.
// kvconnect_nodes_live, kvconnect_replica_lag_seconds and kvconnect_reading_from_replica are
// its metrics.
//
// Ownership: does not own the registry (the storage does; it must outlive this).
// Thread-safety: Wire/Start/Stop from the application's thread; Collect and the peer list are
// thread-safe (the registry is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "components/component.h"
#include "storage/node_registry.h"

namespace kvc::components {

// `serve`'s node registry flags.
struct NodeRegistryOptions {
  std::string advertise_url;          // --advertise-url; empty: --public-url or the listener's
  std::string region;                 // --region: a free-form label
  int64_t max_replica_lag_ms = 5000;  // --max-replica-lag-ms
  int64_t heartbeat_ms = 2000;        // --node-heartbeat-ms
};

class NodeRegistration : public Component, public service::MetricsCollector {
 public:
  // REQUIRES: `nodes` outlives this.
  NodeRegistration(storage::NodeRegistry* nodes, NodeRegistryOptions options);
  ~NodeRegistration() override;

  const char* name() const override { return "node registry"; }
  Status Wire(Wiring& wiring) override;
  Status Start(const Started& started) override;
  void Stop() override;

  void Collect(std::vector<service::ScrapedFamily>* out) const override;

 private:
  storage::NodeRegistry* const nodes_;
  const NodeRegistryOptions options_;
  std::string id_;          // set by Wire
  std::string role_;        // set by Wire
  std::string public_url_;  // --public-url, from the service options at Wire
};

}  // namespace kvc::components
