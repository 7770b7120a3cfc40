// Storage backend interface: the primitive, transactional operations the engine builds the KV
// semantics on (checks, sums, versionstamps and watches live in engine/, not here), so a
// PostgreSQL backend can be added without touching the engine.
//
// Versions: Writer::Begin() returns the committed data version as seen under the backend's own
// write lock, and the engine allocates the versions of that transaction above it. So several
// writers (processes or nodes) of one database stay in commit order, as long as the backend's
// lock serializes them (or, for an optimistic backend, its commit refuses the losers).
//
// Capabilities: a backend describes itself in one record (capabilities.h): whether this
// process is the only writer of its database, what a failed commit means, optimistic
// conflicts, transaction limits, and which optional parts it offers: a change feed
// (OpenChangeFeed), a change log (Writer::change_log(), Reader::ReadChangeLog) and a queue store
// (Writer::queue_store()). The engine reads it by name and refuses at open what it lacks.
//
// Errors: storage failures are IoError (could not read or write) or Corruption (stored bytes
// are not valid); never client text. Writer::Commit() of an optimistic backend may also return
// CommitConflict (capabilities.h).
//
// Ownership: a Backend hands out Reader, Writer and ChangeFeed objects, each owning its
// connection; the caller owns them and must destroy them before the Backend.
// Thread-safety: Backend methods are thread-safe. A Reader or Writer is used by one thread at a
// time. At most one Writer per database is open in one process.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/capabilities.h"
#include "storage/change_log.h"
#include "storage/change_log_writer.h"
#include "storage/commit_record.h"
#include "storage/kv_types.h"
#include "storage/queue_rows.h"
#include "storage/queue_store.h"

namespace kvc::storage {

// How far a commit is made durable before it is acknowledged: fsynced (kFull), written to the
// OS (kNormal: survives a process crash, not power loss), or not even that (kOff).
enum class SyncMode { kFull, kNormal, kOff };

// A stored row with its key, as Reader::ScanRows returns it.
struct KeyedRow {
  std::string key;
  StoredRow row;
};

// Sizes for metrics; either may be -1 when a backend cannot tell cheaply.
struct StorageStats {
  int64_t key_count = -1;    // rows in the key space, expired ones included
  int64_t total_bytes = -1;  // bytes the database occupies in storage
  int64_t wal_bytes = -1;    // SQLite: bytes of its write-ahead log file (-1: the kind has none)
};

// A read-only connection. Begin() opens a snapshot; everything until End() sees it.
class Reader {
 public:
  virtual ~Reader() = default;
  virtual Status Begin() = 0;
  // Appends the live rows (see IsLive) of `range` to *out, at most range.limit of them.
  virtual Status Scan(const ReadRange& range, int64_t now_ms, std::vector<Entry>* out) = 0;
  // The row stored for `key` in the open snapshot, expired or not (callers apply IsLive).
  virtual Result<std::optional<StoredRow>> Get(std::string_view key) = 0;
  // Appends every row of `range` in the open snapshot, expired ones included, with its expiry,
  // in ascending key order, at most range.limit of them: a database copied whole (`kvconnect
  // migrate`). REQUIRES: !range.reverse. The default scans as of the earliest time (so every
  // row counts as live) and gets each row's expiry; a backend may override it with one query.
  virtual Status ScanRows(const ReadRange& range, std::vector<KeyedRow>* out) {
    std::vector<Entry> entries;
    KVC_RETURN_IF_ERROR(Scan(range, std::numeric_limits<int64_t>::min(), &entries));
    for (Entry& e : entries) {
      KVC_ASSIGN_OR_RETURN(std::optional<StoredRow> row, Get(e.key));
      if (!row) return Internal("a row the snapshot scan returned is gone in the same snapshot");
      out->push_back(KeyedRow{std::move(e.key), std::move(*row)});
    }
    return Status::Ok();
  }
  // The committed data version of the open snapshot.
  virtual Result<int64_t> DataVersion() = 0;
  // Point reads of several keys in one snapshot of its own, outside Begin/End: (*rows)[i] is the
  // row stored for keys[i], expired or not (callers apply IsLive). Returns the snapshot's data
  // version. The default is Begin, Get each, DataVersion, End; a backend may answer it in one
  // statement.
  virtual Result<int64_t> GetAlone(const std::vector<std::string>& keys,
                                   std::vector<std::optional<StoredRow>>* rows) {
    KVC_RETURN_IF_ERROR(Begin());
    rows->clear();
    Status s = Status::Ok();
    for (const std::string& k : keys) {
      Result<std::optional<StoredRow>> row = Get(k);
      if (!row.ok()) {
        s = row.status();
        break;
      }
      rows->push_back(std::move(*row));
    }
    Result<int64_t> v = s.ok() ? DataVersion() : Result<int64_t>(s);
    End();
    return v;
  }
  // One range read in a snapshot of its own, outside Begin/End: appends its live rows to *out
  // and returns the snapshot's data version. The default is Begin, Scan, DataVersion, End; a
  // backend may answer it in one statement.
  virtual Result<int64_t> ScanAlone(const ReadRange& range, int64_t now_ms,
                                    std::vector<Entry>* out) {
    KVC_RETURN_IF_ERROR(Begin());
    Status s = Scan(range, now_ms, out);
    Result<int64_t> v = s.ok() ? DataVersion() : Result<int64_t>(s);
    End();
    return v;
  }
  // False if the open snapshot came from a replica that may lag the primary (an eventual read).
  virtual bool snapshot_is_strong() const { return true; }
  virtual void End() = 0;
  // Counts keys and bytes (outside any snapshot; may take a while on a large database).
  virtual Result<StorageStats> Stats() = 0;
  // The queue's messages and dead letters in the open snapshot (as QueueStore::QueueCounts), for
  // operators (`kvconnect migrate` warns that it leaves them behind). Internal if the backend
  // cannot count them from a reader.
  virtual Result<QueueTableCounts> QueueCounts(int64_t /*now_ms*/) {
    return Internal("this storage backend cannot count queue messages from a reader");
  }

