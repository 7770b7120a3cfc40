// PgNodeRegistry: the node registry (storage/node_registry.h) in PostgreSQL's kvc_nodes table,
// plus the replay-lag watch of a node that reads from a streaming standby: each heartbeat it
// compares the standby's replayed WAL position with the primary's current one (caught up: lag
// 0; otherwise the time since the standby replayed its last transaction) and turns the node's
// reads to the primary while the lag exceeds the bound, back to the standby once it is within.
//
// Thread-safety: thread-safe; one background thread between Start and Stop.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/worker_thread.h"
#include "storage/node_registry.h"

namespace kvc::storage {

class PgNodeRegistry : public NodeRegistry {
 public:
  // `use_replica` is shared with the backends' readers (PgBackendOptions::use_replica).
  PgNodeRegistry(std::string conninfo, std::string read_conninfo,
                 std::shared_ptr<std::atomic<bool>> use_replica);
  ~PgNodeRegistry() override;

  void Start(NodeInfo self, int64_t heartbeat_ms, int64_t max_replica_lag_ms) override;
  std::vector<NodeInfo> LiveNodes() const override;
  int64_t ReplicaLagMs() const override { return lag_ms_.load(); }
  bool ReadingFromReplica() const override { return use_replica_->load(); }
  void Stop() override KVC_EXCLUDES(mu_);

 private:
  void Loop() KVC_EXCLUDES(mu_);
  // Waits one heartbeat, or until Stop. Returns true if Stop was called.
  bool WaitForNextBeat() KVC_EXCLUDES(mu_);

  const std::string conninfo_;
  const std::string read_conninfo_;
  const std::shared_ptr<std::atomic<bool>> use_replica_;
  NodeInfo self_;
  int64_t heartbeat_ms_ = 2000;
  int64_t max_lag_ms_ = 5000;
  std::atomic<int64_t> lag_ms_{-1};
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<NodeInfo> live_ KVC_GUARDED_BY(mu_);
  WorkerThread worker_;
};

}  // namespace kvc::storage
