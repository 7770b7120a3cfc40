#include "storage/sqlite/sqlite_backend.h"

#include <sqlite3.h>

#include <string_view>
#include <utility>

#include "common/random.h"

namespace kvc::storage {
namespace {

// Deno's local backend schema, applied in order and recorded in migration_state. Do not
// change: files must stay interchangeable with Deno's own backend.
constexpr const char* kCreateMigrationTable =
    "create table if not exists migration_state(k integer not null primary key, "
    "version integer not null)";
constexpr const char* kMigrations[] = {
    "create table data_version (k integer primary key, version integer not null);"
    "insert into data_version (k, version) values (0, 0);"
    "create table kv (k blob primary key, v blob not null, v_encoding integer not null, "
    "version integer not null) without rowid;",
    "create table queue (ts integer not null, id text not null, data blob not null, "
    "backoff_schedule text not null, keys_if_undelivered blob not null, primary key (ts, id));"
    "create table queue_running(deadline integer not null, id text not null, "
    "data blob not null, backoff_schedule text not null, keys_if_undelivered blob not null, "
    "primary key (deadline, id));",
    "alter table kv add column seq integer not null default 0;"
    "alter table data_version add column seq integer not null default 0;"
    "alter table kv add column expiration_ms integer not null default -1;"
    "create index kv_expiration_ms_idx on kv (expiration_ms);",
};
// Our own table; Deno ignores it.
constexpr const char* kCreateMetaTable =
    "create table if not exists kvconnect_meta (k text primary key, v text not null)";

// Every SQLite failure is an I/O error to the layers above: the detail goes to the log.
Status SqliteError(sqlite3* db, const char* what) {
  return IoError(std::string("sqlite ") + what + ": " + (db ? sqlite3_errmsg(db) : "no db"));
}

Status UnknownEncoding(int64_t enc) {
  return Corruption("a kv row has the unknown value encoding " + std::to_string(enc));
}

// Deno's text forms of the queue lists: a JSON array of numbers, and a JSON array of keys,
// each an array of its byte values.
std::string BackoffScheduleJson(const std::vector<uint32_t>& schedule) {
  std::string out = "[";
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(schedule[i]);
  }
  return out + "]";
}
std::string KeysJson(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ",";
    out += "[";
    for (size_t j = 0; j < keys[i].size(); ++j) {
      if (j) out += ",";
      out += std::to_string(static_cast<unsigned char>(keys[i][j]));
    }
    out += "]";
  }
  return out + "]";
}

// Owns a sqlite3 connection.
class Connection {
 public:
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    for (auto* s : stmts_) sqlite3_finalize(s);
    if (db_) sqlite3_close_v2(db_);
  }

  Status Open(const std::string& path, const SqliteOptions& o, bool read_only) {
    int flags = read_only
                    ? SQLITE_OPEN_READONLY
                    : (SQLITE_OPEN_READWRITE | (o.create_if_missing ? SQLITE_OPEN_CREATE : 0));
    flags |= SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
      return SqliteError(db_, "open");
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, o.busy_timeout_ms);
    const char* sync = o.sync == SyncMode::kFull     ? "FULL"
                       : o.sync == SyncMode::kNormal ? "NORMAL"
                                                     : "OFF";
    std::string pragmas = std::string("pragma synchronous=") + sync + "; pragma cache_size=-" +
                          std::to_string(o.cache_size_kib) + ";";
    return Exec(pragmas.c_str());
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      return IoError(std::string("sqlite exec: ") + msg);
    }
    return Status::Ok();
  }

  // Prepares a statement once; the connection owns it.
  Result<sqlite3_stmt*> Prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      return SqliteError(db_, "prepare");
    }
    stmts_.push_back(s);
    return s;
  }

  sqlite3* db() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> stmts_;
};

// Resets a statement when leaving scope so it never holds a read snapshot open.
class StmtScope {
 public:
  explicit StmtScope(sqlite3_stmt* s) : s_(s) {}
  ~StmtScope() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StmtScope(const StmtScope&) = delete;
  StmtScope& operator=(const StmtScope&) = delete;

