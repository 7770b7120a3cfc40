// Storage: everything a server keeps, opened as one thing from configuration: the catalog
// (databases and access-token hashes), a backend for each database, the making and removing of a
// database's storage, and named secrets (the token-signing key, the bootstrap token).
//
// OpenStorage is the one factory. A second kind of storage is a folder under storage/ with a
// class implementing Storage, plus one row in the table of kinds in storage.cc, which also parses
// and checks the kind's specs (storage_spec.h).
//
// A database's location (DatabaseRecord::location) is opaque outside the Storage that made it:
// callers pass records back to OpenBackend and Destroy, compare locations for equality, and show
// Location() to operators.
//
// Ownership: a Storage owns its catalog; backends it opens are owned by the caller and must be
// closed before the Storage is destroyed.
// Thread-safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "storage/backend.h"
#include "storage/catalog.h"
#include "storage/node_registry.h"
#include "storage/pg_tuning.h"

namespace kvc::storage {

// Creates and destroys the storage behind a database (for SQLite: its file and companions).
// service::AdminOps registers and unregisters databases in the catalog; a provisioner only
// makes the storage.
// Thread-safety: implementations used by a shared AdminOps must be thread-safe.
class DatabaseProvisioner {
 public:
  virtual ~DatabaseProvisioner() = default;
  // Makes new, empty storage for a database to be named `name`; returns its record with at
  // least `id` (the id the storage carries) and `location` set. The catalog is not touched.
  virtual Result<DatabaseRecord> Create(const std::string& name) = 0;
  // Removes the storage of a database that is no longer (or never was) in the catalog.
  virtual Status Destroy(const DatabaseRecord& database) = 0;
  // Where a database's data lives, as shown to operators (for SQLite: the file path).
  virtual std::string Location(const DatabaseRecord& database) const = 0;
};

// A claim on a storage's databases for the writers of one process (Storage::LockWriters);
// released when destroyed.
class WriterLock {
 public:
  virtual ~WriterLock() = default;
};

// What configuration says about storage. Fields a kind does not use are ignored.
struct StorageOptions {
  std::string kind = "sqlite";  // see StorageKinds()
  // sqlite: the data directory (created with mode 0700 if missing). postgres: the libpq
  // conninfo (keyword=value or a postgresql:// URI; several hosts allowed).
  std::string location = "./kvconnect-data";
  SyncMode sync = SyncMode::kFull;
  // sqlite: reader connections map up to this many bytes of a database file; 0: off.
  int64_t mmap_bytes = 0;
  // sqlite: WAL checkpoints (sqlite/checkpointer.h): a thread of their own copies the WAL into
  // the database file from this many WAL pages on, the writer itself at wal_limit_pages.
  // checkpoint_pages 0: SQLite's own checkpoint inside the commit at 1000 pages. The defaults
  // are 4x SQLite's: a page written again before the checkpoint is copied once (see
  // SqliteOptions).
  int64_t checkpoint_pages = 4000;
  int64_t wal_limit_pages = 16000;
  // sqlite, sync full: the writer writes each commit's WAL frames in one write of up to this
  // many bytes (sqlite/wal_write_buffer.h); 0: one write per frame header and page, as SQLite.
  size_t wal_buffer_bytes = size_t{1} << 20;
  // sqlite: the file the database named "default" lives in (serve --sqlite-path); empty:
  // default.sqlite3 in the data directory.
  std::string default_database_file;
  // sqlite: the SQLite VFS every connection uses, by name; empty: the default. Tests register a
  // VFS that simulates power loss.
  std::string vfs;
  // postgres: reads go to this conninfo (a streaming standby) when set.
  std::string read_location;
  // postgres: the timings and name of this node's sessions, handed to each database's backend.
  PgTuning pg;
};

class Storage : public DatabaseProvisioner {
 public:
  Catalog& catalog() { return *catalog_; }

