#include "storage/sqlite/sqlite_backend.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "common/random.h"
#include "storage/queue_text.h"
#include "storage/sqlite/checkpointer.h"
#include "storage/sqlite/sqlite_util.h"
#include "storage/sqlite/wal_write_buffer.h"

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
// Our own tables; Deno ignores them. Do not change.
constexpr const char* kCreateMetaTable =
    "create table if not exists kvconnect_meta (k text primary key, v text not null)";
// The change log (storage/change_log.h), written only when continuous backup is on.
constexpr const char* kCreateChangeLogTable =
    "create table if not exists kvconnect_changelog (version integer primary key, "
    "prev_version integer not null, time_ms integer not null, record blob not null)";

// Queue delivery (queue/queue.h): per-message delivery state and dead letters, plus lookups by
// id on Deno's two queue tables (Deno's own statements ignore the extra indexes).
constexpr const char* kCreateQueueTables =
    "create table if not exists kvconnect_queue_state (id text primary key, "
    "attempts integer not null, lease text not null, last_error text not null) without rowid;"
    "create table if not exists kvconnect_queue_dead (id text primary key, "
    "dead_at integer not null, attempts integer not null, last_error text not null, "
    "data blob not null, keys_if_undelivered text not null) without rowid;"
    "create index if not exists kvconnect_queue_dead_at on kvconnect_queue_dead (dead_at);"
    "create index if not exists kvconnect_queue_id on queue (id);"
    "create index if not exists kvconnect_queue_running_id on queue_running (id);";

Status UnknownEncoding(int64_t enc) {
  return Corruption("a kv row has the unknown value encoding " + std::to_string(enc));
}

using sqlite::Stmt;

// Every SQLite failure is an I/O error to the layers above; the detail goes to the log.
constexpr const char* kErrorPrefix = "sqlite ";

// Opens a backend connection: NOMUTEX (each connection is used by one thread at a time), with
// the configured sync mode and page cache.
Status OpenConnection(sqlite::Connection& c, const std::string& path, const SqliteOptions& o,
                      bool read_only) {
  int flags = read_only ? SQLITE_OPEN_READONLY
                        : (SQLITE_OPEN_READWRITE | (o.create_if_missing ? SQLITE_OPEN_CREATE : 0));
  flags |= SQLITE_OPEN_NOMUTEX;
  const char* sync = o.sync == SyncMode::kFull     ? "FULL"
                     : o.sync == SyncMode::kNormal ? "NORMAL"
                                                   : "OFF";
  const std::string pragmas = std::string("pragma synchronous=") + sync + "; pragma cache_size=-" +
                              std::to_string(o.cache_size_kib) + ";";
  return c.Open(path, flags, o.busy_timeout_ms, pragmas, o.vfs);
}

Result<int64_t> QueryDataVersion(sqlite::Connection& c, sqlite3_stmt* stmt) {
  Stmt s(stmt);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return s.ColumnInt64(0);
  if (rc == SQLITE_DONE) return Corruption("the data_version row is missing");
  return c.Error("read data_version");
}

// Reads the columns v, v_encoding, version, expiration_ms of the current row of `s`, from
// column `first` on. Errors: Corruption (an unknown value encoding).
Result<StoredRow> ReadStoredRow(const Stmt& s, int first) {
  StoredRow row;
  row.value = s.ColumnBlob(first);
  const int64_t enc = s.ColumnInt64(first + 1);
  if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
  row.encoding = static_cast<ValueEncoding>(enc);
  row.version = s.ColumnInt64(first + 2);
  row.expire_at_ms = s.ColumnInt64(first + 3);
  return row;
}

// Runs `s` ("select v, v_encoding, version, expiration_ms from kv where k = ?1") for `key`.
// A row of `select k, v, v_encoding, version, expiration_ms` as an entry.
Result<Entry> ReadEntry(const Stmt& s) {
  KVC_ASSIGN_OR_RETURN(StoredRow row, ReadStoredRow(s, 1));
  return Entry{s.ColumnBlob(0), std::move(row.value), row.encoding, row.version, row.expire_at_ms};
}

// The same columns as a key and its stored row.
Result<KeyedRow> ReadKeyedRow(const Stmt& s) {
  KeyedRow k;
  k.key = s.ColumnBlob(0);
  KVC_ASSIGN_OR_RETURN(k.row, ReadStoredRow(s, 1));
  return k;
}

