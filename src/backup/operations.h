// Backup operations on a storage as a whole, shared by the CLI (`kvconnect backup`, `restore`,
// `backup list`) and the admin API: an online snapshot of a database into a target, and a
// restore that puts the result in the catalog, as a new database or in place of one.
//
// Both are safe while a server runs on the same storage: the snapshot reads through a
// connection of its own (SQLite WAL readers never hold up the writer), and a restore only adds
// new storage and then changes the catalog, which a running server follows within its catalog
// poll (it then serves the restored database; open watch streams end and clients reconnect).
//
// Thread-safety: functions; storage and target are thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "backup/restore.h"
#include "backup/snapshot.h"
#include "backup/target.h"
#include "common/status.h"
#include "storage/storage.h"

namespace kvc::backup {

// A restore in place raises the data version this far above the replaced database's, so no
// versionstamp it may still issue before the server switches over is ever issued again.
inline constexpr int64_t kRestoreVersionJump = int64_t{1} << 32;

// Snapshots `database` into `target` (under its name). Errors: the storage's, the target's.
Result<SnapshotOutcome> SnapshotDatabase(storage::Storage& storage,
                                         const storage::DatabaseRecord& database, Target& target);

struct CatalogRestore {
  RestoreOutcome outcome;
  bool replaced = false;          // an existing database was replaced in place
  std::string previous_location;  // where the replaced data still is (kept, not deleted)
};

// Restores the target's backups of `source` to `at`, as the database `as` (empty: `source`).
// If a database of that name exists it is replaced in place (same id and tokens; its data
// version jumps by kRestoreVersionJump); otherwise a new database is registered. Errors: as
// RestoreDatabase; InvalidArgument for a bad name.
Result<CatalogRestore> RestoreIntoCatalog(storage::Storage& storage, Target& target,
                                          const std::string& source, const std::string& as,
                                          const RestorePoint& at);

}  // namespace kvc::backup
