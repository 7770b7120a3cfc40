// The node registry of a shared storage (PostgreSQL): every kvconnect node serving it registers
// itself (advertised URL, role, region) and refreshes its row with a heartbeat, so that every
// node's metadata exchange can list the live strong and eventual endpoints. A node reading from
// a streaming standby also measures the standby's replay lag here and turns its reads to the
// primary while the lag exceeds its bound.
//
// Thread-safety: implementations are thread-safe; Start runs a background thread until Stop or
// destruction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvc::storage {

struct NodeInfo {
  std::string id;      // random, per process
  std::string url;     // base URL clients reach the node at (no trailing slash)
  std::string role;    // "strong" (reads from the primary) or "eventual" (from a standby)
  std::string region;  // free-form label
  int64_t started_ms = 0;
  int64_t heartbeat_ms = 0;
};

class NodeRegistry {
 public:
  virtual ~NodeRegistry() = default;
  // Registers `self` and refreshes it every `heartbeat_ms`; a node is live while its heartbeat
  // is younger than 5 heartbeats. `max_replica_lag_ms` bounds the standby lag of an eventual
  // node. REQUIRES: called once.
  virtual void Start(NodeInfo self, int64_t heartbeat_ms, int64_t max_replica_lag_ms) = 0;
  // The live nodes as of the last heartbeat (this one included, even before the first).
  virtual std::vector<NodeInfo> LiveNodes() const = 0;
  // The standby replay lag last measured (ms; 0 when caught up), or -1 without a standby.
  virtual int64_t ReplicaLagMs() const = 0;
  // True while this node's reads go to its standby.
  virtual bool ReadingFromReplica() const = 0;
  // Stops the heartbeat and removes this node's row.
  virtual void Stop() = 0;
};

}  // namespace kvc::storage