// A row of `select version, prev_version, time_ms, record` of the change log.
ChangeLogRow ReadChangeLogRow(const Stmt& s) {
  return ChangeLogRow{.version = s.ColumnInt64(0),
                      .prev_version = s.ColumnInt64(1),
                      .time_ms = s.ColumnInt64(2),
                      .bytes = s.ColumnBlob(3)};
}

Result<std::optional<StoredRow>> QueryRow(sqlite::Connection& c, sqlite3_stmt* stmt,
                                          std::string_view key) {
  Stmt s(stmt);
  s.BindBlob(1, key);
  int rc = s.Step();
  if (rc == SQLITE_DONE) return std::optional<StoredRow>();
  if (rc != SQLITE_ROW) return c.Error("get");
  KVC_ASSIGN_OR_RETURN(StoredRow row, ReadStoredRow(s, 0));
  return std::optional<StoredRow>(std::move(row));
}

constexpr const char* kGetRowSql =
    "select v, v_encoding, version, expiration_ms from kv where k = ?1";

constexpr const char* kQueueCountsSql =
    "select (select count(*) from queue where ts <= ?1), (select count(*) from queue where ts > "
    "?1), (select count(*) from queue_running), (select count(*) from kvconnect_queue_dead)";

// Runs `stmt` (kQueueCountsSql).
Result<QueueTableCounts> QueryQueueCounts(sqlite::Connection& c, sqlite3_stmt* stmt,
                                          int64_t now_ms) {
  Stmt s(stmt);
  s.BindInt64(1, now_ms);
  KVC_ASSIGN_OR_RETURN(auto n, sqlite::IntRow<4>(c, s, "queue counts"));
  return QueueTableCounts{.ready = n[0], .delayed = n[1], .leased = n[2], .dead = n[3]};
}

// The ready (or running) messages after a (ts, id) place, with their delivery state; the
// columns ReadQueued reads.
constexpr const char* kScanReadySql =
    "select q.ts, q.id, q.data, q.backoff_schedule, q.keys_if_undelivered, "
    "coalesce(s.attempts, 0), coalesce(s.lease, ''), coalesce(s.last_error, '') from queue q "
    "left join kvconnect_queue_state s on s.id = q.id where (q.ts, q.id) > (?1, ?2) "
    "order by q.ts, q.id limit ?3";
constexpr const char* kScanRunningSql =
    "select r.deadline, r.id, r.data, r.backoff_schedule, r.keys_if_undelivered, "
    "coalesce(s.attempts, 0), coalesce(s.lease, ''), coalesce(s.last_error, '') from "
    "queue_running r left join kvconnect_queue_state s on s.id = r.id where (r.deadline, r.id) "
    "> (?1, ?2) order by r.deadline, r.id limit ?3";
constexpr const char* kListDeadSql =
    "select id, dead_at, attempts, last_error, data, keys_if_undelivered from "
    "kvconnect_queue_dead where id > ?1 order by id limit ?2";

// A message from the columns ts, id, data, backoff_schedule, keys_if_undelivered, attempts,
// lease, last_error.
Result<QueuedMessage> ReadQueued(const Stmt& s) {
  QueuedMessage m;
  m.row.ts = s.ColumnInt64(0);
  m.row.id = s.ColumnText(1);
  m.row.payload = s.ColumnBlob(2);
  KVC_ASSIGN_OR_RETURN(m.row.backoff_schedule, ParseBackoffSchedule(s.ColumnText(3)));
  KVC_ASSIGN_OR_RETURN(m.row.keys_if_undelivered, ParseKeys(s.ColumnText(4)));
  m.state.attempts = static_cast<int32_t>(s.ColumnInt64(5));
  m.state.lease = s.ColumnText(6);
  m.state.last_error = s.ColumnText(7);
  return m;
}

// A dead letter from the columns of kListDeadSql.
Result<DeadLetterRow> ReadDead(const Stmt& s) {
  DeadLetterRow d;
  d.id = s.ColumnText(0);
  d.dead_at_ms = s.ColumnInt64(1);
  d.attempts = static_cast<int32_t>(s.ColumnInt64(2));
  d.last_error = s.ColumnText(3);
  d.payload = s.ColumnBlob(4);
  KVC_ASSIGN_OR_RETURN(d.keys_if_undelivered, ParseKeys(s.ColumnText(5)));
  return d;
}

