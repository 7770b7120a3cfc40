// PgStorage: the PostgreSQL kind of storage (storage.h). Every node of a deployment opens the
// same PostgreSQL (StorageOptions::location is a libpq conninfo, several hosts allowed) and sees
// the same catalog, secrets and databases; the schema (pg_schema.h) is made and migrated on open.
// A database's location is "postgres" (its rows are keyed by its id).
//
// Writers are not exclusive: any number of nodes write every database at once (the counter row
// orders them), so LockWriters claims nothing.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "storage/postgres/pg_backend.h"
#include "storage/postgres/pg_nodes.h"
#include "storage/storage.h"

namespace kvc::storage {

class PgStorage : public Storage {
 public:
  // Connects, migrates the schema and makes sure the database named "default" exists.
  // Errors: InvalidArgument (bad conninfo), IoError.
  static Result<std::unique_ptr<PgStorage>> Open(const StorageOptions& options);

  Result<std::unique_ptr<Backend>> OpenBackend(const DatabaseRecord& database) override;
  // A new counter row under a new id.
  Result<DatabaseRecord> Create(const std::string& name) override;
  // Deletes every row of the database.
  Status Destroy(const DatabaseRecord& database) override;
  std::string Location(const DatabaseRecord& database) const override;
  Result<std::string> LoadOrCreateSecret(const std::string& name,
                                         const std::function<std::string()>& make,
                                         bool* created) override;
  std::string SecretLocation(const std::string& name) const override;
  Result<std::unique_ptr<WriterLock>> LockWriters() override;
  std::string Describe() const override { return description_; }
  // A private directory under the system's temporary directory ($TMPDIR or /tmp):
  // kvconnect-<uid>, mode 0700; IoError if another user owns one of that name.
  Result<std::string> ScratchDirectory() override;
  // A new database with `id` (CreateWithId) filled with the snapshot file's rows and queue
  // (FillFromSnapshotFile); the file is removed. AlreadyExists if a database with `id` is
  // there: its rows are keyed by its id, so a restore in place is not possible here (restore
  // under another name).
  Result<DatabaseRecord> CreateFromSnapshot(const std::string& name,
                                            const std::string& snapshot_file,
                                            const std::string& id) override;

  // Creates the database's counter row under `id` (kvconnect migrate keeps ids). Errors:
  // InvalidArgument (not a UUID), AlreadyExists, IoError.
  Result<DatabaseRecord> CreateWithId(const std::string& name, const std::string& id) override;
  Result<std::optional<std::string>> ReadSecret(const std::string& name) override;

  // kvc_nodes, and the standby lag watch when reads go to a standby.
  NodeRegistry* nodes() override { return nodes_.get(); }

 private:
  PgStorage(std::unique_ptr<Catalog> catalog, StorageOptions options, std::string description);
  Status RegisterDefault();

  const StorageOptions options_;
  const std::string description_;
  // Whether readers use the standby now (set by nodes_).
  const std::shared_ptr<std::atomic<bool>> use_replica_ =
      std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<NodeRegistry> nodes_;
};

// The conninfo with any password replaced by "***", for logs and Describe().
std::string RedactConninfo(const std::string& conninfo);

}  // namespace kvc::storage
