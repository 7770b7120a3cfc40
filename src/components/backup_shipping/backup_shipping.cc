#include "components/backup_shipping/backup_shipping.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "backup/target.h"

namespace kvc::components {

BackupShipping::BackupShipping(std::string to, backup::ContinuousBackupOptions options)
    : to_(std::move(to)), options_(std::move(options)) {}

BackupShipping::~BackupShipping() { Stop(); }

Status BackupShipping::Wire(Wiring& w) {
  KVC_ASSIGN_OR_RETURN(auto target, backup::OpenTarget(to_, backup::TargetOptions{}));
  KVC_ASSIGN_OR_RETURN(options_.scratch_dir, w.storage->ScratchDirectory());
  backup_ = std::make_unique<backup::ContinuousBackup>(std::move(target), options_);
  w.engine->change_log = true;  // every commit is logged in its own transaction
  w.engine_hooks.push_back([b = backup_.get()](const storage::DatabaseRecord& rec,
                                               const std::shared_ptr<engine::Engine>& e) {
    b->Attach(rec.name, rec.id, e);
  });
  w.collectors.push_back(this);
  w.ready_details.push_back([this] { return ReadyDetails(); });
  return Status::Ok();
}

Status BackupShipping::Start(const Started& /*started*/) {
  backup_->Start();
  spdlog::info("continuous backup to {}", backup_->target().Describe());
  return Status::Ok();
}

void BackupShipping::Stop() {
  if (backup_) backup_->Stop();  // ships what is pending; idempotent
}

std::vector<std::string> BackupShipping::ReadyDetails() const {
  std::vector<std::string> lines;
  for (const backup::BackupStatus& s : backup_->Statuses()) {
    std::string line = "backup of '" + s.database + "': shipped through version " +
                       std::to_string(s.shipped_version) + ", " + std::to_string(s.lag_entries) +
                       " commit(s) pending (oldest " + std::to_string(s.lag_ms / 1000) + " s)";
    if (!s.last_error.empty()) line += ", last error: " + s.last_error;
    lines.push_back(std::move(line));
  }
  return lines;
}

void BackupShipping::Collect(std::vector<service::ScrapedFamily>* out) const {
  CollectBackupStatuses(backup_->Statuses(), out);
}

void CollectBackupStatuses(const std::vector<backup::BackupStatus>& statuses,
                           std::vector<service::ScrapedFamily>* out) {
  using F = service::ScrapedFamily;
  F shipped =
      F::Gauge("kvconnect_backup_shipped_version", "The last version shipped to the backup target");
  F snapshot_time = F::Gauge("kvconnect_backup_last_snapshot_timestamp_seconds",
                             "When the newest snapshot in the backup target was taken (Unix time)");
  F lag_commits =
      F::Gauge("kvconnect_backup_lag_commits", "Commits not yet shipped to the backup target");
  F lag_seconds = F::Gauge("kvconnect_backup_lag_seconds",
                           "Age of the oldest commit not yet shipped (0: none pending)");
  F errors = F::Counter("kvconnect_backup_errors_total",
                        "Failed shipping attempts (each is retried with backoff)");
  F segments = F::Counter("kvconnect_backup_segments_total", "Log segments shipped");
  F bytes = F::Counter("kvconnect_backup_bytes_total", "Log bytes shipped");
  F snapshots = F::Counter("kvconnect_backup_snapshots_total", "Snapshots taken and stored");
  for (const backup::BackupStatus& s : statuses) {
    const F::Labels l = {{"database", s.database}};
    shipped.Add(static_cast<double>(s.shipped_version), l);
    if (s.last_snapshot_ms > 0) {
      snapshot_time.Add(static_cast<double>(s.last_snapshot_ms) / 1000.0, l);
    }
    lag_commits.Add(static_cast<double>(s.lag_entries), l);
    lag_seconds.Add(static_cast<double>(s.lag_ms) / 1000.0, l);
    errors.Add(static_cast<double>(s.errors), l);
    segments.Add(static_cast<double>(s.segments_shipped), l);
    bytes.Add(static_cast<double>(s.bytes_shipped), l);
    snapshots.Add(static_cast<double>(s.snapshots_taken), l);
  }
  for (F* f : {&shipped, &snapshot_time, &lag_commits, &lag_seconds, &errors, &segments, &bytes,
               &snapshots}) {
    out->push_back(std::move(*f));
  }
}

}  // namespace kvc::components
