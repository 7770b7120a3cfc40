#include "backup/continuous_backup.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <utility>

#include "backup/layout.h"
#include "backup/segment.h"
#include "backup/snapshot.h"
#include "codec/backup_manifest.h"
#include "common/clock.h"

namespace kvc::backup {
namespace {

// Runs `fn` on one of `engine`'s reader threads and waits for it.
template <typename T>
Result<T> OnReader(engine::Engine& engine, const std::function<Result<T>(storage::Reader&)>& fn) {
  std::promise<Result<T>> done;
  auto future = done.get_future();
  engine.WithReader([&](storage::Reader* r, const Status& refused) {
    if (r == nullptr) {
      done.set_value(refused);
    } else {
      done.set_value(fn(*r));
    }
  });
  return future.get();
}

// Checks the last segment of the chain of each snapshot in `snapshots` (each segment once). A
// damaged one, which a crash leaves on a target without atomic uploads, is deleted from the
// target and from *live so that its entries are shipped again. Fills *heads with each chain's
// head version -> its time.
Status VerifyChainEnds(Target& target, const std::vector<SnapshotRef>& snapshots,
                       DatabaseBackups* live, std::map<int64_t, int64_t>* heads) {
  std::set<std::string> verified;
  for (const SnapshotRef& snap : snapshots) {
    for (;;) {
      const std::vector<SegmentRef> c = live->ChainFrom(snap.version);
      const int64_t h = c.empty() ? snap.version : c.back().last_version;
      bool good = c.empty() || verified.count(c.back().name) > 0;
      if (!good) {
        auto bytes = target.Get(c.back().name);
        if (!bytes.ok()) return bytes.status();
        auto seg = DecodeSegment(*bytes);
        good = seg.ok() && seg->prev_version == c.back().prev_version &&
               seg->last_version == c.back().last_version;
        if (!good) {
          spdlog::warn("backup: segment {} is damaged ({}); shipping its entries again",
                       c.back().name, seg.ok() ? "bounds differ" : seg.status().message());
          KVC_RETURN_IF_ERROR(target.Delete(c.back().name));
          const std::string bad = c.back().name;
          live->segments.erase(std::remove_if(live->segments.begin(), live->segments.end(),
                                              [&](const SegmentRef& r) { return r.name == bad; }),
                               live->segments.end());
          continue;
        }
        verified.insert(c.back().name);
      }
      heads->emplace(h, c.empty() ? snap.time_ms : c.back().last_time_ms);
      break;
    }
  }
  return Status::Ok();
}

// Whether `engine`'s change log still holds the entry that follows `version`.
Result<bool> LogContinues(engine::Engine& engine, int64_t version) {
  KVC_ASSIGN_OR_RETURN(
      std::vector<storage::ChangeLogRow> next,
      OnReader<std::vector<storage::ChangeLogRow>>(
          engine, [version](storage::Reader& r) -> Result<std::vector<storage::ChangeLogRow>> {
            std::vector<storage::ChangeLogRow> out;
            KVC_RETURN_IF_ERROR(r.ReadChangeLog(version, 1, &out));
            return out;
          }));
  return !next.empty() && next.front().prev_version == version;
}

}  // namespace

ContinuousBackup::ContinuousBackup(std::unique_ptr<Target> target, ContinuousBackupOptions options)
    : target_(std::move(target)), options_(std::move(options)) {}

ContinuousBackup::~ContinuousBackup() {
  try {
    Stop();
  } catch (...) {  // logging may throw (formatting, allocation); a destructor must not
  }
}

void ContinuousBackup::Start() {
  worker_.Start("kvc-backup", [this] { Loop(); });
}

void ContinuousBackup::Stop() {
  if (!worker_.Stop(mu_, cv_)) return;
  if (!options_.ship_on_stop) return;
  // One last round: what was committed before the stop gets shipped if the target answers.
  Status s = Round();
  if (!s.ok()) spdlog::warn("backup: the last shipment before stopping failed: {}", s.message());
}

void ContinuousBackup::Attach(const std::string& name, const std::string& id,
                              const std::shared_ptr<engine::Engine>& engine) {
  auto db = std::make_shared<Db>();
  db->name = name;
  db->id = id;
  db->engine = engine;
  {
    MutexLock status_lock(db->status_mu);  // not shared yet, but the analysis wants the lock
    db->status.database = name;
    db->status.database_id = id;
  }
  {
    MutexLock lock(mu_);
    dbs_[id] = std::move(db);
    kick_ = true;
  }
  cv_.NotifyAll();
}

Status ContinuousBackup::ShipNow() {
  return Round(/*force=*/true);  // waits for a round of the loop that is running
}

std::vector<BackupStatus> ContinuousBackup::Statuses() const {
  std::vector<BackupStatus> out;
  MutexLock lock(mu_);
  for (const auto& [id, db] : dbs_) {
    (void)id;
    MutexLock status_lock(db->status_mu);
    out.push_back(db->status);
  }
  return out;
}

void ContinuousBackup::Loop() {
  MutexLock lock(mu_);
  while (!worker_.stop_requested()) {
    lock.Unlock();
    (void)Round();
    lock.Lock();
    if (worker_.stop_requested()) break;
    if (!kick_) cv_.WaitFor(mu_, std::chrono::milliseconds(options_.interval_ms));
    kick_ = false;
  }
}

Status ContinuousBackup::Round(bool force) {
  MutexLock round(round_mu_);
  std::vector<std::shared_ptr<Db>> dbs;
  {
    MutexLock lock(mu_);
    for (auto it = dbs_.begin(); it != dbs_.end();) {
      auto engine = it->second->engine.lock();
      if (!engine || engine->retired()) {
        it = dbs_.erase(it);  // deleted or replaced: its successor is attached on its own
      } else {
        dbs.push_back(it->second);
        ++it;
      }
    }
  }
  Status first;
  for (const auto& db : dbs) {
    auto engine = db->engine.lock();
    if (!engine || engine->retired()) continue;
    const int64_t now = NowUnixMs();
    if (!force && now < db->next_attempt_ms) continue;
    Status s = ShipOne(*db, engine);
    RefreshLag(*db, engine);
    MutexLock status_lock(db->status_mu);
    if (s.ok()) {
      db->backoff_ms = 0;
      db->status.last_error.clear();
    } else {
      ++db->status.errors;
      db->status.last_error = s.message();
      db->backoff_ms =
          std::min(options_.retry_max_ms, std::max(options_.retry_initial_ms, db->backoff_ms * 2));
      db->next_attempt_ms = now + db->backoff_ms;
      spdlog::warn("backup of '{}' to {} failed (retrying in {} ms): {}", db->name,
                   target_->Describe(), db->backoff_ms, s.message());
      if (first.ok()) first = s;
    }
  }
  return first;
}

Status ContinuousBackup::Initialize(Db& db, const std::shared_ptr<engine::Engine>& engine) {
  KVC_ASSIGN_OR_RETURN(auto objects, target_->List(db.name + "/"));
  auto index = IndexBackups(objects);
  const DatabaseBackups& b = index[db.name];
  for (const std::string& name : b.incomplete) {  // a snapshot whose upload was cut short
    KVC_RETURN_IF_ERROR(target_->Delete(name));
  }
  if (b.snapshots.empty()) {
    db.need_snapshot = true;
    db.shipped = -1;
    db.initialized = true;
    return Status::Ok();
  }
  const SnapshotRef& newest = b.snapshots.back();
  KVC_ASSIGN_OR_RETURN(std::string manifest_json, target_->Get(newest.manifest));
  KVC_ASSIGN_OR_RETURN(codec::SnapshotManifest manifest,
                       codec::DecodeSnapshotManifest(manifest_json));
  if (manifest.database_id != db.id) {
    return InvalidArgument("the backups of '" + db.name + "' in " + target_->Describe() +
                           " belong to another database (id " + manifest.database_id +
                           "); move them away or back up to another target");
  }
  // Every retained snapshot's log must reach the present, so a point-in-time restore can start
  // from any of them. A crash may have left a damaged segment at the end of a chain (a target
  // without atomic uploads), or the chain of an older snapshot stopping short of a newer one.
  // The last segment of each chain is checked (a damaged one is deleted and its entries shipped
  // again), and shipping resumes from the lowest head; if the change log no longer holds what
  // follows it, the gap starts a new snapshot.
  DatabaseBackups live = b;
  std::map<int64_t, int64_t> heads;  // chain head -> its time
  KVC_RETURN_IF_ERROR(VerifyChainEnds(*target_, b.snapshots, &live, &heads));
  const std::vector<SegmentRef> chain = live.ChainFrom(newest.version);
  int64_t head = chain.empty() ? newest.version : chain.back().last_version;
  int64_t head_time_ms = chain.empty() ? newest.time_ms : chain.back().last_time_ms;
  // The lowest head below it that the change log still continues (a hole a crash left); a
  // head the log cannot continue is a permanent gap, not filled on every start.
  for (const auto& [h, t] : heads) {
    if (h >= head) break;
    KVC_ASSIGN_OR_RETURN(const bool continues, LogContinues(*engine, h));
    if (continues) {
      spdlog::info(
          "backup: the log of an older snapshot of '{}' stops at version {}; shipping "
          "again from there",
          db.name, h);
      head = h;
      head_time_ms = t;
      break;
    }
  }
  if (head > engine->committed_version()) {
    return InvalidArgument(
        "the backups of '" + db.name + "' in " + target_->Describe() + " reach version " +
        std::to_string(head) + ", beyond the database's " +
        std::to_string(engine->committed_version()) +
        " (it was replaced outside kvconnect); move them away or back up to another "
        "target");
  }
  db.shipped = head;
  db.log_bytes_since_snapshot = 0;
  for (const SegmentRef& s : chain) db.log_bytes_since_snapshot += s.size;
  {
    MutexLock status_lock(db.status_mu);
    db.status.shipped_version = head;
    db.status.shipped_time_ms = head_time_ms;
    db.status.last_snapshot_version = newest.version;
    db.status.last_snapshot_ms = newest.time_ms;
  }
  db.initialized = true;
  return Status::Ok();
}

Status ContinuousBackup::Snapshot(Db& db, const std::shared_ptr<engine::Engine>& engine, bool gap) {
  const SnapshotCopier copy = [&](const std::string& dest) {
    return OnReader<SnapshotFileInfo>(*engine, [&](storage::Reader& r) {
      return WriteSnapshotFile(r, dest, SnapshotWriteOptions{options_.snapshot_page_rows});
    });
  };
  KVC_ASSIGN_OR_RETURN(SnapshotOutcome out,
                       UploadSnapshot(copy, *target_, db.name, db.id, options_.scratch_dir));
  spdlog::info(
      "backup: snapshot of '{}' at version {} ({} keys, {} bytes; copy {} ms, upload {} ms)",
      db.name, out.manifest.version, out.manifest.key_count, out.manifest.bytes, out.copy_ms,
      out.upload_ms);
  db.need_snapshot = false;
  db.log_bytes_since_snapshot = 0;
  db.next_retention_ms = 0;  // an older generation may have left the window
  if (gap || db.shipped < 0) {
    if (out.manifest.version <= db.shipped) {
      return InvalidArgument("database '" + db.name + "' is at version " +
                             std::to_string(out.manifest.version) + ", behind its backup's " +
                             std::to_string(db.shipped) +
                             " (it was replaced outside kvconnect); move the backups away or "
                             "back up to another target");
    }
    db.shipped = out.manifest.version;
    engine->PruneChangeLogThrough(db.shipped);
  }
  MutexLock status_lock(db.status_mu);
  if (gap || db.status.shipped_version < out.manifest.version) {
    db.status.shipped_version = std::max(db.status.shipped_version, db.shipped);
    db.status.shipped_time_ms = out.manifest.time_ms;
  }
  db.status.last_snapshot_version = out.manifest.version;
  db.status.last_snapshot_ms = out.manifest.time_ms;
  ++db.status.snapshots_taken;
  return Status::Ok();
}

Status ContinuousBackup::ShipOne(Db& db, const std::shared_ptr<engine::Engine>& engine) {
  if (!db.initialized) KVC_RETURN_IF_ERROR(Initialize(db, engine));
  if (db.need_snapshot) KVC_RETURN_IF_ERROR(Snapshot(db, engine, /*gap=*/true));
  for (;;) {
    const int64_t committed = engine->committed_version();
    const int64_t after = db.shipped;
    const size_t max = options_.max_segment_entries;
    KVC_ASSIGN_OR_RETURN(
        std::vector<storage::ChangeLogRow> rows,
        OnReader<std::vector<storage::ChangeLogRow>>(
            *engine, [&](storage::Reader& r) -> Result<std::vector<storage::ChangeLogRow>> {
              std::vector<storage::ChangeLogRow> out;
              KVC_RETURN_IF_ERROR(r.ReadChangeLog(after, max, &out));
              return out;
            }));
    const bool gap =
        rows.empty() ? committed > db.shipped : rows.front().prev_version != db.shipped;
    if (gap) {
      spdlog::info(
          "backup: the change log of '{}' does not continue version {}; starting a new "
          "snapshot",
          db.name, db.shipped);
      KVC_RETURN_IF_ERROR(Snapshot(db, engine, /*gap=*/true));
      continue;
    }
    if (rows.empty()) break;
    const std::string bytes = EncodeSegment(rows);
    const std::string name =
        SegmentObjectName(db.name, rows.front().prev_version, rows.back().version,
                          rows.front().time_ms, rows.back().time_ms);
    KVC_RETURN_IF_ERROR(target_->Put(name, bytes));
    db.shipped = rows.back().version;
    engine->PruneChangeLogThrough(db.shipped);
    db.log_bytes_since_snapshot += static_cast<int64_t>(bytes.size());
    {
      MutexLock status_lock(db.status_mu);
      db.status.shipped_version = db.shipped;
      db.status.shipped_time_ms = rows.back().time_ms;
      ++db.status.segments_shipped;
      db.status.bytes_shipped += bytes.size();
    }
    if (rows.size() < max) break;
  }
  const int64_t now = NowUnixMs();
  int64_t last_snapshot_ms;
  {
    MutexLock status_lock(db.status_mu);
    last_snapshot_ms = db.status.last_snapshot_ms;
  }
  if ((now - last_snapshot_ms >= options_.snapshot_interval_ms ||
       db.log_bytes_since_snapshot >= options_.snapshot_after_log_bytes) &&
      db.log_bytes_since_snapshot > 0) {
    KVC_RETURN_IF_ERROR(Snapshot(db, engine, /*gap=*/false));
  }
  if (now >= db.next_retention_ms) {
    KVC_RETURN_IF_ERROR(ApplyRetention(db));
    db.next_retention_ms = now + std::clamp<int64_t>(options_.retention_ms / 10, 1000, 3600000);
  }
  return Status::Ok();
}

Status ContinuousBackup::ApplyRetention(Db& db) {
  KVC_ASSIGN_OR_RETURN(auto objects, target_->List(db.name + "/"));
  auto index = IndexBackups(objects);
  const DatabaseBackups& b = index[db.name];
  if (b.snapshots.size() < 2) return Status::Ok();
  const int64_t cutoff = NowUnixMs() - options_.retention_ms;
  // Keep every snapshot newer than the cutoff and the newest one older than it (it is what a
  // restore to a time just inside the window starts from); delete the rest.
  size_t first_kept = 0;
  for (size_t i = 0; i < b.snapshots.size(); ++i) {
    if (b.snapshots[i].time_ms <= cutoff) first_kept = i;
  }
  first_kept = std::min(first_kept, b.snapshots.size() - 1);
  const int64_t oldest_kept_version = b.snapshots[first_kept].version;
  for (size_t i = 0; i < first_kept; ++i) {
    // The manifest first: without it the file no longer counts as a snapshot.
    KVC_RETURN_IF_ERROR(target_->Delete(b.snapshots[i].manifest));
    KVC_RETURN_IF_ERROR(target_->Delete(b.snapshots[i].data));
  }
  for (const SegmentRef& s : b.segments) {
    if (s.last_version <= oldest_kept_version) KVC_RETURN_IF_ERROR(target_->Delete(s.name));
  }
  return Status::Ok();
}

void ContinuousBackup::RefreshLag(Db& db, const std::shared_ptr<engine::Engine>& engine) {
  const int64_t after = std::max<int64_t>(db.shipped, 0);
  auto stats = OnReader<storage::ChangeLogStats>(
      *engine, [&](storage::Reader& r) { return r.ChangeLogStatsAfter(after); });
  if (!stats.ok()) return;
  MutexLock status_lock(db.status_mu);
  db.status.lag_entries = stats->entries;
  db.status.lag_ms =
      stats->entries > 0 ? std::max<int64_t>(0, NowUnixMs() - stats->oldest_time_ms) : 0;
}

}  // namespace kvc::backup