class SqliteReader : public Reader {
 public:
  Status Init(const std::string& path, const SqliteOptions& o) {
    wal_path_ = path + "-wal";
    KVC_RETURN_IF_ERROR(OpenConnection(conn_, path, o, /*read_only=*/false));
    KVC_RETURN_IF_ERROR(conn_.Exec("pragma query_only=1"));
    if (o.reader_mmap_bytes > 0) {
      const std::string mmap = "pragma mmap_size=" + std::to_string(o.reader_mmap_bytes);
      KVC_RETURN_IF_ERROR(conn_.Exec(mmap.c_str()));
    }
    KVC_ASSIGN_OR_RETURN(begin_, conn_.Prepare("begin"));
    KVC_ASSIGN_OR_RETURN(end_, conn_.Prepare("commit"));
    KVC_ASSIGN_OR_RETURN(
        scan_,
        conn_.Prepare("select k, v, v_encoding, version, expiration_ms from kv where k >= ?1 "
                      "and k < ?2 and (expiration_ms < 0 or expiration_ms > ?3) order by k asc "
                      "limit ?4"));
    KVC_ASSIGN_OR_RETURN(
        scan_rev_,
        conn_.Prepare("select k, v, v_encoding, version, expiration_ms from kv where k >= ?1 "
                      "and k < ?2 and (expiration_ms < 0 or expiration_ms > ?3) order by k desc "
                      "limit ?4"));
    KVC_ASSIGN_OR_RETURN(scan_rows_,
                         conn_.Prepare("select k, v, v_encoding, version, expiration_ms from kv "
                                       "where k >= ?1 and k < ?2 order by k asc limit ?3"));
    KVC_ASSIGN_OR_RETURN(version_, conn_.Prepare("select version from data_version where k = 0"));
    KVC_ASSIGN_OR_RETURN(get_, conn_.Prepare(kGetRowSql));
    KVC_ASSIGN_OR_RETURN(count_, conn_.Prepare("select count(*) from kv"));
    KVC_ASSIGN_OR_RETURN(pages_, conn_.Prepare("select page_count * page_size from "
                                               "pragma_page_count(), pragma_page_size()"));
    KVC_ASSIGN_OR_RETURN(log_read_, conn_.Prepare("select version, prev_version, time_ms, record "
                                                  "from kvconnect_changelog where version > ?1 "
                                                  "order by version limit ?2"));
    KVC_ASSIGN_OR_RETURN(log_stats_,
                         conn_.Prepare("select count(*), min(version), max(version), "
                                       "(select time_ms from kvconnect_changelog where version "
                                       "> ?1 order by version limit 1) from kvconnect_changelog "
                                       "where version > ?1"));
    return Status::Ok();
  }

  Status ReadChangeLog(int64_t after_version, size_t max_entries,
                       std::vector<ChangeLogRow>* out) override {
    Stmt s(log_read_);
    s.BindInt64(1, after_version).BindInt64(2, static_cast<int64_t>(max_entries));
    return sqlite::AppendRows(conn_, s, "read change log", ReadChangeLogRow, out);
  }

  Result<ChangeLogStats> ChangeLogStatsAfter(int64_t after_version) override {
    Stmt s(log_stats_);
    s.BindInt64(1, after_version);
    KVC_ASSIGN_OR_RETURN(auto n, sqlite::IntRow<4>(conn_, s, "change log stats"));
    return ChangeLogStats{
        .entries = n[0], .oldest_version = n[1], .newest_version = n[2], .oldest_time_ms = n[3]};
  }

  Result<StorageStats> Stats() override {
    StorageStats st;
    for (auto [stmt, out] : {std::pair{count_, &st.key_count}, {pages_, &st.total_bytes}}) {
      Stmt s(stmt);
      if (s.Step() != SQLITE_ROW) return conn_.Error("stats");
      *out = s.ColumnInt64(0);
    }
    std::error_code ec;  // no WAL file (nothing written since the last close): 0 bytes
    const auto wal = std::filesystem::file_size(wal_path_, ec);
    st.wal_bytes = ec ? 0 : static_cast<int64_t>(wal);
    return st;
  }

  Status Begin() override {
    if (Stmt(begin_).Step() != SQLITE_DONE) return conn_.Error("begin read");
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
    Stmt s(r.reverse ? scan_rev_ : scan_);
    s.BindBlob(1, r.start).BindBlob(2, r.end).BindInt64(3, now_ms).BindInt64(4, r.limit);
    return sqlite::AppendRows(conn_, s, "scan", ReadEntry, out);
  }

  Result<std::optional<StoredRow>> Get(std::string_view key) override {
    return QueryRow(conn_, get_, key);
  }

  Status ScanRows(const ReadRange& r, std::vector<KeyedRow>* out) override {
    if (r.reverse) return Internal("ScanRows scans in ascending order only");
    if (r.start >= r.end || r.limit <= 0) return Status::Ok();
    Stmt s(scan_rows_);
    s.BindBlob(1, r.start).BindBlob(2, r.end).BindInt64(3, r.limit);
    return sqlite::AppendRows(conn_, s, "scan rows", ReadKeyedRow, out);
  }

