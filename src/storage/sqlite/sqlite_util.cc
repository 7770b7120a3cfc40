#include "storage/sqlite/sqlite_util.h"

#include "storage/private_file.h"

namespace kvc::storage::sqlite {

bool ConfigureSqliteProcess() { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK; }

Connection::~Connection() {
  for (sqlite3_stmt* s : stmts_) sqlite3_finalize(s);
  if (db_) sqlite3_close_v2(db_);
}

Status Connection::Open(const std::string& path, int flags, int busy_timeout_ms,
                        const std::string& pragmas, const std::string& vfs) {
  // A file SQLite would create gets 0644 minus the umask, and its -wal and -shm the same: make
  // it 0600 first (and tighten older files), so all of them are private (storage/private_file.h).
  const bool on_disk = !path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0;
  if (on_disk && (flags & SQLITE_OPEN_READWRITE) != 0) {
    KVC_RETURN_IF_ERROR(PrepareSqliteFiles(path, (flags & SQLITE_OPEN_CREATE) != 0));
  }
  // On failure SQLite usually still returns a handle; the destructor closes it.
  if (sqlite3_open_v2(path.c_str(), &db_, flags, vfs.empty() ? nullptr : vfs.c_str()) !=
      SQLITE_OK) {
    return Error("open " + path);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  if (pragmas.empty()) return Status::Ok();
  return Exec(pragmas.c_str());
}

Status Connection::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return IoError(error_prefix_ + "exec: " + msg);
  }
  return Status::Ok();
}

Result<sqlite3_stmt*> Connection::Prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    return Error("prepare");
  }
  stmts_.push_back(s);
  return s;
}

Result<Stmt> Connection::PrepareOnce(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    return Error("prepare");
  }
  return Stmt(s, /*owned=*/true);
}

Status Connection::Error(std::string_view what) const {
  // db_ is null only when sqlite3_open_v2 could not allocate one.
  return IoError(error_prefix_ + std::string(what) + ": " +
                 (db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

Stmt::~Stmt() {
  if (s_ == nullptr) return;
  if (owned_) {
    sqlite3_finalize(s_);
  } else {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
}

Stmt& Stmt::BindBlob(int i, std::string_view v) {
  sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}

Stmt& Stmt::BindText(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}

Stmt& Stmt::BindInt64(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}

Stmt& Stmt::BindDouble(int i, double v) {
  sqlite3_bind_double(s_, i, v);
  return *this;
}

int Stmt::Step() { return sqlite3_step(s_); }

std::string Stmt::ColumnBlob(int i) const {
  const void* p = sqlite3_column_blob(s_, i);
  const int n = sqlite3_column_bytes(s_, i);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

std::string Stmt::ColumnText(int i) const {
  const unsigned char* p = sqlite3_column_text(s_, i);
  const int n = sqlite3_column_bytes(s_, i);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

int64_t Stmt::ColumnInt64(int i) const { return sqlite3_column_int64(s_, i); }

double Stmt::ColumnDouble(int i) const { return sqlite3_column_double(s_, i); }

}  // namespace kvc::storage::sqlite
