// The data directory shared by `serve` and the `db` / `token` subcommands:
//   catalog.sqlite3       databases and access tokens (storage::SqliteCatalog)
//   default.sqlite3       the database named "default" (created on first use)
//   db-<hex>.sqlite3      databases made with `kvconnect db create`
//   access-token          the bootstrap access token of `serve` (mode 0600)
//   server-secret         the key that signs data-path tokens (mode 0600)
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/admin_ops.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/sqlite/sqlite_catalog.h"

namespace kvc::cli {

inline constexpr const char* kDefaultDatabase = service::kDefaultDatabase;

// Reads a secret file, or creates it with `make()` and mode 0600 (fsynced).
Result<std::string> LoadOrCreateSecret(const std::filesystem::path& path,
                                       const std::function<std::string()>& make, bool* created);

struct DataDir {
  std::filesystem::path root;
  std::unique_ptr<storage::SqliteCatalog> catalog;

  // A catalog path (relative to the data directory, or absolute) as a file path.
  std::string Resolve(const std::string& path) const;
};

// Creates the directory (mode 0700) and the catalog if needed, and makes sure the database
// named "default" exists (adopting a default.sqlite3 made before the catalog existed).
Result<DataDir> OpenDataDir(const std::string& dir, const storage::SqliteOptions& sqlite);

// The storage of databases in a data directory: one SQLite file each, db-<hex>.sqlite3.
// Ownership: borrows the DataDir. Thread-safety: thread-safe (each call opens its own files).
class SqliteProvisioner : public service::DatabaseProvisioner {
 public:
  SqliteProvisioner(const DataDir* dd, storage::SqliteOptions sqlite) : dd_(dd), sqlite_(sqlite) {}
  // A new file carrying a new database id. Errors: Internal.
  Result<storage::DatabaseRecord> Create(const std::string& name) override;
  // Deletes the file and its companions; never fails (what cannot be removed stays).
  Status Destroy(const storage::DatabaseRecord& database) override;
  // The file's path.
  std::string Location(const storage::DatabaseRecord& database) const override;

 private:
  const DataDir* const dd_;
  const storage::SqliteOptions sqlite_;
};

// Creates a new database file and registers it under `name` (service::AdminOps with a
// SqliteProvisioner). Errors: InvalidArgument (bad name), AlreadyExists, Internal.
Result<storage::DatabaseRecord> CreateDatabase(DataDir& dd, const std::string& name,
                                               const storage::SqliteOptions& sqlite);

// Makes the database named "default" the given SQLite file (serve --sqlite-path).
Status PointDefaultAt(DataDir& dd, const std::string& sqlite_path,
                      const storage::SqliteOptions& sqlite);

// Deletes a database file and its -wal / -shm companions.
void RemoveDatabaseFiles(const std::string& path);

}  // namespace kvc::cli
