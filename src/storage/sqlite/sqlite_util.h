// Small SQLite helpers shared by the backend and the catalog: a connection that opens with flags
// and pragmas and owns its persistent statements, a statement wrapper that resets (and, for a
// one-shot statement, finalizes) itself, typed bind/column helpers, and the one error mapping:
// every SQLite failure is IoError("<prefix><what>: <sqlite's message>").
//
// Thread-safety: none of its own. A Connection and its statements are used by one thread at a
// time, or behind the caller's lock.
#pragma once

#include <sqlite3.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kvc::storage::sqlite {

class Stmt;

// Process-wide SQLite settings, before SQLite is first used (sqlite3_config refuses them after):
// memory statistics off. With them on (the library's default), every allocation and free inside
// SQLite takes one global mutex, which the writer and all readers share. Nothing here reads
// sqlite3_memory_used or sets a soft heap limit. Call once from main() before any thread starts;
// returns false if SQLite was already initialized (the default stays, nothing breaks).
bool ConfigureSqliteProcess();

// Owns a sqlite3 connection and the persistent statements prepared on it.
class Connection {
 public:
  // `error_prefix` starts the message of every error this connection returns ("sqlite ").
  explicit Connection(std::string error_prefix) : error_prefix_(std::move(error_prefix)) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  // Finalizes the statements from Prepare() and closes the connection.
  ~Connection();

  // Opens `path` with sqlite3_open_v2 `flags`, turns on extended result codes, sets the busy
  // timeout, then runs `pragmas` (may be empty). `vfs`: the SQLite VFS to use by name (empty:
  // the default; tests register fault-injecting ones). Opened for writing, a file on disk and
  // its -wal/-shm/-journal are made private first (0600; storage/private_file.h). Returns
  // IoError on failure.
  // REQUIRES: called once.
  Status Open(const std::string& path, int flags, int busy_timeout_ms, const std::string& pragmas,
              const std::string& vfs = "");

  // Runs `sql` (one or more statements). Returns IoError("<prefix>exec: ...") on failure.
  Status Exec(const char* sql);

  // Prepares `sql` once for repeated use (SQLITE_PREPARE_PERSISTENT); the connection owns it and
  // finalizes it on destruction. Use it through a borrowing Stmt. Returns IoError on failure.
  Result<sqlite3_stmt*> Prepare(const char* sql);

  // Prepares `sql` for one use; the returned Stmt finalizes it. Returns IoError on failure.
  Result<Stmt> PrepareOnce(const char* sql);

  // IoError("<prefix><what>: <the connection's last error message>").
  Status Error(std::string_view what) const;

  sqlite3* db() const { return db_; }

 private:
  const std::string error_prefix_;
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> stmts_;
};

// A statement in use. When it leaves scope it resets the statement and clears its bindings, so
// it never holds a read snapshot open; when it owns the statement (PrepareOnce) it finalizes it
// instead. Bind helpers do not copy: REQUIRES: bound bytes outlive the last Step().
class Stmt {
 public:
  // Borrows `s`, a statement someone else owns (Connection::Prepare).
  explicit Stmt(sqlite3_stmt* s) : s_(s), owned_(false) {}
  Stmt(Stmt&& other) noexcept : s_(other.s_), owned_(other.owned_) { other.s_ = nullptr; }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  // Parameters are numbered from 1.
  Stmt& BindBlob(int i, std::string_view v);
  Stmt& BindText(int i, std::string_view v);
  Stmt& BindInt64(int i, int64_t v);
  Stmt& BindDouble(int i, double v);

  // Returns SQLITE_ROW, SQLITE_DONE or an error code.
  int Step();

  // Columns are numbered from 0. A NULL reads as empty or 0.
  std::string ColumnBlob(int i) const;
  std::string ColumnText(int i) const;
  int64_t ColumnInt64(int i) const;
  double ColumnDouble(int i) const;

 private:
  friend class Connection;
  Stmt(sqlite3_stmt* s, bool owned) : s_(s), owned_(owned) {}

  sqlite3_stmt* s_;
  bool owned_;
};

template <typename T>
inline constexpr bool kIsResult = false;
template <typename T>
inline constexpr bool kIsResult<Result<T>> = true;

// Steps `s` to its end and appends each row to `*out`, as `read(s)` makes it (a T, or a
// Result<T> whose error ends the scan). Errors: read's, or conn.Error(what) when a step fails.
template <typename T, typename Read>
Status AppendRows(const Connection& conn, Stmt& s, std::string_view what, Read&& read,
                  std::vector<T>* out) {
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    auto row = read(static_cast<const Stmt&>(s));
    if constexpr (kIsResult<decltype(row)>) {
      if (!row.ok()) return row.status();
      out->push_back(std::move(*row));
    } else {
      out->push_back(std::move(row));
    }
  }
  if (rc != SQLITE_DONE) return conn.Error(what);
  return Status::Ok();
}

// Steps `s` to its one row and reads the row's first N columns as integers. Errors:
// conn.Error(what) when the step yields no row.
template <size_t N>
Result<std::array<int64_t, N>> IntRow(const Connection& conn, Stmt& s, std::string_view what) {
  if (s.Step() != SQLITE_ROW) return conn.Error(what);
  std::array<int64_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = s.ColumnInt64(static_cast<int>(i));
  return out;
}

// The same, into a new vector.
template <typename T, typename Read>
Result<std::vector<T>> AllRows(const Connection& conn, Stmt& s, std::string_view what,
                               Read&& read) {
  std::vector<T> out;
  KVC_RETURN_IF_ERROR(AppendRows(conn, s, what, std::forward<Read>(read), &out));
  return out;
}

}  // namespace kvc::storage::sqlite
