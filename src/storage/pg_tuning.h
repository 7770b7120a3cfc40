// PgTuning: a PostgreSQL node's timings and session name, set once by `serve` (its --pg-* flags)
// in StorageOptions::pg and handed unchanged to each database's backend (PgBackendOptions).
// A plain value; no thread-safety concerns.
#pragma once

#include <cstdint>
#include <string>

namespace kvc::storage {

// A PostgreSQL node's timings and session name (StorageOptions::pg, PgBackendOptions::tuning).
struct PgTuning {
  // How long commits stay in the change table other nodes' feeds read (ms), and how often a
  // feed re-reads it when no notification came.
  int64_t change_retention_ms = 60 * 1000;
  int64_t feed_poll_ms = 1000;
  // How soon another node takes over sweeping expired keys when the sweeper dies.
  int64_t expiry_leader_retry_ms = 2000;
  // How long a writer whose connection broke during COMMIT keeps asking (reconnecting, e.g.
  // through a failover) whether the commit landed, before answering 503 (outcome unknown).
  int64_t commit_outcome_wait_ms = 10000;
  // The application_name of this node's connections.
  std::string application_name = "kvconnect";
};

}  // namespace kvc::storage
