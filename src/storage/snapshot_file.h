// Snapshot files: the form a database takes in a backup target, a Deno KV SQLite database file
// (the schema of storage/sqlite/sqlite_backend.h, made there and nowhere else), whatever storage
// the database lives in. Deno opens one directly; `kvconnect restore` adopts one (a SQLite
// storage takes the file over, others load its rows: FillFromSnapshotFile).
//
// backup/snapshot_writer.h writes one from any storage's Reader (CreateSnapshotFile, then the
// rows through its Writer, then SealSnapshotFile).
//
// Thread-safety: free functions; the backends they return are as thread-safe as any Backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "storage/backend.h"
#include "storage/migration.h"

namespace kvc::storage {

// Makes a new, empty snapshot file at `path` (Deno's schema, data version 0) and opens it for
// filling. Writes to it are not fsynced (a scratch file: SealSnapshotFile makes it whole).
// REQUIRES: nothing exists at `path`. Errors: IoError.
Result<std::unique_ptr<Backend>> CreateSnapshotFile(const std::string& path);

// Makes the snapshot file at `path` stand alone for shipping: its write-ahead log checkpointed
// into it (the file is all there is), checked with `PRAGMA integrity_check`, fsynced. Returns
// its size in bytes. REQUIRES: no backend of it is open any more.
// Errors: IoError, Corruption (it fails its integrity check).
Result<int64_t> SealSnapshotFile(const std::string& path);

// Copies the rows and the queue of the snapshot file at `path` (as SealSnapshotFile left it)
// into `dest`, a new database (data version 0) of any storage, `batch_rows` rows per
// transaction; `dest`'s data version ends up the file's. The file is only read.
// Errors: InvalidArgument (not a Deno KV database file), Internal (`dest` not new), IoError,
// Corruption.
Result<SnapshotRowsCopy> FillFromSnapshotFile(const std::string& path, Backend& dest,
                                              int32_t batch_rows);

}  // namespace kvc::storage
