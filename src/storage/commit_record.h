// Commit records: what one durable commit changed, as the engine publishes it to its listeners
// (watch hub, metrics, and later the backup log, queue waiters and cross-node feeds) and as a
// backend that is not the exclusive writer of its database reports other writers' commits.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/kv_types.h"

namespace kvc::storage {

struct StoredRow {
  std::string value;
  ValueEncoding encoding = ValueEncoding::kBytes;
  int64_t version = 0;
  int64_t expire_at_ms = -1;  // -1: never
};

// True if a row with this expiry is visible at now_ms.
inline bool IsLive(int64_t expire_at_ms, int64_t now_ms) {
  return expire_at_ms < 0 || expire_at_ms > now_ms;
}

// A queued message (Deno's `queue` table): due at `ts`, delivered with `backoff_schedule` (ms
// between attempts), and written to every key of `keys_if_undelivered` if delivery fails for
// good. How a backend stores the lists is its own business.
struct QueueRow {
  int64_t ts = 0;  // Unix ms when it becomes deliverable
  std::string id;  // UUID
  std::string payload;
  std::vector<uint32_t> backoff_schedule;
  std::vector<std::string> keys_if_undelivered;
};

// One key's new state after a commit.
struct KeyChange {
  std::string key;
  std::optional<StoredRow> row;  // nullopt: the key was deleted (or expired)
};

// One atomic write (or one expiry sweep) as committed at `version`.
struct CommitRecord {
  int64_t version = 0;
  std::vector<KeyChange> changes;  // in the order the write made them; a key may repeat
  std::vector<QueueRow> enqueues;  // messages the write added to the queue
};

// Where a group of records came from.
enum class CommitOrigin {
  kWrite,        // atomic writes of this process (one group commit)
  kExpiry,       // this process's expiry sweep
  kOtherWriter,  // another writer of the same database, via the backend's change feed
  kQueue,        // queue delivery (keys_if_undelivered of dead-lettered messages)
};

// The records of one storage transaction, in increasing version order.
struct CommitGroup {
  CommitOrigin origin = CommitOrigin::kWrite;
  int64_t time_ms = 0;  // when it committed (Unix ms)
  std::vector<CommitRecord> records;
  // Storage timings of this transaction (0 when unknown, e.g. other writers' commits): from
  // the write lock being taken to the commit returning, and of the commit call alone (with
  // sync=full, mostly fsync).
  int64_t transaction_us = 0;
  int64_t commit_us = 0;
  // Set by a change feed that missed commits (its source pruned them): `records` hold what came
  // after the gap; listeners must treat every key as possibly changed before them.
  bool resync = false;
};

}  // namespace kvc::storage