  Result<QueueTableCounts> QueueCounts(int64_t now_ms) override {
    if (queue_counts_ == nullptr) {  // prepared on first use: few readers ever count
      KVC_ASSIGN_OR_RETURN(queue_counts_, conn_.Prepare(kQueueCountsSql));
    }
    return QueryQueueCounts(conn_, queue_counts_, now_ms);
  }

  Status ScanQueueMessages(bool running, const QueueCursor& after, size_t limit,
                           std::vector<QueuedMessage>* out) override {
    sqlite3_stmt*& stmt = queue_scan_[running ? 1 : 0];
    if (stmt == nullptr) {  // prepared on first use: only snapshots read whole tables
      KVC_ASSIGN_OR_RETURN(stmt, conn_.Prepare(running ? kScanRunningSql : kScanReadySql));
    }
    Stmt s(stmt);
    s.BindInt64(1, after.ts).BindText(2, after.id).BindInt64(3, static_cast<int64_t>(limit));
    return sqlite::AppendRows(conn_, s, "scan queue", ReadQueued, out);
  }

  Status ScanDeadLetters(std::string_view after, size_t limit,
                         std::vector<DeadLetterRow>* out) override {
    if (dead_scan_ == nullptr) {
      KVC_ASSIGN_OR_RETURN(dead_scan_, conn_.Prepare(kListDeadSql));
    }
    Stmt s(dead_scan_);
    s.BindText(1, after).BindInt64(2, static_cast<int64_t>(limit));
    return sqlite::AppendRows(conn_, s, "scan dead letters", ReadDead, out);
  }

  Result<int64_t> DataVersion() override { return snapshot_version_; }

  void End() override { Stmt(end_).Step(); }

 private:
  std::string wal_path_;
  sqlite::Connection conn_{kErrorPrefix};
  // Prepared statements, owned by conn_ (queue_counts_, queue_scan_ and dead_scan_ on first use).
  sqlite3_stmt *begin_ = nullptr, *end_ = nullptr, *scan_ = nullptr, *scan_rev_ = nullptr,
               *scan_rows_ = nullptr, *queue_counts_ = nullptr, *version_ = nullptr,
               *get_ = nullptr, *count_ = nullptr, *pages_ = nullptr, *log_read_ = nullptr,
               *log_stats_ = nullptr, *dead_scan_ = nullptr;
  sqlite3_stmt* queue_scan_[2] = {nullptr, nullptr};  // ready, running
  int64_t snapshot_version_ = 0;
};

class SqliteWriter : public Writer, public QueueStore, public ChangeLogWriter {
 public:
  QueueStore* queue_store() override { return this; }
  ChangeLogWriter* change_log() override { return this; }

  Status Init(const std::string& path, const SqliteOptions& o,
              std::shared_ptr<CheckpointCounts> counts) {
    // Only in sync FULL does SQLite sync (and so flush) the WAL at the end of every commit,
    // which the buffer's visibility argument needs (wal_write_buffer.h).
    SqliteOptions writer = o;
    if (o.sync == SyncMode::kFull && o.wal_buffer_bytes > 0) {
      KVC_ASSIGN_OR_RETURN(writer.vfs, sqlite::WalWriteBufferVfs(o.vfs, o.wal_buffer_bytes));
    }
    KVC_RETURN_IF_ERROR(OpenConnection(conn_, path, writer, /*read_only=*/false));
    if (o.checkpoint_pages > 0) {
      KVC_ASSIGN_OR_RETURN(
          checkpointer_,
          Checkpointer::Start(conn_.db(), path, o, o.checkpoint_pages,
                              std::max(o.wal_limit_pages, o.checkpoint_pages), std::move(counts)));
    }
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
    KVC_ASSIGN_OR_RETURN(overwrite_, conn_.Prepare("update kv set v = ?2, v_encoding = ?3, "
                                                   "version = ?4 where k = ?1 and "
                                                   "expiration_ms = ?5"));
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
    KVC_ASSIGN_OR_RETURN(log_add_, conn_.Prepare("insert into kvconnect_changelog (version, "
                                                 "prev_version, time_ms, record) values (?1, "
                                                 "?2, ?3, ?4)"));
    KVC_ASSIGN_OR_RETURN(log_prune_,
                         conn_.Prepare("delete from kvconnect_changelog where version <= ?1"));
    return PrepareQueue();
  }

