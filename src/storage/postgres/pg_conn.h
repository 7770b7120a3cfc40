// Small libpq helpers shared by the PostgreSQL catalog, backend and change feed: a connection that
// (re)connects from a conninfo with forced settings, prepares named statements lazily once per
// session, runs statements alone or several in one pipeline (one round trip), and the one error
// mapping: every PostgreSQL failure is IoError("postgres <what>: <libpq's message>").
//
// User bytes never become SQL text: every value travels as a statement parameter (Params), keys
// and values in binary form.
//
// Thread-safety: none of its own. A Connection is used by one thread at a time, or behind the
// caller's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

struct pg_conn;
struct pg_result;

namespace kvc::storage::pg {

// The parameters of one statement. Text() values go in text form; Bytes(), Int64() and Int32()
// in binary form (their statements must declare or imply bytea, int8 and int4 there).
class Params {
 public:
  Params& Text(std::string_view s);
  Params& Bytes(std::string_view b);
  Params& Int64(int64_t v);
  Params& Int32(int32_t v);
  Params& Double(double v);  // as text
  // One-dimensional arrays in binary form (bytea[], int8[], int4[]).
  Params& BytesArray(const std::vector<std::string>& v);
  Params& Int64Array(const std::vector<int64_t>& v);
  Params& Int32Array(const std::vector<int32_t>& v);

  int size() const { return static_cast<int>(storage_.size()); }
  // Pointers into this object, valid until it is changed, copied or moved.
  const char* const* values() const;
  const int* lengths() const;
  const int* formats() const { return formats_.data(); }

 private:
  Params& Add(std::string bytes, int format);
  std::vector<std::string> storage_;
  std::vector<int> formats_;
  mutable std::vector<const char*> values_;  // rebuilt by values()
  mutable std::vector<int> lengths_;         // rebuilt by lengths()
};

// An owned PGresult; columns are read in the format the statement asked for (Connection: binary
// unless told otherwise).
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(pg_result* r) : r_(r) {}
  PgResult(PgResult&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  PgResult& operator=(PgResult&& o) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  ~PgResult();

  int rows() const;
  bool IsNull(int row, int col) const;
  // Binary int8 / int4 / int2 (by the column's length), or text digits for a text result.
  int64_t Int(int row, int col) const;
  std::string Bytes(int row, int col) const;  // raw bytes of the column (binary bytea or text)
  double Double(int row, int col) const;      // binary float8
  // Rows changed by an INSERT/UPDATE/DELETE.
  int64_t Affected() const;
  pg_result* get() const { return r_; }

 private:
  pg_result* r_ = nullptr;
};

// One statement of a pipeline.
struct Statement {
  std::string name;  // a statement prepared with Connection::Define
  Params params;
};

class Connection {
 public:
  // `conninfo`: what the operator gave (keyword=value or a postgresql:// URI); `overrides` are
  // set on top of it (e.g. target_session_attrs=read-write, application_name). `what` starts
  // every error message ("postgres catalog").
  Connection(std::string conninfo, std::map<std::string, std::string> overrides, std::string what);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Connects (again); forgets what was prepared on an earlier session. Errors: IoError.
  Status Connect();
  // Connects if not connected or if the connection broke, unless pinned. Errors: IoError.
  Status Ensure();
  bool connected() const;
  void Close();
  // While pinned, a broken connection is not made again by the calls below: they fail with
  // IoError. Pin a connection from BEGIN to COMMIT/ROLLBACK: the transaction and its locks died
  // with the session, and statements on a new one would run outside them, each committed on
  // its own. Connect() works regardless.
  void set_pinned(bool pinned) { pinned_ = pinned; }
  // Closes the connection if the server ended it while it was idle (a restart, an administrator's
  // pg_terminate_backend): libpq reports CONNECTION_OK until the socket is read, so its first
  // statement would fail although the server is back. Call it before a unit of work.
  // REQUIRES: no transaction open on this connection.
  void CloseIfEndedByServer();

  // Registers a named statement (prepared on first use in each session).
  void Define(const std::string& name, std::string sql);
  // Runs a defined statement and waits for its result (binary results).
  Result<PgResult> Run(const std::string& name, const Params& params);
  // Runs SQL text without parameters (may hold several statements); text results.
  Status Exec(const std::string& sql);
  // Runs SQL text with parameters once (unnamed); binary results.
  Result<PgResult> Query(const std::string& sql, const Params& params);
  // Runs `stmts` in one pipeline (one round trip) and returns their results in order. On the
  // first failing statement the rest are skipped and its error returned (an open transaction
  // is then aborted; the caller rolls back).
  Result<std::vector<PgResult>> Pipeline(const std::vector<Statement>& stmts);

  // Sends SQL text without waiting for its result (e.g. the commit of a read-only
  // transaction); the next call collects and drops the result. Errors: IoError.
  Status SendAndForget(const char* sql);

  // True if the server-side transaction is open (idle in transaction or failed).
  bool InTransaction() const;
  // Rolls back an open transaction, ignoring errors.
  void RollbackQuietly();

  // IoError("<what> <context>: <libpq's last error message>").
  Status Error(std::string_view context) const;
  pg_conn* raw() const { return conn_; }
  // The socket, for waiting on notifications; -1 when not connected.
  int socket() const;

 private:
  Status PrepareIfNeeded(const std::string& name);
  // OK for a result that succeeded; otherwise its error (or the connection's if there is none).
  Status CheckResult(const PgResult& r, std::string_view context) const;
  // Writes the pending output, reading input meanwhile so the server never blocks on us.
  Status Flush(std::string_view context);
  // Collects the result of an earlier SendAndForget, if any.
  void Drain();

  const std::string conninfo_;
  const std::map<std::string, std::string> overrides_;
  const std::string what_;
  pg_conn* conn_ = nullptr;
  std::map<std::string, std::string> defined_;
  std::set<std::string> prepared_;  // in the current session
  bool forgotten_ = false;          // a SendAndForget result is still to be collected
  bool pinned_ = false;             // see set_pinned()
};

// The hex digits of a database UUID without dashes (for channel and lock names).
std::string UuidHex(const std::string& uuid);

template <typename T>
inline constexpr bool kIsResult = false;
template <typename T>
inline constexpr bool kIsResult<Result<T>> = true;

// Appends every row of `r` to `*out`, as `read(r, row)` makes it (a T, or a Result<T> whose
// error ends the reading and is returned).
template <typename T, typename Read>
Status AppendRows(const PgResult& r, Read&& read, std::vector<T>* out) {
  out->reserve(out->size() + static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    auto row = read(r, i);
    if constexpr (kIsResult<decltype(row)>) {
      if (!row.ok()) return row.status();
      out->push_back(std::move(*row));
    } else {
      out->push_back(std::move(row));
    }
  }
  return Status::Ok();
}

// The same, into a new vector.
template <typename T, typename Read>
Result<std::vector<T>> AllRows(const PgResult& r, Read&& read) {
  std::vector<T> out;
  KVC_RETURN_IF_ERROR(AppendRows(r, std::forward<Read>(read), &out));
  return out;
}

}  // namespace kvc::storage::pg
