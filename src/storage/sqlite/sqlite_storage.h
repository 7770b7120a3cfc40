// SqliteStorage: the data directory, the SQLite kind of storage (storage.h):
//   catalog.sqlite3       databases and access tokens (SqliteCatalog)
//   default.sqlite3       the database named "default" (created on first use)
//   db-<hex>.sqlite3      databases made later (Create)
//   <secret name>         secrets, one file each, mode 0600 (e.g. access-token, server-secret)
//   kvconnect.lock        the writer claim (LockWriters): an flock held by the process that
//                         writes (serve, or an offline import), which writes its pid into it
// A database's location is its file name relative to the directory, or an absolute path (serve
// --sqlite-path).
//
// Several processes may open one data directory at once (`serve` and the `db` / `token` /
// `export` subcommands): the catalog is a WAL SQLite file, and secrets are created
// exclusively. Only the holder of the writer claim writes databases. A database file outside the
// directory (--sqlite-path) is covered by the claim of the directory it is served from.
// Thread-safety: thread-safe (each call opens its own files; the catalog locks itself).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "storage/sqlite/sqlite_backend.h"
#include "storage/storage.h"

namespace kvc::storage {

class SqliteStorage : public Storage {
 public:
  // Creates the directory (mode 0700) and the catalog if needed, and makes sure the database
  // named "default" exists (adopting a default.sqlite3 made before the catalog existed), in
  // the file options.default_database_file if that is set.
  static Result<std::unique_ptr<SqliteStorage>> Open(const StorageOptions& options);

  Result<std::unique_ptr<Backend>> OpenBackend(const DatabaseRecord& database) override;
  // A new file, db-<hex>.sqlite3, carrying a new database id. Errors: IoError.
  Result<DatabaseRecord> Create(const std::string& name) override;
  // Deletes the file and its -wal, -shm and -journal companions; never fails (what cannot be
  // removed stays).
  Status Destroy(const DatabaseRecord& database) override;
  // The file's path.
  std::string Location(const DatabaseRecord& database) const override;

  Result<std::string> LoadOrCreateSecret(const std::string& name,
                                         const std::function<std::string()>& make,
                                         bool* created) override;
  Result<std::optional<std::string>> ReadSecret(const std::string& name) override;
  std::string SecretLocation(const std::string& name) const override;
  // flock(LOCK_EX | LOCK_NB) on kvconnect.lock.
  Result<std::unique_ptr<WriterLock>> LockWriters() override;
  std::string Describe() const override { return root_.string(); }
  // <data directory>/tmp.
  Result<std::string> ScratchDirectory() override;
  // Moves the file into the data directory as db-<hex>.sqlite3 and stores `id` in it.
  Result<DatabaseRecord> CreateFromSnapshot(const std::string& name,
                                            const std::string& snapshot_file,
                                            const std::string& id) override;
  // A new file, db-<hex>.sqlite3, carrying `id`.
  Result<DatabaseRecord> CreateWithId(const std::string& name, const std::string& id) override;

 private:
  SqliteStorage(std::unique_ptr<Catalog> catalog, std::filesystem::path root, SqliteOptions sqlite)
      : Storage(std::move(catalog)), root_(std::move(root)), sqlite_(std::move(sqlite)) {}

  // A catalog location as a file path.
  std::string Resolve(const std::string& location) const;
  // A record for `file` (a location) under `name`, carrying the id stored in the file (which
  // is created if missing).
  Result<DatabaseRecord> RecordFor(const std::string& name, const std::string& file) const;
  // Stores `id` as the database id of the database file at `path`.
  Status StampDatabaseId(const std::string& path, const std::string& id) const;
  Status RegisterDefault();
  // Makes the database named "default" the SQLite file at `file`.
  Status PointDefaultAt(const std::string& file);

  const std::filesystem::path root_;
  const SqliteOptions sqlite_;
};

}  // namespace kvc::storage