  // Opens the backend of a database in the catalog; never creates one.
  // Errors: NotFound if its storage is gone, IoError, Corruption.
  virtual Result<std::unique_ptr<Backend>> OpenBackend(const DatabaseRecord& database) = 0;

  // The secret called `name` (e.g. "server-secret"), created with `make()` on first use and
  // kept where only the server's user can read it. `*created` tells whether it was made now.
  // Errors: IoError, or Corruption if what is stored is empty.
  virtual Result<std::string> LoadOrCreateSecret(const std::string& name,
                                                 const std::function<std::string()>& make,
                                                 bool* created) = 0;
  // The secret called `name` if it is stored, nullopt if not; never creates it (`kvconnect
  // migrate` reads the source's secrets this way). Errors: IoError, Corruption (stored but
  // empty).
  virtual Result<std::optional<std::string>> ReadSecret(const std::string& name) = 0;
  // Where the secret `name` is kept, as shown to operators.
  virtual std::string SecretLocation(const std::string& name) const = 0;
  // Claims the storage for this process's writers, so that two processes never write one
  // database at once (the engine assumes it is the only writer of an exclusive-writer backend):
  // `serve` holds the claim while it runs, and offline writers (`kvconnect import` without
  // --url) take it so they never write beside a server. Readers need no claim. Released when
  // the returned object is destroyed or the process ends. Errors: Unavailable if another
  // process (or another claim in this one) holds it, with a text saying where the claim is
  // kept and by which process; IoError.
  virtual Result<std::unique_ptr<WriterLock>> LockWriters() = 0;
  // Where the storage is, as shown to operators (for SQLite: the data directory). Never holds
  // a password.
  virtual std::string Describe() const = 0;

  // A directory for this storage's temporary files (backups stage snapshot copies there), on
  // the same file system as the data where there is one; created (mode 0700) if missing, and
  // refused if another user owns it (storage/private_file.h). Errors: IoError.
  virtual Result<std::string> ScratchDirectory() = 0;
  // Makes the storage of a new database named `name` from `snapshot_file` (a snapshot file,
  // storage/snapshot_file.h, e.g. restored from a backup), taking the file over (it is moved or
  // removed); the database carries `id`. The catalog is not touched: the caller adds or rebinds
  // the returned record. Errors: InvalidArgument (not a Deno KV database file), AlreadyExists
  // (the storage holds a database with `id` and cannot hold a second: PostgreSQL), IoError.
  virtual Result<DatabaseRecord> CreateFromSnapshot(const std::string& name,
                                                    const std::string& snapshot_file,
                                                    const std::string& id) = 0;
  // Like Create, but the new, empty database carries `id` (a UUID another storage made):
  // `kvconnect migrate` moves a database between storages keeping its id, so access tokens and
  // data-path tokens bound to it keep working. The catalog is not touched: the caller may open
  // the returned record (OpenBackend) and fill it before it adds or rebinds it, and destroys it
  // (Destroy) if that fails. Errors: InvalidArgument (`id` is not a UUID), IoError.
  virtual Result<DatabaseRecord> CreateWithId(const std::string& name, const std::string& id) = 0;

  // The node registry of a storage several nodes serve at once (node_registry.h); nullptr for a
  // storage only one process serves.
  virtual NodeRegistry* nodes() { return nullptr; }

 protected:
  explicit Storage(std::unique_ptr<Catalog> catalog) : catalog_(std::move(catalog)) {}

 private:
  std::unique_ptr<Catalog> catalog_;
};

// The kinds OpenStorage knows, comma-separated (for error messages).
std::string StorageKinds();

// Opens (creating on first use) the storage `options` describe, with the database named
// "default" registered. Errors: InvalidArgument (unknown kind, with the known ones), IoError,
// Corruption.
Result<std::unique_ptr<Storage>> OpenStorage(const StorageOptions& options);

}  // namespace kvc::storage