  Result<std::vector<QueuedMessage>> QueueDue(int64_t now_ms, size_t limit) override {
    Stmt s(q_due_);
    s.BindInt64(1, now_ms).BindInt64(2, static_cast<int64_t>(limit));
    return sqlite::AllRows<QueuedMessage>(conn_, s, "queue due", ReadQueued);
  }

  Result<std::optional<int64_t>> QueueEarliest(bool running) override {
    Stmt s(running ? q_earliest_running_ : q_earliest_ready_);
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<int64_t>();
    if (rc != SQLITE_ROW) return conn_.Error("queue earliest");
    return std::optional<int64_t>(s.ColumnInt64(0));
  }

  Status QueueLease(const QueueRow& row, int64_t deadline_ms,
                    const QueueDeliveryState& state) override {
    {
      Stmt s(q_del_ready_);
      s.BindText(1, row.id);
      KVC_RETURN_IF_ERROR(StepDone(s, "queue lease"));
    }
    KVC_RETURN_IF_ERROR(InsertQueueRow(q_add_running_, row, deadline_ms, "queue lease"));
    return PutState(row.id, state);
  }

  Result<std::optional<QueuedMessage>> QueueGetRunning(std::string_view id) override {
    Stmt s(q_get_running_);
    s.BindText(1, id);
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<QueuedMessage>();
    if (rc != SQLITE_ROW) return conn_.Error("queue get running");
    KVC_ASSIGN_OR_RETURN(QueuedMessage m, ReadQueued(s));  // its ts is the deadline
    return std::optional<QueuedMessage>(std::move(m));
  }

  Result<std::vector<std::string>> QueueRunningDue(int64_t now_ms, size_t limit) override {
    Stmt s(q_running_due_);
    s.BindInt64(1, now_ms).BindInt64(2, static_cast<int64_t>(limit));
    return sqlite::AllRows<std::string>(conn_, s, "queue running due",
                                        [](const Stmt& row) { return row.ColumnText(0); });
  }

  Status QueueSetDeadline(std::string_view id, int64_t deadline_ms) override {
    Stmt s(q_set_deadline_);
    s.BindText(1, id).BindInt64(2, deadline_ms);
    return StepDone(s, "queue extend");
  }

  Status QueueRemoveRunning(std::string_view id) override {
    {
      Stmt s(q_del_running_);
      s.BindText(1, id);
      KVC_RETURN_IF_ERROR(StepDone(s, "queue remove"));
    }
    Stmt s(q_del_state_);
    s.BindText(1, id);
    return StepDone(s, "queue remove state");
  }

  Status QueueRequeue(const QueueRow& row, const QueueDeliveryState& state) override {
    {
      Stmt s(q_del_running_);
      s.BindText(1, row.id);
      KVC_RETURN_IF_ERROR(StepDone(s, "queue requeue"));
    }
    KVC_RETURN_IF_ERROR(InsertQueueRow(queue_add_, row, row.ts, "queue requeue"));
    return PutState(row.id, state);
  }

  Status QueueAddDead(const DeadLetterRow& d) override {
    const std::string keys = KeysJson(d.keys_if_undelivered);
    {
      Stmt s(q_add_dead_);
      s.BindText(1, d.id).BindInt64(2, d.dead_at_ms).BindInt64(3, d.attempts);
      s.BindText(4, d.last_error).BindBlob(5, d.payload).BindText(6, keys);
      KVC_RETURN_IF_ERROR(StepDone(s, "queue dead letter"));
    }
    Stmt s(q_del_state_);
    s.BindText(1, d.id);
    return StepDone(s, "queue remove state");
  }

  Result<std::vector<DeadLetterRow>> QueueListDead(std::string_view after, size_t limit) override {
    Stmt s(q_list_dead_);
    s.BindText(1, after).BindInt64(2, static_cast<int64_t>(limit));
    return sqlite::AllRows<DeadLetterRow>(conn_, s, "queue list dead letters", ReadDead);
  }

  Result<std::optional<DeadLetterRow>> QueueTakeDead(std::string_view id) override {
    std::optional<DeadLetterRow> found;
    {
      Stmt s(q_get_dead_);
      s.BindText(1, id);
      const int rc = s.Step();
      if (rc == SQLITE_ROW) {
        KVC_ASSIGN_OR_RETURN(DeadLetterRow d, ReadDead(s));
        found = std::move(d);
      } else if (rc != SQLITE_DONE) {
        return conn_.Error("queue get dead letter");
      }
    }
    if (!found) return found;
    Stmt s(q_del_dead_);
    s.BindText(1, id);
    KVC_RETURN_IF_ERROR(StepDone(s, "queue delete dead letter"));
    return found;
  }

