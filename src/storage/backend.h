// Storage backend interface: the primitive, transactional operations the engine builds the KV
// semantics on (checks, sums, versionstamps and watches live in engine/, not here), so a
// PostgreSQL backend can be added later without touching the engine.
//
// Ownership: a Backend hands out Reader and Writer objects, each owning one connection; the
// caller owns them and must destroy them before the Backend.
// Thread-safety: Backend methods are thread-safe. A Reader or Writer is used by one thread at a
// time. At most one Writer may be open per database.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
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

struct QueueRow {
  int64_t ts = 0;
  std::string id;
  std::string payload;
  std::string backoff_schedule_json;
  std::string keys_if_undelivered_json;
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
  // The committed data version of the open snapshot.
  virtual Result<int64_t> DataVersion() = 0;
  virtual void End() = 0;
};

// The single read-write connection. Begin() takes the write lock; Commit() makes the whole
// transaction durable (per the configured sync mode) or fails leaving nothing applied.
class Writer {
 public:
  virtual ~Writer() = default;
  virtual Status Begin() = 0;
  // Returns the row for key, including expired rows (callers apply IsLive).
  virtual Result<std::optional<StoredRow>> Get(std::string_view key) = 0;
  virtual Status Put(std::string_view key, const StoredRow& row) = 0;
  virtual Status Delete(std::string_view key) = 0;
  virtual Status AddQueueMessage(const QueueRow& row) = 0;
  virtual Status SetDataVersion(int64_t version) = 0;
  // Nested-write support: one savepoint at a time.
  virtual Status Savepoint() = 0;
  virtual Status ReleaseSavepoint() = 0;
  virtual Status RollbackToSavepoint() = 0;
  // Deletes every row with 0 <= expire_at_ms <= now_ms; returns their keys.
  virtual Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) = 0;
  // The smallest expire_at_ms >= 0 in the database, if any.
  virtual Result<std::optional<int64_t>> EarliestExpiry() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The UUID of the database (lowercase, hyphenated); created with the database.
  virtual const std::string& database_id() const = 0;
  // The committed data version at open time.
  virtual Result<int64_t> LoadDataVersion() = 0;
  virtual Result<std::unique_ptr<Reader>> OpenReader() = 0;
  virtual Result<std::unique_ptr<Writer>> OpenWriter() = 0;
};

}  // namespace kvc::storage
