// The change log: every commit of a database, recorded in the same storage transaction as the
// commit itself (so the log can neither miss nor invent one), until a continuous backup has
// shipped it (backup/) and pruned it. Each entry is one CommitRecord with the committed version
// before it (`prev_version`), so a reader can prove a run of entries has no gap: each entry's
// prev_version is the version of the one before it.
//
// The encoded form below is stored in the backend's log table and inside backup log segments,
// possibly for years and read back from untrusted places: do not change it; add a new format
// byte instead. All integers little-endian.
//   u8 format (1) | i64 version | i64 prev_version | i64 time_ms
//   u32 n_changes, each: u32 key_len, key | u8 has_row, and if 1:
//       u8 encoding | i64 row_version | i64 expire_at_ms | u32 value_len, value
//   u32 n_enqueues, each: i64 ts | u32 id_len, id | u32 payload_len, payload |
//       u32 n_backoff, u32 each | u32 n_keys, each u32 key_len, key
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/commit_record.h"

namespace kvc::storage {

// One entry of the change log, as the backend stores it.
struct ChangeLogRow {
  int64_t version = 0;       // the record's version
  int64_t prev_version = 0;  // the committed version just before it
  int64_t time_ms = 0;       // when it committed (Unix ms)
  std::string bytes;         // EncodeLoggedCommit of the record
};

// A decoded entry.
struct LoggedCommit {
  int64_t prev_version = 0;
  int64_t time_ms = 0;
  CommitRecord record;
};

std::string EncodeLoggedCommit(const CommitRecord& record, int64_t prev_version, int64_t time_ms);
// Errors: Corruption if `bytes` is not exactly one encoded entry (bad format byte, truncated,
// trailing bytes, unknown value encoding, versions out of order).
Result<LoggedCommit> DecodeLoggedCommit(std::string_view bytes);

// Sizes of a backend's change log (for metrics and shipping decisions).
struct ChangeLogStats {
  int64_t entries = 0;
  int64_t oldest_version = 0;  // 0 when empty
  int64_t newest_version = 0;  // 0 when empty
  int64_t oldest_time_ms = 0;  // 0 when empty
};

}  // namespace kvc::storage