  Result<int64_t> QueuePruneDead(int64_t before_ms) override {
    Stmt s(q_prune_dead_);
    s.BindInt64(1, before_ms);
    KVC_RETURN_IF_ERROR(StepDone(s, "queue prune dead letters"));
    const int64_t n = sqlite3_changes64(conn_.db());
    // Delivery state of messages a Deno process took and finished itself.
    Stmt orphans(q_prune_state_);
    KVC_RETURN_IF_ERROR(StepDone(orphans, "queue prune delivery state"));
    return n;
  }

  Result<QueueTableCounts> QueueCounts(int64_t now_ms) override {
    return QueryQueueCounts(conn_, q_counts_, now_ms);
  }

  Status AppendChangeLog(const ChangeLogRow& row) override {
    Stmt s(log_add_);
    s.BindInt64(1, row.version).BindInt64(2, row.prev_version).BindInt64(3, row.time_ms);
    s.BindBlob(4, row.bytes);
    return StepDone(s, "append to change log");
  }

  Status PruneChangeLog(int64_t through_version) override {
    Stmt s(log_prune_);
    s.BindInt64(1, through_version);
    return StepDone(s, "prune change log");
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

  // The usual put, an existing key with its expiry unchanged, is an update that does not name
  // expiration_ms: SQLite rewrites an index entry whenever the statement assigns its column,
  // even to the value it holds, so the upsert alone also dirtied a page of kv_expiration_ms_idx
  // and about doubled the WAL pages a commit writes (random overwrites: 1.9 pages each -> 1.0).
  // A new key or a changed expiry takes the upsert.
  Status Put(std::string_view key, const StoredRow& row) override {
    {
      Stmt same(overwrite_);
      BindRow(same, key, row);
      KVC_RETURN_IF_ERROR(StepDone(same, "put"));
    }
    if (sqlite3_changes64(conn_.db()) > 0) return Status::Ok();
    Stmt s(put_);
    BindRow(s, key, row);
    return StepDone(s, "put");
  }

  Status Delete(std::string_view key) override {
    Stmt s(del_);
    s.BindBlob(1, key);
    return StepDone(s, "delete");
  }

  Status AddQueueMessage(const QueueRow& q) override {
    const std::string schedule = BackoffScheduleJson(q.backoff_schedule);
    const std::string keys = KeysJson(q.keys_if_undelivered);
    Stmt s(queue_add_);
    s.BindInt64(1, q.ts).BindText(2, q.id).BindBlob(3, q.payload);
    s.BindText(4, schedule).BindText(5, keys);
    return StepDone(s, "enqueue");
  }

  Status SetDataVersion(int64_t version) override {
    Stmt s(set_version_);
    s.BindInt64(1, version);
    return StepDone(s, "set data_version");
  }

  Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) override {
    Stmt s(delete_expired_);
    s.BindInt64(1, now_ms);
    return sqlite::AllRows<std::string>(conn_, s, "delete expired",
                                        [](const Stmt& row) { return row.ColumnBlob(0); });
  }

  Result<std::optional<int64_t>> EarliestExpiry() override {
    Stmt s(earliest_);
    int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<int64_t>();
    if (rc != SQLITE_ROW) return conn_.Error("earliest expiry");
    return std::optional<int64_t>(s.ColumnInt64(0));
  }

