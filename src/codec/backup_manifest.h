// The manifest of a backup snapshot (backup/layout.h): a small JSON document written next to
// the snapshot file once the file is stored, so its presence marks a complete snapshot.
//   {"format":1,"database_id":"…","database":"name","version":"123","versionstamp":"…",
//    "time_ms":…,"time":"RFC 3339","key_count":…,"bytes":…,"sha256":"hex",
//    "integrity":"ok","created_by":"kvconnect"}
// Versions are strings (they may exceed 2^53). Unknown fields are ignored on read (newer
// writers may add some).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::codec {

struct SnapshotManifest {
  std::string database_id;
  std::string database;
  int64_t version = 0;
  int64_t time_ms = 0;
  int64_t key_count = 0;
  int64_t bytes = 0;
  std::string sha256;  // lowercase hex of the snapshot file
};

std::string EncodeSnapshotManifest(const SnapshotManifest& m);
// Errors: Corruption (not JSON, a required field missing or of the wrong type, format != 1).
Result<SnapshotManifest> DecodeSnapshotManifest(std::string_view json);

// Parses RFC 3339 (the inverse of common/clock.h's FormatRfc3339Utc) ("2026-11-24T10:00:00Z",
// fractional seconds and ±hh:mm offsets allowed). Errors: InvalidArgument.
Result<int64_t> ParseRfc3339Ms(std::string_view text);

}  // namespace kvc::codec
