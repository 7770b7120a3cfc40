// What a restore reads back from a backup target, on untrusted bytes: log segments (and the
// change-log entries inside), snapshot manifests and RFC 3339 times. A segment that decodes
// must re-encode to the same bytes, and each entry must re-encode to its own bytes.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backup/segment.h"
#include "codec/backup_manifest.h"
#include "storage/change_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::DecodeSnapshotManifest(in);
  (void)kvc::codec::ParseRfc3339Ms(in);
  auto entry = kvc::storage::DecodeLoggedCommit(in);
  if (entry.ok()) {
    const std::string again =
        kvc::storage::EncodeLoggedCommit(entry->record, entry->prev_version, entry->time_ms);
    if (again != in) std::abort();
  }
  auto seg = kvc::backup::DecodeSegment(in);
  if (!seg.ok()) return 0;
  std::vector<kvc::storage::ChangeLogRow> rows;
  for (const auto& e : seg->entries) {
    rows.push_back({e.record.version, e.prev_version, e.time_ms,
                    kvc::storage::EncodeLoggedCommit(e.record, e.prev_version, e.time_ms)});
  }
  if (kvc::backup::EncodeSegment(rows) != in) std::abort();
  return 0;
}
