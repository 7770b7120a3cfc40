// PostgreSQL storage backend: one database of a deployment whose kvconnect nodes (any number)
// share one PostgreSQL (schema in pg_schema.h).
//
// Versions: every write transaction first locks its database's counter row in kvc_data_version
// (SELECT ... FOR UPDATE, READ COMMITTED). The lock is held to commit, so writers of one database
// on every node are serialized there: the version Begin() returns is the last committed one, the
// engine's checks read rows committed before it (each READ COMMITTED statement sees them), and
// the versions a transaction issues are above every earlier commit's and below every later one's.
// (Sequences and xids are handed out in an order that differs from commit order; a counter row is
// not.) On a new PostgreSQL timeline (after a failover) the first transaction jumps the counter by
// 2^32, so a version the old primary issued but never replicated is never issued again.
//
// Writes are batched client-side: Put/Delete land in an overlay (Get sees it), AddQueueMessage,
// AppendChangeLog and SetDataVersion are queued, and COMMIT sends them in one pipeline: the final
// state of every changed key as one multi-row upsert and one delete (binary arrays), the commit
// records as one insert, then the counter row, the NOTIFY and COMMIT. A group commit costs two
// round trips plus one per check read, and a handful of statements whatever its size.
// Savepoints are client-side marks (the overlay's undo log); statements that must run at once
// (queue, expiry) flush the batch first and are never used inside a savepoint.
//
// Not the only writer (capabilities(): exclusive_writer false, change_feed_reads_log): the
// engine learns of every commit (its own included) from OpenChangeFeed: each commit stores its
// records in kvc_changes and NOTIFYs the database's channel with its version; the feed LISTENs,
// reads the new records in version order, re-reads from where it was after reconnecting, and
// polls slowly as a safety net. Records older than the retention are pruned; a feed that fell
// further behind reports a gap (CommitGroup::resync).
//
// Expired rows: every node's reads hide them at once (by time); one node at a time deletes them,
// the holder of a session advisory lock, which PostgreSQL releases when that node's session ends,
// so another node takes over within `expiry_leader_retry_ms`.
//
// Reads: REPEATABLE READ, READ ONLY transactions (one snapshot for several ranges); the first
// statement travels with BEGIN and the version query in one pipeline, and the commit is sent
// without waiting.
//
// Errors: every PostgreSQL failure is IoError; a broken connection is re-made on the next Begin.
// Thread-safety: PgBackend is thread-safe; each Reader/Writer owns its own connection and is used
// by one thread at a time.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "storage/backend.h"
#include "storage/pg_tuning.h"

namespace kvc::storage {

struct PgBackendOptions {
  std::string conninfo;     // the primary (writes, change feed, catalog)
  std::string database_id;  // UUID
  // Reads go here when set (a streaming standby) and `use_replica` says so (the node registry
  // clears it while the standby lags too far); otherwise to the primary.
  std::string read_conninfo;
  std::shared_ptr<std::atomic<bool>> use_replica;
  PgTuning tuning;
};

class PgBackend : public Backend {
 public:
  // Checks the database's counter row exists. Errors: NotFound, IoError.
  static Result<std::unique_ptr<PgBackend>> Open(const PgBackendOptions& options);

  const std::string& database_id() const override { return options_.database_id; }
  // One of many writers (every node), learning of commits from a change feed read back from
  // the change log; connections re-made by themselves, so a failed commit or an IoError is
  // transient (503); the queue in tables of its own (pg_queue.h).
  BackendCapabilities capabilities() const override {
    return {.exclusive_writer = false,
            .on_commit_error = CommitErrorPolicy::kReconnect,
            .change_feed = true,
            .change_feed_reads_log = true,
            .change_log = true,
            .queue_store = true};
  }
  Result<std::unique_ptr<ChangeFeed>> OpenChangeFeed(const CommitCallback& on_commit) override;
  Result<int64_t> LoadDataVersion() override;
  Result<std::unique_ptr<Reader>> OpenReader() override;
  Result<std::unique_ptr<Writer>> OpenWriter() override;

 private:
  explicit PgBackend(PgBackendOptions options) : options_(std::move(options)) {}
  const PgBackendOptions options_;
  std::atomic<int64_t> loaded_version_{0};  // the change feed starts after it
};

}  // namespace kvc::storage