 private:
  Status PrepareQueue() {
    KVC_ASSIGN_OR_RETURN(
        q_due_, conn_.Prepare("select q.ts, q.id, q.data, q.backoff_schedule, "
                              "q.keys_if_undelivered, coalesce(s.attempts, 0), "
                              "coalesce(s.lease, ''), coalesce(s.last_error, '') from queue q "
                              "left join kvconnect_queue_state s on s.id = q.id where q.ts <= ?1 "
                              "order by q.ts, q.id limit ?2"));
    KVC_ASSIGN_OR_RETURN(q_earliest_ready_,
                         conn_.Prepare("select ts from queue order by ts limit 1"));
    KVC_ASSIGN_OR_RETURN(q_earliest_running_,
                         conn_.Prepare("select deadline from queue_running order by deadline "
                                       "limit 1"));
    KVC_ASSIGN_OR_RETURN(q_del_ready_, conn_.Prepare("delete from queue where id = ?1"));
    KVC_ASSIGN_OR_RETURN(q_add_running_,
                         conn_.Prepare("insert into queue_running (deadline, id, data, "
                                       "backoff_schedule, keys_if_undelivered) values (?1, ?2, "
                                       "?3, ?4, ?5)"));
    KVC_ASSIGN_OR_RETURN(q_put_state_,
                         conn_.Prepare("insert into kvconnect_queue_state (id, attempts, lease, "
                                       "last_error) values (?1, ?2, ?3, ?4) on conflict(id) do "
                                       "update set attempts = ?2, lease = ?3, last_error = ?4"));
    KVC_ASSIGN_OR_RETURN(
        q_get_running_,
        conn_.Prepare("select r.deadline, r.id, r.data, r.backoff_schedule, r.keys_if_undelivered, "
                      "coalesce(s.attempts, 0), coalesce(s.lease, ''), "
                      "coalesce(s.last_error, '') from queue_running r left join "
                      "kvconnect_queue_state s on s.id = r.id where r.id = ?1 limit 1"));
    KVC_ASSIGN_OR_RETURN(q_running_due_,
                         conn_.Prepare("select id from queue_running where deadline <= ?1 "
                                       "order by deadline limit ?2"));
    KVC_ASSIGN_OR_RETURN(q_set_deadline_,
                         conn_.Prepare("update queue_running set deadline = ?2 where id = ?1"));
    KVC_ASSIGN_OR_RETURN(q_del_running_, conn_.Prepare("delete from queue_running where id = ?1"));
    KVC_ASSIGN_OR_RETURN(q_del_state_,
                         conn_.Prepare("delete from kvconnect_queue_state where id = ?1"));
    KVC_ASSIGN_OR_RETURN(q_add_dead_,
                         conn_.Prepare("insert or replace into kvconnect_queue_dead (id, "
                                       "dead_at, attempts, last_error, data, "
                                       "keys_if_undelivered) values (?1, ?2, ?3, ?4, ?5, ?6)"));
    KVC_ASSIGN_OR_RETURN(q_list_dead_, conn_.Prepare(kListDeadSql));
    KVC_ASSIGN_OR_RETURN(q_get_dead_,
                         conn_.Prepare("select id, dead_at, attempts, last_error, data, "
                                       "keys_if_undelivered from kvconnect_queue_dead where id = "
                                       "?1"));
    KVC_ASSIGN_OR_RETURN(q_del_dead_,
                         conn_.Prepare("delete from kvconnect_queue_dead where id = ?1"));
    KVC_ASSIGN_OR_RETURN(q_prune_dead_,
                         conn_.Prepare("delete from kvconnect_queue_dead where dead_at < ?1"));
    KVC_ASSIGN_OR_RETURN(q_prune_state_,
                         conn_.Prepare("delete from kvconnect_queue_state where id not in "
                                       "(select id from queue) and id not in (select id from "
                                       "queue_running)"));
    KVC_ASSIGN_OR_RETURN(q_counts_, conn_.Prepare(kQueueCountsSql));
    return Status::Ok();
  }

  Status InsertQueueRow(sqlite3_stmt* stmt, const QueueRow& row, int64_t ts, const char* what) {
    const std::string schedule = BackoffScheduleJson(row.backoff_schedule);
    const std::string keys = KeysJson(row.keys_if_undelivered);
    Stmt s(stmt);
    s.BindInt64(1, ts).BindText(2, row.id).BindBlob(3, row.payload);
    s.BindText(4, schedule).BindText(5, keys);
    return StepDone(s, what);
  }

  Status PutState(std::string_view id, const QueueDeliveryState& st) {
    Stmt s(q_put_state_);
    s.BindText(1, id).BindInt64(2, st.attempts).BindText(3, st.lease).BindText(4, st.last_error);
    return StepDone(s, "queue delivery state");
  }

  Status Step(sqlite3_stmt* stmt, const char* what) {
    Stmt s(stmt);
    return StepDone(s, what);
  }
  // Steps `s` once; a returned row counts as success.
  Status StepDone(Stmt& s, const char* what) {
    int rc = s.Step();
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
    return conn_.Error(what);
  }

  sqlite::Connection conn_{kErrorPrefix};
  sqlite3_stmt *begin_ = nullptr, *version_ = nullptr, *commit_ = nullptr, *rollback_ = nullptr;
  sqlite3_stmt *savepoint_ = nullptr, *release_ = nullptr, *rollback_to_ = nullptr;
  // ?1 key, ?2 value, ?3 encoding, ?4 version, ?5 expiry: the parameters of put_ and overwrite_.
  static void BindRow(Stmt& s, std::string_view key, const StoredRow& row) {
    s.BindBlob(1, key).BindBlob(2, row.value).BindInt64(3, static_cast<int64_t>(row.encoding));
    s.BindInt64(4, row.version).BindInt64(5, row.expire_at_ms);
  }

