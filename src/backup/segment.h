// Log segments: a run of consecutive change-log entries (storage/change_log.h) shipped as one
// object. Each entry carries its own CRC-32C, and a trailer repeats the run's bounds and
// checks everything before it, so a truncated or altered object is refused whole: a restore
// never applies part of a segment.
//
// Layout (do not change; add a new magic instead). Integers little-endian.
//   "KVCLOG01"
//   per entry: u32 length | u32 crc32c(entry) | entry (EncodeLoggedCommit)
//   "KVCEND01" | u32 count | i64 prev_version | i64 last_version | u32 crc32c(all before
//   "KVCEND01")
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/change_log.h"

namespace kvc::backup {

// REQUIRES: rows is non-empty and consecutive (each prev_version is the previous version).
std::string EncodeSegment(const std::vector<storage::ChangeLogRow>& rows);

struct DecodedSegment {
  int64_t prev_version = 0;  // the version before the first entry
  int64_t last_version = 0;
  std::vector<storage::LoggedCommit> entries;  // at least one, consecutive
};

// Errors: Corruption if `bytes` is not one whole, intact segment of consecutive entries.
Result<DecodedSegment> DecodeSegment(std::string_view bytes);

}  // namespace kvc::backup
