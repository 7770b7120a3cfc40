// Restoring a database from a backup target, to its latest backed-up state or to a point in
// time: the newest snapshot at or before the point, then the log segments after it, each entry
// applied as it was committed (every key, value, versionstamp, expiry and enqueued message),
// up to the point. Every object is checked before use (the snapshot's SHA-256 against its
// manifest, each segment's checksums and the continuity of versions), so nothing half-shipped
// or altered is ever applied.
//
// The result is new storage for a database (Storage::CreateFromSnapshot) that the caller adds
// to the catalog, or binds an existing database name to (restore in place). On error the new
// storage is removed again.
//
// Thread-safety: functions; the target and storage must be thread-safe (they are).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backup/layout.h"
#include "backup/target.h"
#include "common/status.h"
#include "storage/storage.h"

namespace kvc::backup {

// Where to restore to. At most one is set; neither: the latest backed-up state.
struct RestorePoint {
  std::optional<int64_t> version;  // the state after the last commit with version <= this
  std::optional<int64_t> time_ms;  // the state after the last commit at or before this time
};

// Parses what an operator types after --at: a versionstamp (20 hex digits; its first 16 are
// the version), a version in decimal, or an RFC 3339 time. Errors: InvalidArgument.
Result<RestorePoint> ParseRestorePoint(const std::string& text);

struct RestoreOptions {
  std::string source;  // the database's name in the target
  RestorePoint at;
  std::string name;  // the restored database's name (for the returned record)
  std::string id;    // the id it carries
  // The restored database's data version is raised to at least this (not its keys'
  // versionstamps): a restore in place passes one above every version the replaced database
  // may have issued, so versionstamps never repeat.
  int64_t floor_version = 0;
};

struct RestoreOutcome {
  storage::DatabaseRecord record;  // the new storage, not in the catalog yet
  // The restored state: after the commit of this version, at that commit's time (the
  // snapshot's time if no entry applied).
  CommitPoint restored;
  CommitPoint snapshot;  // the snapshot it started from
  int64_t entries_applied = 0;
  int64_t segments_read = 0;
  int64_t key_count = 0;
  int64_t elapsed_ms = 0;
};

// Errors: NotFound (no backup of `source`, or none reaches the point), InvalidArgument (a
// point beyond the newest backed-up commit), Corruption (an object fails its checks), the
// target's and the storage's errors.
Result<RestoreOutcome> RestoreDatabase(Target& target, storage::Storage& storage,
                                       const RestoreOptions& options);

// What a target can restore, per database: each snapshot and how far the log continues it.
struct RestorableRange {
  std::string database;
  CommitPoint snapshot;
  CommitPoint head;  // the latest state restorable from this snapshot
  int64_t segments = 0;
  int64_t log_bytes = 0;
};
Result<std::vector<RestorableRange>> ListRestorable(Target& target);

}  // namespace kvc::backup
