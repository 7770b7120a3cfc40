// The queue primitives of the PostgreSQL writer (its QueueStore, queue_store.h) over kvc_queue,
// kvc_queue_running, kvc_queue_state and kvc_queue_dead (pg_schema.h): the same rows and text
// forms (queue_text.h) as the SQLite backend, each table keyed by database. They run inside the
// writer's transaction, which holds its database's counter row, so queue transitions of every
// node are serialized like writes.
//
// Thread-safety: used by the owning writer's thread only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/postgres/pg_conn.h"
#include "storage/queue_rows.h"

namespace kvc::storage::pg {

// Registers on a reader's connection the statements that read whole queue tables a page at a
// time, in the reader's snapshot: "q_scan_ready" and "q_scan_running" ($1 db, $2 ts and $3 id
// of the place to start after, $4 limit; columns as AppendQueued reads), "q_scan_dead" ($1 db,
// $2 id to start after, $3 limit; columns as AppendDead reads).
void DefineQueueScans(Connection& conn);
// Appends the messages of a "q_due" or "q_scan_*" result. Errors: Corruption (bad text forms).
Status AppendQueued(const PgResult& r, std::vector<QueuedMessage>* out);
// Appends the dead letters of a "q_list_dead" or "q_scan_dead" result. Errors: Corruption.
Status AppendDead(const PgResult& r, std::vector<DeadLetterRow>* out);

class QueueStatements {
 public:
  // Borrows `conn` (the writer's); `db` is the database UUID.
  QueueStatements(Connection& conn, std::string db) : conn_(conn), db_(std::move(db)) {}
  // Registers the statements on the connection.
  void Define();

  // The insert of a new ready message, to batch with the rest of a write.
  Statement AddStatement(const QueueRow& row) const;

  Result<std::vector<QueuedMessage>> Due(int64_t now_ms, size_t limit);
  Result<std::optional<int64_t>> Earliest(bool running);
  Status Lease(const QueueRow& row, int64_t deadline_ms, const QueueDeliveryState& state);
  Result<std::optional<QueuedMessage>> GetRunning(std::string_view id);
  Result<std::vector<std::string>> RunningDue(int64_t now_ms, size_t limit);
  Status SetDeadline(std::string_view id, int64_t deadline_ms);
  Status RemoveRunning(std::string_view id);
  Status Requeue(const QueueRow& row, const QueueDeliveryState& state);
  Status AddDead(const DeadLetterRow& dead);
  Result<std::vector<DeadLetterRow>> ListDead(std::string_view after, size_t limit);
  Result<std::optional<DeadLetterRow>> TakeDead(std::string_view id);
  Result<int64_t> PruneDead(int64_t before_ms);
  Result<QueueTableCounts> Counts(int64_t now_ms);

 private:
  Statement RowStatement(const char* name, const QueueRow& row, int64_t ts) const;
  Statement StateStatement(std::string_view id, const QueueDeliveryState& st) const;
  Status RunAll(const std::vector<Statement>& stmts);

  Connection& conn_;
  const std::string db_;
};

}  // namespace kvc::storage::pg
