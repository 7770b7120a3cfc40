// The snapshot writer: a database as one snapshot of any storage has it (a storage::Reader:
// SQLite, PostgreSQL, ...), written into a snapshot file (storage/snapshot_file.h: a Deno KV
// SQLite file), the form every backup target keeps. Rows are read and written a page at a time
// (memory bounded by one page), through the storage's ordinary reader, so writers of the
// database are never held up (SQLite WAL readers, PostgreSQL REPEATABLE READ snapshots) and the
// file holds exactly one committed version: every row and queue message as of it, and it as
// the file's data version. The file carries no change log: a backup's log lives in its segments.
//
// Thread-safety: a function; `reader` is used by the calling thread only.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "storage/backend.h"

namespace kvc::backup {

struct SnapshotWriteOptions {
  int32_t page_rows = 1000;  // rows (and queue messages) read and written at a time (>= 1)
};

// What WriteSnapshotFile wrote.
struct SnapshotFileInfo {
  int64_t version = 0;         // the committed data version of the snapshot (the manifest's)
  int64_t key_count = 0;       // rows in its key space (expired ones included)
  int64_t bytes = 0;           // size of the file
  int64_t queue_messages = 0;  // ready and running
  int64_t dead_letters = 0;
};

// Opens a snapshot on `reader` (Begin .. End), writes what it holds into a new snapshot file at
// `path`, seals the file (storage::SealSnapshotFile) and returns what it holds.
// REQUIRES: `reader` has no snapshot open; nothing exists at `path`. On error the caller
// removes whatever was left at `path`. Errors: the reader's (IoError, Corruption), IoError
// writing the file, Corruption (the file fails its integrity check), Internal.
Result<SnapshotFileInfo> WriteSnapshotFile(storage::Reader& reader, const std::string& path,
                                           const SnapshotWriteOptions& options);

}  // namespace kvc::backup
