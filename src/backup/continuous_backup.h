// ContinuousBackup: ships every served database's change log to a backup target, with
// periodic snapshots, so any acknowledged commit can be restored (restore.h).
//
// Per database (attached as its engine opens; engines run with EngineOptions::change_log):
//  - On attach, the target's listing tells how far the database is shipped: the end of the log
//    chain that continues its newest snapshot. The newest segment is downloaded and checked; a
//    damaged one (e.g. half-written by a target that lost power) is deleted and shipped again.
//  - Every `interval_ms` (sooner after a full segment), the entries after the shipped version
//    are read from the change log on an engine reader thread and stored as one segment; only
//    then may the engine prune them (in its next commit's transaction). A kill -9 at any point
//    therefore loses nothing: on restart the same entries are read again and the shipped
//    version is recomputed from the target, so no segment is skipped or stored twice.
//  - A snapshot starts the database's backup (none in the target yet), ends a gap (the log does
//    not continue the shipped version: the change log was off, or the database was replaced),
//    and is taken every `snapshot_interval_ms` or after `snapshot_after_log_bytes` of log, so a
//    restore never replays more than that.
//  - Failures (target refusing, slow, unreachable) are retried with exponential backoff from
//    `retry_initial_ms` to `retry_max_ms`; the lag (entries and age of the oldest unshipped
//    one) and the errors are reported by Statuses() for metrics and /readyz.
//  - Retention: snapshots older than `retention_ms` are deleted (never the newest), then the
//    segments only they needed.
//
// Ownership: owns its target and thread; holds engines weakly.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backup/target.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/worker_thread.h"
#include "engine/engine.h"

namespace kvc::backup {

struct ContinuousBackupOptions {
  int64_t interval_ms = 1000;                         // --backup-interval
  int64_t snapshot_interval_ms = 24LL * 3600 * 1000;  // --backup-snapshot-interval
  int64_t snapshot_after_log_bytes = 256LL << 20;     // --backup-snapshot-log-bytes
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;      // --backup-retention
  size_t max_segment_entries = 10000;
  int64_t retry_initial_ms = 1000;
  int64_t retry_max_ms = 60000;
  std::string scratch_dir;            // where snapshot files are staged (the storage's scratch dir)
  int32_t snapshot_page_rows = 1000;  // rows a snapshot reads and writes at a time
  bool ship_on_stop = true;  // Stop() ships what is pending (tests turn it off to mimic kill -9)
};

// One database's shipping state, for metrics and /readyz.
struct BackupStatus {
  std::string database;
  std::string database_id;
  int64_t shipped_version = -1;  // -1: nothing shipped yet
  int64_t shipped_time_ms = 0;   // commit time of the last shipped entry
  int64_t last_snapshot_version = -1;
  int64_t last_snapshot_ms = 0;   // when the newest snapshot was taken; 0: none
  int64_t lag_entries = 0;        // committed, not yet shipped
  int64_t lag_ms = 0;             // age of the oldest unshipped commit
  uint64_t segments_shipped = 0;  // by this process
  uint64_t bytes_shipped = 0;
  uint64_t snapshots_taken = 0;
  uint64_t errors = 0;     // failed attempts (each retried)
  std::string last_error;  // empty after a success
};

class ContinuousBackup {
 public:
  ContinuousBackup(std::unique_ptr<Target> target, ContinuousBackupOptions options);
  ~ContinuousBackup();  // Stop()

  void Start();
  // Ships what is pending one last time (bounded by the target's timeouts), then stops.
  void Stop();

  // Starts backing up `engine` as database `name`. A database attached again (a new engine
  // after a restore in place) replaces the old attachment.
  void Attach(const std::string& name, const std::string& id,
              const std::shared_ptr<engine::Engine>& engine);
  // Ships now (and waits for that round): for tests and the admin API. Errors: the last
  // failure of the round, if any database failed.
  Status ShipNow();

  std::vector<BackupStatus> Statuses() const;
  const Target& target() const { return *target_; }

 private:
  struct Db {
    std::string name;
    std::string id;
    std::weak_ptr<engine::Engine> engine;
    bool initialized = false;
    bool need_snapshot = false;
    int64_t shipped = -1;
    int64_t log_bytes_since_snapshot = 0;
    int64_t next_attempt_ms = 0;
    int64_t backoff_ms = 0;
    int64_t next_retention_ms = 0;
    Mutex status_mu;  // the status is read by Statuses() on other threads
    BackupStatus status KVC_GUARDED_BY(status_mu);
  };

  void Loop();
  // One round over every database (`force`: also those waiting out a retry backoff). Returns
  // the first failure.
  Status Round(bool force = false) KVC_EXCLUDES(mu_, round_mu_);
  // Ships what is pending for one database (several segments if needed).
  Status ShipOne(Db& db, const std::shared_ptr<engine::Engine>& engine);
  Status Initialize(Db& db, const std::shared_ptr<engine::Engine>& engine);
  // Takes a snapshot; `gap`: the log does not continue what was shipped, so shipping restarts
  // from the snapshot's version.
  Status Snapshot(Db& db, const std::shared_ptr<engine::Engine>& engine, bool gap);
  Status ApplyRetention(Db& db);
  void RefreshLag(Db& db, const std::shared_ptr<engine::Engine>& engine);

  const std::unique_ptr<Target> target_;
  const ContinuousBackupOptions options_;

  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::shared_ptr<Db>> dbs_ KVC_GUARDED_BY(mu_);  // by database id
  bool kick_ KVC_GUARDED_BY(mu_) = false;
  // Serializes rounds (the loop's and ShipNow's).
  Mutex round_mu_;
  WorkerThread worker_;
};

}  // namespace kvc::backup
