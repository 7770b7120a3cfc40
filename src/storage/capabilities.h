// Backend capabilities: what a storage backend can do and what its failures mean, as one named
// record (Backend::capabilities()) that the engine reads field by field. A new kind of storage
// (an optimistic, FoundationDB-like store; a store without queues) says here how it differs,
// and the engine follows without learning which kind it is.
//
// The engine checks the record when it opens (Engine::Open), against what its options need:
// a missing capability is refused there with a clear Status, never at first use.
//
//   exclusive_writer    nobody but this process's one Writer changes the database (SQLite: one
//                       writer connection per file, behind Storage::LockWriters). Otherwise
//                       other writers' commits would make cached rows stale, so the engine
//                       turns its read cache off, learns of every commit (its own included)
//                       from the change feed, and lets writes that queue up while Begin() waits
//                       for the shared lock join that transaction. REQUIRES: change_feed.
//   on_commit_error     what a failed commit (and an IoError) means; see CommitErrorPolicy.
//   optimistic_conflicts
//                       Writer::Commit() may refuse a transaction because another one committed
//                       first something it read (CommitConflict below). Nothing of it applied;
//                       the engine runs the group again, checks re-evaluated, up to
//                       EngineOptions::max_commit_retries times, then answers 503.
//   transaction_limits  how much one storage transaction may hold; the engine cuts its group
//                       commits to fit, and refuses to open if one atomic write as large as its
//                       Limits allow could not fit.
//   change_feed         Backend::OpenChangeFeed reports every commit in version order.
//   change_feed_reads_log
//                       the change feed is read back from the change log (PostgreSQL's
//                       kvc_changes), so the engine logs every commit, not only for backups.
//                       REQUIRES: change_log.
//   change_log          Writer::change_log() appends to and prunes the change log
//                       (storage/change_log.h) and Reader::ReadChangeLog reads it.
//   queue_store         Writer::queue_store() holds the queue tables (storage/queue_store.h):
//                       enqueues of atomic writes and queue delivery.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace kvc::storage {

// What a failed Writer::Commit() (or an IoError from any call) means for the engine.
enum class CommitErrorPolicy {
  // The outcome may be unknown to this process and the storage may be damaged (a failed fsync
  // can leave data in the OS cache or not): the engine refuses writes until restart, and I/O
  // errors reach the client as errors (500). SQLite.
  kFailStop,
  // The backend re-makes broken connections by itself and a failed call applied nothing (a
  // commit whose outcome it could not learn is reported as unavailable): the failed writes
  // answer Unavailable (503, clients retry), IoErrors of reads too, and the next transaction
  // tries again. PostgreSQL.
  kReconnect,
};

// Bounds of one storage transaction; 0 means no bound beyond the engine's own.
struct TransactionLimits {
  size_t max_writes = 0;  // atomic writes in one group commit (EngineOptions::max_batch_writes)
  size_t max_bytes = 0;   // bytes of the writes of one group, counted as engine/limits.h counts
                          // an atomic write against max_total_mutation_bytes
};

struct BackendCapabilities {
  bool exclusive_writer = true;
  CommitErrorPolicy on_commit_error = CommitErrorPolicy::kFailStop;
  bool optimistic_conflicts = false;
  TransactionLimits transaction_limits;
  bool change_feed = false;
  bool change_feed_reads_log = false;
  bool change_log = false;
  bool queue_store = false;
};

// The status Writer::Commit() returns when an optimistic backend refuses the transaction for a
// conflict (nothing applied; the transaction is gone). Only backends with optimistic_conflicts.
inline Status CommitConflict(std::string message) {
  return Status(StatusCode::kConflict, std::move(message));
}
inline bool IsCommitConflict(const Status& s) { return s.code() == StatusCode::kConflict; }

}  // namespace kvc::storage
