// QueueStore: the queue tables of one database (rows in queue_rows.h, commit_record.h), as a
// part of a write transaction that a backend may offer (BackendCapabilities::queue_store;
// Writer::queue_store()). Atomic writes add messages through it (AddQueueMessage) and queue
// delivery (queue/queue.h) moves them between its tables. Every call works in the transaction
// the owning Writer has open (Begin .. Commit/Rollback), next to that writer's key writes.
// Message ids are unique across the ready and the running table.
//
// Errors: IoError or Corruption, as the owning Writer's.
// Ownership and thread-safety: owned by its Writer (valid while the Writer is) and used by the
// Writer's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/commit_record.h"
#include "storage/queue_rows.h"

namespace kvc::storage {

class QueueStore {
 public:
  virtual ~QueueStore() = default;
  // Adds a ready message, due at row.ts.
  virtual Status AddQueueMessage(const QueueRow& row) = 0;
  // Ready messages with ts <= now_ms, by (ts, id), at most `limit`.
  virtual Result<std::vector<QueuedMessage>> QueueDue(int64_t now_ms, size_t limit) = 0;
  // The smallest ts of the ready table, or of the running table (`running`), if any.
  virtual Result<std::optional<int64_t>> QueueEarliest(bool running) = 0;
  // Moves the ready message `row` (as QueueDue returned it) to running until `deadline_ms`, with
  // `state`.
  virtual Status QueueLease(const QueueRow& row, int64_t deadline_ms,
                            const QueueDeliveryState& state) = 0;
  // The running message `id`, if any (a default state when kvconnect has none for it).
  virtual Result<std::optional<QueuedMessage>> QueueGetRunning(std::string_view id) = 0;
  // Ids of running messages whose deadline <= now_ms, earliest first, at most `limit`.
  virtual Result<std::vector<std::string>> QueueRunningDue(int64_t now_ms, size_t limit) = 0;
  virtual Status QueueSetDeadline(std::string_view id, int64_t deadline_ms) = 0;
  // Removes the running message `id` and its delivery state.
  virtual Status QueueRemoveRunning(std::string_view id) = 0;
  // Moves the running message row.id back to ready as `row` (due at row.ts, with the remaining
  // backoff schedule), keeping `state`.
  virtual Status QueueRequeue(const QueueRow& row, const QueueDeliveryState& state) = 0;
  virtual Status QueueAddDead(const DeadLetterRow& dead) = 0;
  // Dead letters with id > after, by id, at most `limit`.
  virtual Result<std::vector<DeadLetterRow>> QueueListDead(std::string_view after,
                                                           size_t limit) = 0;
  // Removes the dead letter `id`; returns it if it was there.
  virtual Result<std::optional<DeadLetterRow>> QueueTakeDead(std::string_view id) = 0;
  // Removes dead letters with dead_at_ms < before_ms; returns how many.
  virtual Result<int64_t> QueuePruneDead(int64_t before_ms) = 0;
  virtual Result<QueueTableCounts> QueueCounts(int64_t now_ms) = 0;
};

}  // namespace kvc::storage
