#include "backup/restore.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include "backup/segment.h"
#include "backup/snapshot.h"
#include "codec/backup_manifest.h"
#include "common/clock.h"
#include "common/random.h"

namespace kvc::backup {
namespace fs = std::filesystem;

namespace {

std::string Describe(const RestorePoint& p) {
  if (p.version) return "version " + std::to_string(*p.version);
  if (p.time_ms) return FormatRfc3339Utc(*p.time_ms);
  return "the latest state";
}

// Picks the snapshot to start from and the segments to read after it.
Result<std::pair<SnapshotRef, std::vector<SegmentRef>>> Plan(const DatabaseBackups& b,
                                                             const RestorePoint& at) {
  if (b.snapshots.empty()) {
    return NotFound("the target has no complete snapshot of database '" + b.name + "'");
  }
  const SnapshotRef* pick = nullptr;
  if (at.version) {
    int64_t newest_head = 0;
    for (auto it = b.snapshots.rbegin(); it != b.snapshots.rend(); ++it) {
      if (it->version > *at.version) continue;
      const int64_t head = b.HeadFrom(it->version).version;
      newest_head = std::max(newest_head, head);
      if (head >= *at.version) {
        pick = &*it;
        break;
      }
    }
    if (pick == nullptr) {
      if (*at.version < b.snapshots.front().version) {
        return NotFound("no backup of '" + b.name + "' is as old as version " +
                        std::to_string(*at.version) + "; the oldest snapshot is at version " +
                        std::to_string(b.snapshots.front().version));
      }
      return InvalidArgument("version " + std::to_string(*at.version) +
                             " is after the newest backed-up commit of '" + b.name + "' (version " +
                             std::to_string(newest_head) + ")");
    }
  } else if (at.time_ms) {
    for (auto it = b.snapshots.rbegin(); it != b.snapshots.rend(); ++it) {
      if (it->time_ms <= *at.time_ms && (pick == nullptr || it->time_ms > pick->time_ms)) {
        pick = &*it;
      }
    }
    if (pick == nullptr) {
      return NotFound("no backup of '" + b.name + "' is as old as " +
                      FormatRfc3339Utc(*at.time_ms) + "; the oldest snapshot is from " +
                      FormatRfc3339Utc(b.snapshots.front().time_ms));
    }
  } else {
    int64_t best = -1;
    for (const SnapshotRef& s : b.snapshots) {  // ascending: ties go to the newer snapshot
      const int64_t head = b.HeadFrom(s.version).version;
      if (head >= best) {
        best = head;
        pick = &s;
      }
    }
  }
  return std::make_pair(*pick, b.ChainFrom(pick->version));
}

}  // namespace

Result<RestorePoint> ParseRestorePoint(const std::string& text) {
  RestorePoint p;
  if (text.empty()) return p;
  const bool all_hex = text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  const bool all_dec = text.find_first_not_of("0123456789") == std::string::npos;
  if (text.size() == 20 && all_hex) {
    uint64_t v = 0;
    for (size_t i = 0; i < 16; ++i) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
      v = (v << 4) | static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (v > static_cast<uint64_t>(INT64_MAX)) return InvalidArgument("versionstamp out of range");
    p.version = static_cast<int64_t>(v);
    return p;
  }
  if (all_dec && text.size() <= 18) {
    p.version = std::stoll(text);
    return p;
  }
  Result<int64_t> t = codec::ParseRfc3339Ms(text);
  if (!t.ok()) {
    return InvalidArgument(
        "--at takes a versionstamp (20 hex digits), a version number or an "
        "RFC 3339 time such as 2026-11-24T10:00:00Z; got '" +
        text + "'");
  }
  p.time_ms = *t;
  return p;
}

namespace {

// Fetches the snapshot `snap` (its manifest, then the file, checked against it) and makes new
// storage from it for the database `o.name` with id `o.id`.
Result<storage::DatabaseRecord> FetchSnapshot(Target& target, storage::Storage& storage,
                                              const RestoreOptions& o, const SnapshotRef& snap) {
  KVC_ASSIGN_OR_RETURN(std::string manifest_json, target.Get(snap.manifest));
  KVC_ASSIGN_OR_RETURN(codec::SnapshotManifest manifest,
                       codec::DecodeSnapshotManifest(manifest_json));
  if (manifest.version != snap.version) {
    return Corruption("snapshot manifest " + snap.manifest + " names version " +
                      std::to_string(manifest.version));
  }
  KVC_ASSIGN_OR_RETURN(std::string scratch, storage.ScratchDirectory());
  const std::string file =
      (fs::path(scratch) / ("restore-" + HexEncode(RandomBytes(8)) + ".sqlite3")).string();
  auto remove_file = [&] {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(file + suffix, ec);
  };
  Status got = target.GetFile(snap.data, file);
  if (!got.ok()) {
    remove_file();
    return got;
  }
  Result<std::string> sha = Sha256File(file);
  if (!sha.ok() || *sha != manifest.sha256) {
    remove_file();
    if (!sha.ok()) return sha.status();
    return Corruption("snapshot " + snap.data + " does not match its manifest's SHA-256");
  }
  Result<storage::DatabaseRecord> rec = storage.CreateFromSnapshot(o.name, file, o.id);
  if (!rec.ok()) remove_file();
  return rec;
}

// Applies the entries of the segment `seg` (named `name`) that follow version *cur, up to the
// point `at`, in one transaction of `writer`; sets *reached at the first entry beyond the
// point. Advances *cur and out's version, time and count.
Status ApplySegment(storage::Writer& writer, const DecodedSegment& seg, const std::string& name,
                    const RestorePoint& at, int64_t* cur, bool* reached, RestoreOutcome* out) {
  KVC_ASSIGN_OR_RETURN(int64_t base, writer.Begin());
  (void)base;
  int64_t applied = 0;
  for (const storage::LoggedCommit& e : seg.entries) {
    if (e.record.version <= *cur) continue;
    if ((at.version && e.record.version > *at.version) || (at.time_ms && e.time_ms > *at.time_ms)) {
      *reached = true;
      break;
    }
    if (e.prev_version != *cur) {
      writer.Rollback();
      return Corruption("the log does not continue version " + std::to_string(*cur) + " (segment " +
                        name + ")");
    }
    for (const storage::KeyChange& c : e.record.changes) {
      KVC_RETURN_IF_ERROR(c.row ? writer.Put(c.key, *c.row) : writer.Delete(c.key));
    }
    for (const storage::QueueRow& q : e.record.enqueues) {
      if (writer.queue_store() == nullptr) return Internal("the storage has no queue store");
      KVC_RETURN_IF_ERROR(writer.queue_store()->AddQueueMessage(q));
    }
    *cur = e.record.version;
    out->restored.time_ms = e.time_ms;
    ++applied;
  }
  if (applied == 0) {
    writer.Rollback();
    return Status::Ok();
  }
  KVC_RETURN_IF_ERROR(writer.SetDataVersion(*cur));
  KVC_RETURN_IF_ERROR(writer.Commit());
  out->entries_applied += applied;
  out->restored.version = *cur;
  return Status::Ok();
}

// Applies the log `segments` (of `backups`) to the restored snapshot out->record, up to o.at,
// then raises the version to o.floor_version, and counts the keys.
Status ApplyLog(Target& target, storage::Storage& storage, const RestoreOptions& o,
                const DatabaseBackups& backups, const std::vector<SegmentRef>& segments,
                RestoreOutcome* out) {
  KVC_ASSIGN_OR_RETURN(auto backend, storage.OpenBackend(out->record));
  {
    KVC_ASSIGN_OR_RETURN(auto writer, backend->OpenWriter());
    int64_t cur = out->snapshot.version;
    bool reached = false;
    for (const SegmentRef& ref : segments) {
      if (reached) break;
      KVC_ASSIGN_OR_RETURN(std::string bytes, target.Get(ref.name));
      KVC_ASSIGN_OR_RETURN(DecodedSegment seg, DecodeSegment(bytes));
      if (seg.prev_version != ref.prev_version || seg.last_version != ref.last_version) {
        return Corruption("log segment " + ref.name + " holds versions " +
                          std::to_string(seg.prev_version) + ".." +
                          std::to_string(seg.last_version) + ", not what its name says");
      }
      ++out->segments_read;
      KVC_RETURN_IF_ERROR(ApplySegment(*writer, seg, ref.name, o.at, &cur, &reached, out));
    }
    if (o.at.version && out->restored.version < *o.at.version && !reached &&
        backups.HeadFrom(out->snapshot.version).version < *o.at.version) {
      return Corruption("the log ends at version " + std::to_string(out->restored.version) +
                        " before the requested version");
    }
    if (o.floor_version > out->restored.version) {
      KVC_ASSIGN_OR_RETURN(int64_t base, writer->Begin());
      (void)base;
      KVC_RETURN_IF_ERROR(writer->SetDataVersion(o.floor_version));
      KVC_RETURN_IF_ERROR(writer->Commit());
    }
  }
  KVC_ASSIGN_OR_RETURN(auto reader, backend->OpenReader());
  KVC_ASSIGN_OR_RETURN(storage::StorageStats stats, reader->Stats());
  out->key_count = stats.key_count;
  return Status::Ok();
}

}  // namespace

Result<RestoreOutcome> RestoreDatabase(Target& target, storage::Storage& storage,
                                       const RestoreOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  if (o.at.version && o.at.time_ms)
    return InvalidArgument("restore to a version or a time, not both");
  KVC_ASSIGN_OR_RETURN(auto objects, target.List(o.source + "/"));
  auto index = IndexBackups(objects);
  auto found = index.find(o.source);
  if (found == index.end()) {
    return NotFound("the backup target " + target.Describe() + " has no backup of database '" +
                    o.source + "'");
  }
  KVC_ASSIGN_OR_RETURN(auto plan, Plan(found->second, o.at));
  const SnapshotRef& snap = plan.first;
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, FetchSnapshot(target, storage, o, snap));
  RestoreOutcome out;
  out.record = std::move(rec);
  out.snapshot = CommitPoint{snap.version, snap.time_ms};
  out.restored = out.snapshot;
  Status s = ApplyLog(target, storage, o, found->second, plan.second, &out);
  if (!s.ok()) {
    (void)storage.Destroy(out.record);
    return Status(s.code(),
                  "restoring '" + o.source + "' to " + Describe(o.at) + " failed: " + s.message());
  }
  out.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  return out;
}

Result<std::vector<RestorableRange>> ListRestorable(Target& target) {
  KVC_ASSIGN_OR_RETURN(auto objects, target.List(""));
  std::vector<RestorableRange> out;
  for (const auto& [name, b] : IndexBackups(objects)) {
    for (const SnapshotRef& s : b.snapshots) {
      RestorableRange r;
      r.database = name;
      r.snapshot = CommitPoint{s.version, s.time_ms};
      const auto chain = b.ChainFrom(s.version);
      r.head = chain.empty() ? r.snapshot
                             : CommitPoint{chain.back().last_version, chain.back().last_time_ms};
      r.segments = static_cast<int64_t>(chain.size());
      for (const SegmentRef& seg : chain) r.log_bytes += seg.size;
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace kvc::backup
