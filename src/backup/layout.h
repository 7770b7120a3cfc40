// Where a backup target keeps what: object names, and an index of a target's listing.
//
//   <database>/snapshots/<version:016x>-<time_ms:013d>.sqlite3  a snapshot (SQLite file)
//   <database>/snapshots/<version:016x>-<time_ms:013d>.json     its manifest; written after the
//                                                               file, so a snapshot counts only
//                                                               once its manifest exists
//   <database>/log/<prev:016x>-<last:016x>-<first_ms:013d>-<last_ms:013d>.kvlog
//                                                               a log segment (segment.h): the
//                                                               entries after version `prev`
//                                                               through `last`
// Versions are the database's data versions (the first 8 bytes of a versionstamp). Names carry
// the bounds so a listing alone tells what can be restored. Do not change.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backup/target.h"

namespace kvc::backup {

std::string SnapshotDataName(const std::string& db, int64_t version, int64_t time_ms);
std::string SnapshotManifestName(const std::string& db, int64_t version, int64_t time_ms);
std::string SegmentObjectName(const std::string& db, int64_t prev_version, int64_t last_version,
                              int64_t first_time_ms, int64_t last_time_ms);

// A committed state: its last commit's version and that commit's time.
struct CommitPoint {
  int64_t version = 0;
  int64_t time_ms = 0;
};

struct SnapshotRef {
  int64_t version = 0;
  int64_t time_ms = 0;  // when it was taken
  std::string data;     // object names
  std::string manifest;
};

struct SegmentRef {
  int64_t prev_version = 0;
  int64_t last_version = 0;
  int64_t first_time_ms = 0;
  int64_t last_time_ms = 0;
  std::string name;
  int64_t size = 0;
};

// One database's backups in a target.
struct DatabaseBackups {
  std::string name;
  std::vector<SnapshotRef> snapshots;   // complete ones (manifest present), ascending version
  std::vector<SegmentRef> segments;     // ascending prev_version, then last_version
  std::vector<std::string> incomplete;  // snapshot files without a manifest (to clean up)

  // The segments that continue from `version`, in order, as far as they reach without a gap:
  // the first covers the entry after `version` (its prev_version <= version < last_version).
  std::vector<SegmentRef> ChainFrom(int64_t version) const;
  // The last commit reachable from `version` through the log; `version` itself (time -1) when
  // no segment continues it.
  CommitPoint HeadFrom(int64_t version) const;
};

// Indexes a listing of a whole target by database name (other objects are ignored).
std::map<std::string, DatabaseBackups> IndexBackups(const std::vector<ObjectInfo>& objects);

}  // namespace kvc::backup
