// Online snapshots into a backup target: write a database at one version into a scratch
// snapshot file (snapshot_writer.h, from any storage's reader; writers are not held up), upload
// it, then its manifest (so a snapshot counts only when whole), and remove the scratch file.
//
// Thread-safety: functions; `reader` is used by the calling thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backup/snapshot_writer.h"
#include "backup/target.h"
#include "codec/backup_manifest.h"
#include "common/status.h"

namespace kvc::backup {

struct SnapshotOutcome {
  codec::SnapshotManifest manifest;
  std::string data_object;
  std::string manifest_object;
  int64_t copy_ms = 0;    // writing the snapshot file (writers run meanwhile)
  int64_t upload_ms = 0;  // storing it in the target
};

// Writes the database into the snapshot file it is given (WriteSnapshotFile, run wherever the
// caller has a reader: an engine's reader thread, or a reader of its own).
using SnapshotCopier = std::function<Result<SnapshotFileInfo>(const std::string& dest_path)>;

// Snapshots a database into `target` under the database name `db_name`: `copy` into a scratch
// file in `scratch_dir`, then the upload. The manifest's time is read after the copy, so every
// commit in the copy is older. Errors: the copy's (IoError, Corruption, Internal) or the
// target's.
Result<SnapshotOutcome> UploadSnapshot(const SnapshotCopier& copy, Target& target,
                                       const std::string& db_name, const std::string& db_id,
                                       const std::string& scratch_dir);

// Lowercase hex SHA-256 of a local file. Errors: IoError.
Result<std::string> Sha256File(const std::string& path);

}  // namespace kvc::backup
