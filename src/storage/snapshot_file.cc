#include "storage/snapshot_file.h"

#include <sqlite3.h>

#include <filesystem>

#include "storage/sqlite/sqlite_backend.h"
#include "storage/sqlite/sqlite_util.h"

namespace kvc::storage {
namespace {

constexpr const char* kErrorPrefix = "snapshot file ";
constexpr int kBusyTimeoutMs = 5000;

// InvalidArgument unless the SQLite file at `path` holds Deno's KV tables.
Status CheckDenoFile(const std::string& path) {
  sqlite::Connection c(kErrorPrefix);
  // Read-write (never creating): the -wal and -shm files a WAL file's reader makes are then
  // made private first, as every file the storage opens.
  KVC_RETURN_IF_ERROR(c.Open(path, SQLITE_OPEN_READWRITE, kBusyTimeoutMs, "pragma query_only=1"));
  auto check = c.PrepareOnce(
      "select count(*) from sqlite_master where name in ('kv', 'data_version', "
      "'migration_state')");
  if (!check.ok() || check->Step() != SQLITE_ROW || check->ColumnInt64(0) != 3) {
    return InvalidArgument(path + " is not a Deno KV database file");
  }
  return Status::Ok();
}

// The single value of the one-row query `sql` on `c`.
Result<std::string> QueryText(sqlite::Connection& c, const char* sql, const char* what) {
  KVC_ASSIGN_OR_RETURN(sqlite::Stmt s, c.PrepareOnce(sql));
  if (s.Step() != SQLITE_ROW) return c.Error(what);
  return s.ColumnText(0);
}

}  // namespace

Result<std::unique_ptr<Backend>> CreateSnapshotFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || ec) {
    return IoError("cannot make the snapshot file " + path + ": something is there already");
  }
  SqliteOptions o;
  o.sync = SyncMode::kOff;  // a scratch file: SealSnapshotFile checkpoints and fsyncs it
  o.create_if_missing = true;
  // Written once by one copier, with nobody waiting on its commits: no checkpoint thread.
  o.checkpoint_pages = 0;
  KVC_ASSIGN_OR_RETURN(auto backend, SqliteBackend::Open(path, o));
  return std::unique_ptr<Backend>(std::move(backend));
}

Result<int64_t> SealSnapshotFile(const std::string& path) {
  sqlite::Connection c(kErrorPrefix);
  KVC_RETURN_IF_ERROR(
      c.Open(path, SQLITE_OPEN_READWRITE, kBusyTimeoutMs, "pragma synchronous=full"));
  // The log into the file (fsynced), so the file alone is the whole database.
  KVC_RETURN_IF_ERROR(c.Exec("pragma wal_checkpoint(truncate)"));
  KVC_ASSIGN_OR_RETURN(const std::string verdict,
                       QueryText(c, "pragma integrity_check", "integrity check"));
  if (verdict != "ok") {
    return Corruption("the snapshot file " + path + " fails its integrity check: " + verdict);
  }
  KVC_ASSIGN_OR_RETURN(const std::string bytes,
                       QueryText(c,
                                 "select page_count * page_size from pragma_page_count(), "
                                 "pragma_page_size()",
                                 "size"));
  return std::stoll(bytes);
}

Result<SnapshotRowsCopy> FillFromSnapshotFile(const std::string& path, Backend& dest,
                                              int32_t batch_rows) {
  KVC_RETURN_IF_ERROR(CheckDenoFile(path));
  SqliteOptions o;
  o.create_if_missing = false;
  o.sync = SyncMode::kOff;  // only read (opening may bring an older file's schema up to date)
  KVC_ASSIGN_OR_RETURN(auto file, SqliteBackend::Open(path, o));
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, file->OpenReader());
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, dest.OpenWriter());
  KVC_RETURN_IF_ERROR(reader->Begin());
  CopyOptions copy;
  copy.batch_rows = batch_rows;
  copy.queue = true;
  Result<SnapshotRowsCopy> out = CopySnapshotRows(*reader, *writer, copy);
  reader->End();
  return out;
}

}  // namespace kvc::storage
