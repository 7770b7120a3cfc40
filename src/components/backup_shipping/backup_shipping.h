// BackupShipping: continuous backup (`serve --backup-to`) as a component (components/component.h)
// around backup::ContinuousBackup (backup/continuous_backup.h, the design): every database's
// engine runs with a change log and is attached to the shipper as it opens; the shipper's
// per-database state is the kvconnect_backup_* metrics and a /readyz detail line per database.
//
// Wire opens the target (a directory or s3://bucket/prefix) and the storage's scratch directory;
// Start starts shipping; Stop ships what is pending (while the engines still run) and stops.
//
// Ownership: owns the ContinuousBackup (and through it the target and its thread).
// Thread-safety: Wire/Start/Stop from the application's thread; Collect, ReadyDetails and the
// engine hook are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backup/continuous_backup.h"
#include "components/component.h"

namespace kvc::components {

class BackupShipping : public Component, public service::MetricsCollector {
 public:
  // `to`: the target as the operator gave it.
  BackupShipping(std::string to, backup::ContinuousBackupOptions options);
  ~BackupShipping() override;

  const char* name() const override { return "backup shipping"; }
  // Errors: the target's (InvalidArgument for a malformed one, IoError), the scratch
  // directory's.
  Status Wire(Wiring& wiring) override;
  Status Start(const Started& started) override;
  void Stop() override;

  // kvconnect_backup_* per database.
  void Collect(std::vector<service::ScrapedFamily>* out) const override;
  // One line per database: what is shipped, what is pending, the last error.
  std::vector<std::string> ReadyDetails() const;

  // REQUIRES: Wire succeeded.
  const backup::ContinuousBackup& shipper() const { return *backup_; }

 private:
  const std::string to_;
  backup::ContinuousBackupOptions options_;
  std::unique_ptr<backup::ContinuousBackup> backup_;  // made by Wire
};

// The kvconnect_backup_* families of `statuses` (one sample per database each).
void CollectBackupStatuses(const std::vector<backup::BackupStatus>& statuses,
                           std::vector<service::ScrapedFamily>* out);

}  // namespace kvc::components