  sqlite3_stmt *get_ = nullptr, *put_ = nullptr, *overwrite_ = nullptr, *del_ = nullptr,
               *set_version_ = nullptr;
  sqlite3_stmt *queue_add_ = nullptr, *delete_expired_ = nullptr, *earliest_ = nullptr;
  sqlite3_stmt *log_add_ = nullptr, *log_prune_ = nullptr;
  sqlite3_stmt *q_due_ = nullptr, *q_earliest_ready_ = nullptr, *q_earliest_running_ = nullptr;
  sqlite3_stmt *q_del_ready_ = nullptr, *q_add_running_ = nullptr, *q_put_state_ = nullptr;
  sqlite3_stmt *q_get_running_ = nullptr, *q_running_due_ = nullptr, *q_set_deadline_ = nullptr;
  sqlite3_stmt *q_del_running_ = nullptr, *q_del_state_ = nullptr, *q_add_dead_ = nullptr;
  sqlite3_stmt *q_list_dead_ = nullptr, *q_get_dead_ = nullptr, *q_del_dead_ = nullptr;
  sqlite3_stmt *q_prune_dead_ = nullptr, *q_prune_state_ = nullptr, *q_counts_ = nullptr;
  // Hooked into conn_; declared after it, so it is destroyed (unhooked, joined) first.
  std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace

Result<std::unique_ptr<SqliteBackend>> SqliteBackend::Open(const std::string& path,
                                                           const SqliteOptions& options) {
  std::unique_ptr<SqliteBackend> b(new SqliteBackend(path, options));
  KVC_RETURN_IF_ERROR(b->Initialize());
  return b;
}

SqliteBackend::SqliteBackend(std::string path, SqliteOptions options)
    : path_(std::move(path)),
      options_(std::move(options)),
      checkpoint_counts_(std::make_shared<CheckpointCounts>()) {}

SqliteBackend::~SqliteBackend() = default;

Status SqliteBackend::Initialize() {
  sqlite::Connection c(kErrorPrefix);
  KVC_RETURN_IF_ERROR(OpenConnection(c, path_, options_, /*read_only=*/false));
  KVC_RETURN_IF_ERROR(c.Exec("pragma journal_mode=wal"));
  KVC_RETURN_IF_ERROR(c.Exec("begin immediate"));
  auto migrate = [&]() -> Status {
    KVC_RETURN_IF_ERROR(c.Exec(kCreateMigrationTable));
    KVC_RETURN_IF_ERROR(c.Exec(kCreateMetaTable));
    KVC_RETURN_IF_ERROR(c.Exec(kCreateChangeLogTable));
    int64_t current = 0;
    {
      KVC_ASSIGN_OR_RETURN(Stmt s,
                           c.PrepareOnce("select version from migration_state where k = 0"));
      if (s.Step() == SQLITE_ROW) current = s.ColumnInt64(0);
    }
    const int64_t n = static_cast<int64_t>(std::size(kMigrations));
    for (int64_t v = current + 1; v <= n; ++v) {
      KVC_RETURN_IF_ERROR(c.Exec(kMigrations[v - 1]));
      KVC_RETURN_IF_ERROR(
          c.Exec(("replace into migration_state (k, version) values (0, " + std::to_string(v) + ")")
                     .c_str()));
    }
    KVC_RETURN_IF_ERROR(c.Exec(kCreateQueueTables));
    KVC_ASSIGN_OR_RETURN(Stmt get,
                         c.PrepareOnce("select v from kvconnect_meta where k = 'database_id'"));
    if (get.Step() == SQLITE_ROW) {
      database_id_ = get.ColumnText(0);
    } else {
      database_id_ = NewUuidV4();
      KVC_ASSIGN_OR_RETURN(
          Stmt put, c.PrepareOnce("insert into kvconnect_meta (k, v) values ('database_id', ?1)"));
      put.BindText(1, database_id_);
      if (put.Step() != SQLITE_DONE) return c.Error("store database id");
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
  sqlite::Connection c(kErrorPrefix);
  KVC_RETURN_IF_ERROR(OpenConnection(c, path_, options_, /*read_only=*/false));
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
  KVC_RETURN_IF_ERROR(w->Init(path_, options_, checkpoint_counts_));
  return std::unique_ptr<Writer>(std::move(w));
}

}  // namespace kvc::storage