  // The change log (change_log.h; capabilities().change_log), outside any snapshot. Appends the
  // entries with version > after_version to *out in ascending order, at most max_entries of
  // them. Internal if the backend has no change log.
  virtual Status ReadChangeLog(int64_t /*after_version*/, size_t /*max_entries*/,
                               std::vector<ChangeLogRow>* /*out*/) {
    return Internal("this storage backend has no change log");
  }
  // Counts the change-log entries with version > after_version.
  virtual Result<ChangeLogStats> ChangeLogStatsAfter(int64_t /*after_version*/) {
    return Internal("this storage backend has no change log");
  }
  // The queue's rows in the open snapshot, for copying a database whole (backup snapshots,
  // backup/snapshot_writer.h): appends the messages of the ready table (`running` false; row.ts
  // is the due time) or of the running table (row.ts is the lease deadline), each with its
  // delivery state, that come after `after` in (ts, id) order, at most `limit` of them, in that
  // order. Internal if the backend has no queue store (capabilities().queue_store).
  virtual Status ScanQueueMessages(bool /*running*/, const QueueCursor& /*after*/, size_t /*limit*/,
                                   std::vector<QueuedMessage>* /*out*/) {
    return Internal("this storage backend cannot read queue messages from a reader");
  }
  // Appends the dead letters of the open snapshot with id > `after`, by id, at most `limit`.
  // Internal if the backend has no queue store.
  virtual Status ScanDeadLetters(std::string_view /*after*/, size_t /*limit*/,
                                 std::vector<DeadLetterRow>* /*out*/) {
    return Internal("this storage backend cannot read dead letters from a reader");
  }
};

// The read-write connection. Begin() takes the write lock; Commit() makes the whole
// transaction durable (per the configured sync mode) or fails leaving nothing applied. The
// optional parts (queue store, change log) work in the same transaction.
class Writer {
 public:
  virtual ~Writer() = default;
  // Takes the write lock, opens a transaction and returns the committed data version as seen
  // under that lock.
  virtual Result<int64_t> Begin() = 0;
  // Returns the row for key, including expired rows (callers apply IsLive).
  virtual Result<std::optional<StoredRow>> Get(std::string_view key) = 0;
  virtual Status Put(std::string_view key, const StoredRow& row) = 0;
  virtual Status Delete(std::string_view key) = 0;
  virtual Status SetDataVersion(int64_t version) = 0;
  // Nested-write support: one savepoint at a time.
  virtual Status Savepoint() = 0;
  virtual Status ReleaseSavepoint() = 0;
  virtual Status RollbackToSavepoint() = 0;
  // Deletes every row with 0 <= expire_at_ms <= now_ms; returns their keys.
  virtual Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) = 0;
  // The smallest expire_at_ms >= 0 in the database, if any.
  virtual Result<std::optional<int64_t>> EarliestExpiry() = 0;
  // Errors: as above; CommitConflict only if capabilities().optimistic_conflicts. On any error
  // the transaction is gone (rolled back, or its outcome handled per on_commit_error).
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;

  // The queue tables in this writer's transaction (queue_store.h), or nullptr when the backend
  // has none (capabilities().queue_store is false). Owned by this Writer.
  virtual QueueStore* queue_store() { return nullptr; }
  // The change log in this writer's transaction (change_log_writer.h), or nullptr when the
  // backend has none (capabilities().change_log is false). Owned by this Writer.
  virtual ChangeLogWriter* change_log() { return nullptr; }
};

// An open subscription to a backend's commits; closing it (destruction) stops the callbacks:
// after the destructor returns, none runs.
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The UUID of the database (lowercase, hyphenated); created with the database.
  virtual const std::string& database_id() const = 0;
  // What this backend can do (capabilities.h); the same answer for the backend's lifetime.
  virtual BackendCapabilities capabilities() const = 0;
  // If capabilities().change_feed: calls `on_commit` with every committed transaction from now
  // on (this process's included), one at a time, in version order, on a thread of the
  // backend's (which keeps a copy of the callback). Otherwise Internal.
  using CommitCallback = std::function<void(CommitGroup)>;
  virtual Result<std::unique_ptr<ChangeFeed>> OpenChangeFeed(const CommitCallback& /*on_commit*/) {
    return Internal("this storage backend has no change feed");
  }
  // The committed data version at open time.
  virtual Result<int64_t> LoadDataVersion() = 0;
  virtual Result<std::unique_ptr<Reader>> OpenReader() = 0;
  virtual Result<std::unique_ptr<Writer>> OpenWriter() = 0;
};

}  // namespace kvc::storage