 private:
  sqlite3_stmt* s_;
};

void BindBlob(sqlite3_stmt* s, int i, std::string_view b) {
  sqlite3_bind_blob(s, i, b.data(), static_cast<int>(b.size()), SQLITE_STATIC);
}
void BindText(sqlite3_stmt* s, int i, std::string_view t) {
  sqlite3_bind_text(s, i, t.data(), static_cast<int>(t.size()), SQLITE_STATIC);
}
std::string ColumnBlob(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  int n = sqlite3_column_bytes(s, i);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

Result<int64_t> QueryDataVersion(Connection& c, sqlite3_stmt* s) {
  StmtScope scope(s);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return sqlite3_column_int64(s, 0);
  if (rc == SQLITE_DONE) return Corruption("the data_version row is missing");
  return SqliteError(c.db(), "read data_version");
}

// Runs `s` ("select v, v_encoding, version, expiration_ms from kv where k = ?1") for `key`.
Result<std::optional<StoredRow>> QueryRow(Connection& c, sqlite3_stmt* s, std::string_view key) {
  StmtScope scope(s);
  BindBlob(s, 1, key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<StoredRow>();
  if (rc != SQLITE_ROW) return SqliteError(c.db(), "get");
  StoredRow row;
  row.value = ColumnBlob(s, 0);
  int64_t enc = sqlite3_column_int64(s, 1);
  if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
  row.encoding = static_cast<ValueEncoding>(enc);
  row.version = sqlite3_column_int64(s, 2);
  row.expire_at_ms = sqlite3_column_int64(s, 3);
  return std::optional<StoredRow>(std::move(row));
}

constexpr const char* kGetRowSql =
    "select v, v_encoding, version, expiration_ms from kv where k = ?1";

class SqliteReader : public Reader {
 public:
  Status Init(const std::string& path, const SqliteOptions& o) {
    KVC_RETURN_IF_ERROR(conn_.Open(path, o, /*read_only=*/false));
    KVC_RETURN_IF_ERROR(conn_.Exec("pragma query_only=1"));
    if (o.reader_mmap_bytes > 0) {
      const std::string mmap = "pragma mmap_size=" + std::to_string(o.reader_mmap_bytes);
      KVC_RETURN_IF_ERROR(conn_.Exec(mmap.c_str()));
    }
    KVC_ASSIGN_OR_RETURN(begin_, conn_.Prepare("begin"));
    KVC_ASSIGN_OR_RETURN(end_, conn_.Prepare("commit"));
    KVC_ASSIGN_OR_RETURN(
        scan_,
        conn_.Prepare("select k, v, v_encoding, version from kv where k >= ?1 and k < ?2 "
                      "and (expiration_ms < 0 or expiration_ms > ?3) order by k asc limit ?4"));
    KVC_ASSIGN_OR_RETURN(
        scan_rev_,
        conn_.Prepare("select k, v, v_encoding, version from kv where k >= ?1 and k < ?2 "
                      "and (expiration_ms < 0 or expiration_ms > ?3) order by k desc limit ?4"));
    KVC_ASSIGN_OR_RETURN(version_, conn_.Prepare("select version from data_version where k = 0"));
    KVC_ASSIGN_OR_RETURN(get_, conn_.Prepare(kGetRowSql));
    KVC_ASSIGN_OR_RETURN(count_, conn_.Prepare("select count(*) from kv"));
    KVC_ASSIGN_OR_RETURN(pages_, conn_.Prepare("select page_count * page_size from "
                                               "pragma_page_count(), pragma_page_size()"));
    return Status::Ok();
  }

  Result<StorageStats> Stats() override {
    StorageStats st;
    for (auto [stmt, out] : {std::pair{count_, &st.key_count}, {pages_, &st.total_bytes}}) {
      StmtScope scope(stmt);
      if (sqlite3_step(stmt) != SQLITE_ROW) return SqliteError(conn_.db(), "stats");
      *out = sqlite3_column_int64(stmt, 0);
    }
    return st;
  }

  Status Begin() override {
    StmtScope scope(begin_);
    if (sqlite3_step(begin_) != SQLITE_DONE) return SqliteError(conn_.db(), "begin read");
    // A deferred transaction takes its snapshot at the first read; take it now so every
    // later statement sees the same state.
    auto v = QueryDataVersion(conn_, version_);
    if (!v.ok()) {
      End();
      return v.status();
    }
    snapshot_version_ = *v;
    return Status::Ok();
  }

  Status Scan(const ReadRange& r, int64_t now_ms, std::vector<Entry>* out) override {
    if (r.start >= r.end || r.limit <= 0) return Status::Ok();
    sqlite3_stmt* s = r.reverse ? scan_rev_ : scan_;
    StmtScope scope(s);
    BindBlob(s, 1, r.start);
    BindBlob(s, 2, r.end);
    sqlite3_bind_int64(s, 3, now_ms);
    sqlite3_bind_int(s, 4, r.limit);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      Entry e;
      e.key = ColumnBlob(s, 0);
      e.value = ColumnBlob(s, 1);
      int64_t enc = sqlite3_column_int64(s, 2);
      if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
      e.encoding = static_cast<ValueEncoding>(enc);
      e.version = sqlite3_column_int64(s, 3);
      out->push_back(std::move(e));
    }
    if (rc != SQLITE_DONE) return SqliteError(conn_.db(), "scan");
    return Status::Ok();
  }

  Result<std::optional<StoredRow>> Get(std::string_view key) override {
    return QueryRow(conn_, get_, key);
  }

  Result<int64_t> DataVersion() override { return snapshot_version_; }

  void End() override {
    StmtScope scope(end_);
    sqlite3_step(end_);
  }

 private:
  Connection conn_;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* end_ = nullptr;
  sqlite3_stmt* scan_ = nullptr;
  sqlite3_stmt* scan_rev_ = nullptr;
  sqlite3_stmt* version_ = nullptr;
  sqlite3_stmt* get_ = nullptr;
  sqlite3_stmt* count_ = nullptr;
  sqlite3_stmt* pages_ = nullptr;
  int64_t snapshot_version_ = 0;
};

class SqliteWriter : public Writer {
 public:
  Status Init(const std::string& path, const SqliteOptions& o) {
    KVC_RETURN_IF_ERROR(conn_.Open(path, o, /*read_only=*/false));
    KVC_ASSIGN_OR_RETURN(begin_, conn_.Prepare("begin immediate"));
    KVC_ASSIGN_OR_RETURN(version_, conn_.Prepare("select version from data_version where k = 0"));
    KVC_ASSIGN_OR_RETURN(commit_, conn_.Prepare("commit"));
    KVC_ASSIGN_OR_RETURN(rollback_, conn_.Prepare("rollback"));
    KVC_ASSIGN_OR_RETURN(savepoint_, conn_.Prepare("savepoint w"));
    KVC_ASSIGN_OR_RETURN(release_, conn_.Prepare("release w"));
    KVC_ASSIGN_OR_RETURN(rollback_to_, conn_.Prepare("rollback to w"));
    KVC_ASSIGN_OR_RETURN(get_, conn_.Prepare(kGetRowSql));
    KVC_ASSIGN_OR_RETURN(
        put_, conn_.Prepare("insert into kv (k, v, v_encoding, version, expiration_ms) "
                            "values (?1, ?2, ?3, ?4, ?5) on conflict(k) do update set v = ?2, "
                            "v_encoding = ?3, version = ?4, expiration_ms = ?5"));
    KVC_ASSIGN_OR_RETURN(del_, conn_.Prepare("delete from kv where k = ?1"));
    KVC_ASSIGN_OR_RETURN(set_version_,
                         conn_.Prepare("update data_version set version = ?1 where k = 0"));
    KVC_ASSIGN_OR_RETURN(queue_add_, conn_.Prepare("insert into queue (ts, id, data, "
                                                   "backoff_schedule, keys_if_undelivered) "
                                                   "values (?1, ?2, ?3, ?4, ?5)"));
    KVC_ASSIGN_OR_RETURN(
        delete_expired_,
        conn_.Prepare("delete from kv where expiration_ms >= 0 and expiration_ms <= ?1 "
                      "returning k"));
    KVC_ASSIGN_OR_RETURN(earliest_, conn_.Prepare("select expiration_ms from kv where "
                                                  "expiration_ms >= 0 order by expiration_ms "
                                                  "limit 1"));
    return Status::Ok();
  }

  Result<int64_t> Begin() override {
    KVC_RETURN_IF_ERROR(Step(begin_, "begin"));
    Result<int64_t> v = QueryDataVersion(conn_, version_);
    if (!v.ok()) Rollback();
    return v;
  }
  Status Commit() override {
    Status s = Step(commit_, "commit");
    if (!s.ok()) Rollback();
    return s;
  }
  void Rollback() override {
    if (!sqlite3_get_autocommit(conn_.db())) (void)Step(rollback_, "rollback");
  }
  Status Savepoint() override { return Step(savepoint_, "savepoint"); }
  Status ReleaseSavepoint() override { return Step(release_, "release"); }
  Status RollbackToSavepoint() override {
    KVC_RETURN_IF_ERROR(Step(rollback_to_, "rollback to"));
    return Step(release_, "release");
  }

  Result<std::optional<StoredRow>> Get(std::string_view key) override {
    return QueryRow(conn_, get_, key);
  }

  Status Put(std::string_view key, const StoredRow& row) override {
    StmtScope scope(put_);
    BindBlob(put_, 1, key);
    BindBlob(put_, 2, row.value);
    sqlite3_bind_int(put_, 3, static_cast<int>(row.encoding));
    sqlite3_bind_int64(put_, 4, row.version);
    sqlite3_bind_int64(put_, 5, row.expire_at_ms);
    return StepDone(put_, "put");
  }

  Status Delete(std::string_view key) override {
    StmtScope scope(del_);
    BindBlob(del_, 1, key);
    return StepDone(del_, "delete");
  }

  Status AddQueueMessage(const QueueRow& q) override {
    StmtScope scope(queue_add_);
    sqlite3_bind_int64(queue_add_, 1, q.ts);
    BindText(queue_add_, 2, q.id);
    BindBlob(queue_add_, 3, q.payload);
    const std::string schedule = BackoffScheduleJson(q.backoff_schedule);
    const std::string keys = KeysJson(q.keys_if_undelivered);
    BindText(queue_add_, 4, schedule);
    BindText(queue_add_, 5, keys);
    return StepDone(queue_add_, "enqueue");
  }

  Status SetDataVersion(int64_t version) override {
    StmtScope scope(set_version_);
    sqlite3_bind_int64(set_version_, 1, version);
    return StepDone(set_version_, "set data_version");
  }

  Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) override {
    StmtScope scope(delete_expired_);
    sqlite3_bind_int64(delete_expired_, 1, now_ms);
    std::vector<std::string> keys;
    int rc;
    while ((rc = sqlite3_step(delete_expired_)) == SQLITE_ROW) {
      keys.push_back(ColumnBlob(delete_expired_, 0));
    }
    if (rc != SQLITE_DONE) return SqliteError(conn_.db(), "delete expired");
    return keys;
  }

  Result<std::optional<int64_t>> EarliestExpiry() override {
    StmtScope scope(earliest_);
    int rc = sqlite3_step(earliest_);
    if (rc == SQLITE_DONE) return std::optional<int64_t>();
    if (rc != SQLITE_ROW) return SqliteError(conn_.db(), "earliest expiry");
    return std::optional<int64_t>(sqlite3_column_int64(earliest_, 0));
  }

 private:
  Status Step(sqlite3_stmt* s, const char* what) {
    StmtScope scope(s);
    return StepDone(s, what);
  }
  Status StepDone(sqlite3_stmt* s, const char* what) {
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
    return SqliteError(conn_.db(), what);
  }

  Connection conn_;
  sqlite3_stmt *begin_ = nullptr, *version_ = nullptr, *commit_ = nullptr, *rollback_ = nullptr;
  sqlite3_stmt *savepoint_ = nullptr, *release_ = nullptr, *rollback_to_ = nullptr;
  sqlite3_stmt *get_ = nullptr, *put_ = nullptr, *del_ = nullptr, *set_version_ = nullptr;
  sqlite3_stmt *queue_add_ = nullptr, *delete_expired_ = nullptr, *earliest_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<SqliteBackend>> SqliteBackend::Open(const std::string& path,
                                                           const SqliteOptions& options) {
  std::unique_ptr<SqliteBackend> b(new SqliteBackend(path, options));
  KVC_RETURN_IF_ERROR(b->Initialize());
  return b;
}

SqliteBackend::~SqliteBackend() = default;

Status SqliteBackend::Initialize() {
  Connection c;
  KVC_RETURN_IF_ERROR(c.Open(path_, options_, /*read_only=*/false));
  KVC_RETURN_IF_ERROR(c.Exec("pragma journal_mode=wal"));
  KVC_RETURN_IF_ERROR(c.Exec("begin immediate"));
  auto migrate = [&]() -> Status {
    KVC_RETURN_IF_ERROR(c.Exec(kCreateMigrationTable));
    KVC_RETURN_IF_ERROR(c.Exec(kCreateMetaTable));
    int64_t current = 0;
    {
      KVC_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                           c.Prepare("select version from migration_state where k = 0"));
      StmtScope scope(s);
      if (sqlite3_step(s) == SQLITE_ROW) current = sqlite3_column_int64(s, 0);
    }
    const int64_t n = static_cast<int64_t>(std::size(kMigrations));
    for (int64_t v = current + 1; v <= n; ++v) {
      KVC_RETURN_IF_ERROR(c.Exec(kMigrations[v - 1]));
      KVC_RETURN_IF_ERROR(
          c.Exec(("replace into migration_state (k, version) values (0, " + std::to_string(v) + ")")
                     .c_str()));
    }
    KVC_ASSIGN_OR_RETURN(sqlite3_stmt * get,
                         c.Prepare("select v from kvconnect_meta where k = 'database_id'"));
    StmtScope scope(get);
    if (sqlite3_step(get) == SQLITE_ROW) {
      database_id_ = reinterpret_cast<const char*>(sqlite3_column_text(get, 0));
    } else {
      database_id_ = NewUuidV4();
      KVC_ASSIGN_OR_RETURN(
          sqlite3_stmt * put,
          c.Prepare("insert into kvconnect_meta (k, v) values ('database_id', ?1)"));
      StmtScope put_scope(put);
      BindText(put, 1, database_id_);
      if (sqlite3_step(put) != SQLITE_DONE) return SqliteError(c.db(), "store database id");
    }
    return Status::Ok();
  };
  Status s = migrate();
  if (!s.ok()) {
    (void)c.Exec("rollback");
    return s;
  }
  return c.Exec("commit");
}

Result<int64_t> SqliteBackend::LoadDataVersion() {
  Connection c;
  KVC_RETURN_IF_ERROR(c.Open(path_, options_, /*read_only=*/false));
  KVC_ASSIGN_OR_RETURN(sqlite3_stmt * s, c.Prepare("select version from data_version where k = 0"));
  return QueryDataVersion(c, s);
}

Result<std::unique_ptr<Reader>> SqliteBackend::OpenReader() {
  auto r = std::make_unique<SqliteReader>();
  KVC_RETURN_IF_ERROR(r->Init(path_, options_));
  return std::unique_ptr<Reader>(std::move(r));
}

Result<std::unique_ptr<Writer>> SqliteBackend::OpenWriter() {
  auto w = std::make_unique<SqliteWriter>();
  KVC_RETURN_IF_ERROR(w->Init(path_, options_));
  return std::unique_ptr<Writer>(std::move(w));
}

}  // namespace kvc::storage
