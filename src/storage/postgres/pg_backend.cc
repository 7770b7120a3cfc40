#include "storage/postgres/pg_backend.h"

#include <libpq-fe.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/thread_name.h"
#include "storage/change_log.h"
#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_queue.h"
#include "storage/postgres/pg_schema.h"

namespace kvc::storage {
namespace {

using pg::Connection;
using pg::Params;
using pg::PgResult;
using pg::Statement;

constexpr int64_t kTimelineStep = int64_t{1} << 32;

Status UnknownEncoding(int64_t enc) {
  return Corruption("a kv row has the unknown value encoding " + std::to_string(enc));
}

// The statements every connection kind uses, by name.
void DefineCommon(Connection& c) {
  c.Define("begin_ro", "begin isolation level repeatable read read only");
  c.Define("begin", "begin");
  c.Define("commit", "commit");
  c.Define("version", "select version from kvc_data_version where db = $1::uuid");
  c.Define("get",
           "select v, v_encoding, version, expiration_ms from kvc_kv where db = $1::uuid and "
           "k = $2");
  c.Define("scan",
           "select k, v, v_encoding, version, expiration_ms from kvc_kv where db = $1::uuid and "
           "k >= $2 and k < $3 and (expiration_ms < 0 or expiration_ms > $4) order by k limit "
           "$5");
  c.Define("scan_rev",
           "select k, v, v_encoding, version, expiration_ms from kvc_kv where db = $1::uuid and "
           "k >= $2 and k < $3 and (expiration_ms < 0 or expiration_ms > $4) order by k desc limit "
           "$5");
}

Result<std::optional<StoredRow>> RowOf(const PgResult& r) {
  if (r.rows() == 0) return std::optional<StoredRow>();
  StoredRow row;
  row.value = r.Bytes(0, 0);
  const int64_t enc = r.Int(0, 1);
  if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
  row.encoding = static_cast<ValueEncoding>(enc);
  row.version = r.Int(0, 2);
  row.expire_at_ms = r.Int(0, 3);
  return std::optional<StoredRow>(std::move(row));
}

// Rows whose columns from `col` on are key, value, encoding, version, expiry; a row with a NULL key
// (a joined query's "no row in the range") is skipped.
Status AppendEntries(const PgResult& r, std::vector<Entry>* out, int col = 0) {
  for (int i = 0; i < r.rows(); ++i) {
    if (r.IsNull(i, col)) continue;
    Entry e;
    e.key = r.Bytes(i, col);
    e.value = r.Bytes(i, col + 1);
    const int64_t enc = r.Int(i, col + 2);
    if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
    e.encoding = static_cast<ValueEncoding>(enc);
    e.version = r.Int(i, col + 3);
    e.expire_at_ms = r.Int(i, col + 4);
    out->push_back(std::move(e));
  }
  return Status::Ok();
}

Statement Stmt(const char* name, Params p) { return Statement{name, std::move(p)}; }

class PgReader : public Reader {
 public:
  explicit PgReader(const PgBackendOptions& o)
      : db_(o.database_id),
        use_replica_(o.use_replica),
        primary_(o.conninfo, {{"application_name", o.tuning.application_name}}, "postgres read"),
        replica_(o.read_conninfo, {{"application_name", o.tuning.application_name}},
                 "postgres standby read") {
    for (Connection* c : {&primary_, &replica_}) {
      DefineCommon(*c);
      c->Define("stats",
                "select count(*), coalesce(sum(octet_length(k) + octet_length(v)), 0)::bigint "
                "from kvc_kv where db = $1::uuid");
      for (const char* dir : {"", " desc"}) {
        c->Define(std::string("scan_alone") + (*dir ? "_rev" : ""),
                  std::string("select d.version, s.k, s.v, s.v_encoding, s.version, "
                              "s.expiration_ms from kvc_data_version d left join lateral (select "
                              "k, v, v_encoding, version, expiration_ms from kvc_kv where db = "
                              "d.db and k >= $2 and k < $3 and "
                              "(expiration_ms < 0 or expiration_ms > $4) order by k") +
                      dir + " limit $5) s on true where d.db = $1::uuid order by s.k" + dir);
      }
      c->Define("get_alone",
                "select d.version, s.k, s.v, s.v_encoding, s.version, s.expiration_ms from "
                "kvc_data_version d left join kvc_kv s on s.db = d.db and s.k = any($2::bytea[]) "
                "where d.db = $1::uuid");
      c->Define("scan_rows",
                "select k, v, v_encoding, version, expiration_ms from kvc_kv where db = $1::uuid "
                "and k >= $2 and k < $3 order by k limit $4");
      c->Define("queue_counts",
                "select (select count(*) from kvc_queue where db = $1::uuid and ts <= $2), "
                "(select count(*) from kvc_queue where db = $1::uuid and ts > $2), (select "
                "count(*) from kvc_queue_running where db = $1::uuid), (select count(*) from "
                "kvc_queue_dead where db = $1::uuid)");
      pg::DefineQueueScans(*c);
      c->Define("log_read",
                "select version, prev_version, time_ms, record from kvc_changes where db = "
                "$1::uuid and version > $2 order by version limit $3");
      c->Define("log_stats",
                "select count(*), coalesce(min(version), 0), coalesce(max(version), 0), "
                "coalesce(min(time_ms), 0) from kvc_changes where db = $1::uuid and version > "
                "$2");
    }
    has_replica_ = !o.read_conninfo.empty() && use_replica_ != nullptr;
  }

  bool snapshot_is_strong() const override { return conn_ != &replica_; }

  // One statement in autocommit for all the keys (one snapshot).
  Result<int64_t> GetAlone(const std::vector<std::string>& keys,
                           std::vector<std::optional<StoredRow>>* rows) override {
    conn_ = has_replica_ && use_replica_->load() ? &replica_ : &primary_;
    conn_->CloseIfEndedByServer();
    KVC_ASSIGN_OR_RETURN(PgResult res,
                         conn_->Run("get_alone", Params().Text(db_).BytesArray(keys)));
    if (res.rows() == 0) return NotFound("the database is gone from PostgreSQL");
    std::unordered_map<std::string, StoredRow> found;
    for (int i = 0; i < res.rows(); ++i) {
      if (res.IsNull(i, 1)) continue;
      StoredRow row;
      row.value = res.Bytes(i, 2);
      const int64_t enc = res.Int(i, 3);
      if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
      row.encoding = static_cast<ValueEncoding>(enc);
      row.version = res.Int(i, 4);
      row.expire_at_ms = res.Int(i, 5);
      found.emplace(res.Bytes(i, 1), std::move(row));
    }
    rows->clear();
    for (const std::string& k : keys) {
      auto it = found.find(k);
      rows->push_back(it == found.end() ? std::nullopt : std::optional<StoredRow>(it->second));
    }
    return res.Int(0, 0);
  }

  // One statement in autocommit: a single statement sees one snapshot.
  Result<int64_t> ScanAlone(const ReadRange& r, int64_t now_ms, std::vector<Entry>* out) override {
    conn_ = has_replica_ && use_replica_->load() ? &replica_ : &primary_;
    conn_->CloseIfEndedByServer();
    Params p;
    p.Text(db_).Bytes(r.start).Bytes(r.end).Int64(now_ms).Int64(std::max(r.limit, 0));
    KVC_ASSIGN_OR_RETURN(PgResult res, conn_->Run(r.reverse ? "scan_alone_rev" : "scan_alone", p));
    if (res.rows() == 0) return NotFound("the database is gone from PostgreSQL");
    if (r.start < r.end && r.limit > 0) {
      KVC_RETURN_IF_ERROR(AppendEntries(res, out, /*col=*/1));  // column 0: the version
    }
    return res.Int(0, 0);
  }

  Status Begin() override {
    pending_begin_ = true;
    conn_ = has_replica_ && use_replica_->load() ? &replica_ : &primary_;
    conn_->CloseIfEndedByServer();
    return Status::Ok();
  }

  Status Scan(const ReadRange& r, int64_t now_ms, std::vector<Entry>* out) override {
    if (r.start >= r.end || r.limit <= 0) return Status::Ok();
    Params p;
    p.Text(db_).Bytes(r.start).Bytes(r.end).Int64(now_ms).Int64(r.limit);
    KVC_ASSIGN_OR_RETURN(PgResult res,
                         RunInSnapshot(r.reverse ? "scan_rev" : "scan", std::move(p)));
    return AppendEntries(res, out);
  }

  Result<std::optional<StoredRow>> Get(std::string_view key) override {
    Params p;
    p.Text(db_).Bytes(key);
    KVC_ASSIGN_OR_RETURN(PgResult res, RunInSnapshot("get", std::move(p)));
    return RowOf(res);
  }

  Status ScanRows(const ReadRange& r, std::vector<KeyedRow>* out) override {
    if (r.start >= r.end || r.limit <= 0) return Status::Ok();
    Params p;
    p.Text(db_).Bytes(r.start).Bytes(r.end).Int64(r.limit);
    KVC_ASSIGN_OR_RETURN(PgResult res, RunInSnapshot("scan_rows", std::move(p)));
    for (int i = 0; i < res.rows(); ++i) {
      KeyedRow k;
      k.key = res.Bytes(i, 0);
      k.row.value = res.Bytes(i, 1);
      const int64_t enc = res.Int(i, 2);
      if (!IsKnownEncoding(enc)) return UnknownEncoding(enc);
      k.row.encoding = static_cast<ValueEncoding>(enc);
      k.row.version = res.Int(i, 3);
      k.row.expire_at_ms = res.Int(i, 4);
      out->push_back(std::move(k));
    }
    return Status::Ok();
  }

  Result<QueueTableCounts> QueueCounts(int64_t now_ms) override {
    KVC_ASSIGN_OR_RETURN(PgResult r,
                         RunInSnapshot("queue_counts", Params().Text(db_).Int64(now_ms)));
    return QueueTableCounts{r.Int(0, 0), r.Int(0, 1), r.Int(0, 2), r.Int(0, 3)};
  }

  Status ScanQueueMessages(bool running, const QueueCursor& after, size_t limit,
                           std::vector<QueuedMessage>* out) override {
    Params p;
    p.Text(db_).Int64(after.ts).Text(after.id).Int64(static_cast<int64_t>(limit));
    KVC_ASSIGN_OR_RETURN(PgResult r,
                         RunInSnapshot(running ? "q_scan_running" : "q_scan_ready", std::move(p)));
    return pg::AppendQueued(r, out);
  }

  Status ScanDeadLetters(std::string_view after, size_t limit,
                         std::vector<DeadLetterRow>* out) override {
    Params p;
    p.Text(db_).Text(after).Int64(static_cast<int64_t>(limit));
    KVC_ASSIGN_OR_RETURN(PgResult r, RunInSnapshot("q_scan_dead", std::move(p)));
    return pg::AppendDead(r, out);
  }

  Result<int64_t> DataVersion() override {
    if (pending_begin_) KVC_RETURN_IF_ERROR(StartSnapshot(nullptr));
    return version_;
  }

  void End() override {
    pending_begin_ = false;
    if (!in_txn_) return;
    in_txn_ = false;
    // Nothing to wait for: the next statement collects the result.
    const Status s = conn_->SendAndForget("commit");
    conn_->set_pinned(false);
    if (!s.ok()) conn_->Close();
  }

  Result<StorageStats> Stats() override {
    KVC_ASSIGN_OR_RETURN(PgResult r, conn_->Run("stats", Params().Text(db_)));
    StorageStats st;
    st.key_count = r.Int(0, 0);
    st.total_bytes = r.Int(0, 1);
    return st;
  }

  Status ReadChangeLog(int64_t after_version, size_t max_entries,
                       std::vector<ChangeLogRow>* out) override {
    KVC_ASSIGN_OR_RETURN(
        PgResult r,
        conn_->Run(
            "log_read",
            Params().Text(db_).Int64(after_version).Int64(static_cast<int64_t>(max_entries))));
    for (int i = 0; i < r.rows(); ++i) {
      out->push_back(ChangeLogRow{r.Int(i, 0), r.Int(i, 1), r.Int(i, 2), r.Bytes(i, 3)});
    }
    return Status::Ok();
  }

  Result<ChangeLogStats> ChangeLogStatsAfter(int64_t after_version) override {
    KVC_ASSIGN_OR_RETURN(PgResult r,
                         conn_->Run("log_stats", Params().Text(db_).Int64(after_version)));
    return ChangeLogStats{r.Int(0, 0), r.Int(0, 1), r.Int(0, 2), r.Int(0, 3)};
  }

 private:
  // BEGIN, the version and (if given) the first statement, in one round trip.
  Status StartSnapshot(Statement* first, PgResult* first_result = nullptr) {
    pending_begin_ = false;
    std::vector<Statement> stmts;
    stmts.push_back(Stmt("begin_ro", Params()));
    stmts.push_back(Stmt("version", Params().Text(db_)));
    if (first) stmts.push_back(std::move(*first));
    auto r = conn_->Pipeline(stmts);
    if (!r.ok()) {
      conn_->RollbackQuietly();
      return r.status();
    }
    in_txn_ = true;
    conn_->set_pinned(true);  // the rest of this read must see the same snapshot or fail
    if ((*r)[1].rows() == 0) return NotFound("the database is gone from PostgreSQL");
    version_ = (*r)[1].Int(0, 0);
    if (first_result) *first_result = std::move((*r)[2]);
    return Status::Ok();
  }

  Result<PgResult> RunInSnapshot(const char* name, Params p) {
    if (pending_begin_) {
      Statement s = Stmt(name, std::move(p));
      PgResult out;
      KVC_RETURN_IF_ERROR(StartSnapshot(&s, &out));
      return out;
    }
    return conn_->Run(name, p);
  }

  const std::string db_;
  const std::shared_ptr<std::atomic<bool>> use_replica_;
  Connection primary_;
  Connection replica_;
  Connection* conn_ = &primary_;  // the connection of the current snapshot
  bool has_replica_ = false;
  bool pending_begin_ = false;
  bool in_txn_ = false;
  int64_t version_ = 0;
};

class PgWriter : public Writer, public QueueStore, public ChangeLogWriter {
 public:
  QueueStore* queue_store() override { return this; }
  ChangeLogWriter* change_log() override { return this; }

  explicit PgWriter(const PgBackendOptions& o)
      : o_(o),
        db_(o.database_id),
        channel_("kvc_" + pg::UuidHex(o.database_id)),
        conn_(o.conninfo,
              {{"target_session_attrs", "read-write"},
               {"application_name", o.tuning.application_name}},
              "postgres write"),
        queue_(conn_, db_) {
    DefineCommon(conn_);
    conn_.Define("lock_version",
                 "select version, timeline from kvc_data_version where db = $1::uuid for update");
    conn_.Define("set_version",
                 "update kvc_data_version set version = $2, timeline = $3 where db = $1::uuid");
    conn_.Define("notify", "select pg_notify($1, $2)");
    conn_.Define("xid", "select pg_current_xact_id()::text");
    conn_.Define("put_many",
                 "insert into kvc_kv (db, k, v, v_encoding, version, expiration_ms) select "
                 "$1::uuid, k, v, e, ver, x from unnest($2::bytea[], $3::bytea[], $4::int4[], "
                 "$5::int8[], $6::int8[]) as t(k, v, e, ver, x) on conflict (db, k) do update set "
                 "v = excluded.v, v_encoding = excluded.v_encoding, version = excluded.version, "
                 "expiration_ms = excluded.expiration_ms");
    conn_.Define("delete_many", "delete from kvc_kv where db = $1::uuid and k = any($2::bytea[])");
    conn_.Define("log_add_many",
                 "insert into kvc_changes (db, version, prev_version, time_ms, record) select "
                 "$1::uuid, a, b, c, d from unnest($2::int8[], $3::int8[], $4::int8[], "
                 "$5::bytea[]) as t(a, b, c, d)");
    conn_.Define("log_prune", "delete from kvc_changes where db = $1::uuid and time_ms < $2");
    conn_.Define("try_leader", "select pg_try_advisory_lock(" + std::to_string(pg::kLockExpiry) +
                                   ", hashtext($1))");
    conn_.Define("delete_expired",
                 "delete from kvc_kv where db = $1::uuid and expiration_ms >= 0 and "
                 "expiration_ms <= $2 returning k");
    conn_.Define("earliest",
                 "select expiration_ms from kvc_kv where db = $1::uuid and expiration_ms >= 0 "
                 "order by expiration_ms limit 1");
    conn_.Define("timeline",
                 "select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)"
                 "::bigint");
    queue_.Define();
  }

  Result<int64_t> Begin() override {
    ResetTxn();
    // A session PostgreSQL ended while we were idle is re-made here, where what it held (the
    // expiry lock, the timeline seen) is forgotten; inside the transaction it is never re-made.
    conn_.CloseIfEndedByServer();
    if (!conn_.connected()) {
      timeline_ = -1;
      leader_ = false;
    }
    if (timeline_ < 0) {
      auto t = conn_.Run("timeline", Params());
      if (!t.ok()) return Broken(t.status());
      timeline_ = t->Int(0, 0);
    }
    auto r = conn_.Pipeline(
        {Stmt("begin", Params()), Stmt("lock_version", Params().Text(db_)), Stmt("xid", Params())});
    if (!r.ok()) return Broken(r.status());
    xid_ = (*r)[2].rows() == 1 ? (*r)[2].Bytes(0, 0) : "";
    if ((*r)[1].rows() == 0) {
      conn_.RollbackQuietly();
      return NotFound("the database is gone from PostgreSQL");
    }
    conn_.set_pinned(true);  // until Commit or Rollback (ResetTxn)
    int64_t version = (*r)[1].Int(0, 0);
    const int64_t row_timeline = (*r)[1].Int(0, 1);
    if (row_timeline > 0 && row_timeline < timeline_) {
      // A failover: the old primary may have issued versions that never reached us.
      version = (version / kTimelineStep + 1) * kTimelineStep;
      spdlog::warn("database {}: PostgreSQL timeline {} -> {}; versions continue at {}", db_,
                   row_timeline, timeline_, version);
    }
    return version;
  }

  Result<std::optional<StoredRow>> Get(std::string_view key) override {
    auto it = overlay_.find(std::string(key));
    if (it != overlay_.end()) return it->second;
    KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("get", Params().Text(db_).Bytes(key)));
    return RowOf(r);
  }

  // Kept in the overlay; the final state of every key reaches PostgreSQL in two statements at
  // the next Flush or Commit (KvStatements).
  Status Put(std::string_view key, const StoredRow& row) override {
    SetOverlay(std::string(key), row);
    return Status::Ok();
  }

  Status Delete(std::string_view key) override {
    SetOverlay(std::string(key), std::nullopt);
    return Status::Ok();
  }

  Status AddQueueMessage(const QueueRow& row) override {
    pending_.push_back(queue_.AddStatement(row));
    return Status::Ok();
  }

  Status SetDataVersion(int64_t version) override {
    pending_.push_back(Stmt("set_version", Params().Text(db_).Int64(version).Int64(timeline_)));
    pending_.push_back(Stmt("notify", Params().Text(channel_).Text(std::to_string(version))));
    const int64_t now = NowUnixMs();
    if (now - last_prune_ms_ > 10000) {
      last_prune_ms_ = now;
      pending_.push_back(
          Stmt("log_prune", Params().Text(db_).Int64(now - o_.tuning.change_retention_ms)));
    }
    return Status::Ok();
  }

  Status AppendChangeLog(const ChangeLogRow& row) override {
    log_rows_.push_back(row);
    return Status::Ok();
  }

  // Pruned by age in SetDataVersion (other nodes' feeds read the table too).
  Status PruneChangeLog(int64_t /*through_version*/) override { return Status::Ok(); }

  Status Savepoint() override {
    if (sp_active_) return Internal("postgres write: nested savepoint");
    sp_active_ = true;
    sp_pending_mark_ = pending_.size();
    sp_undo_mark_ = undo_.size();
    return Status::Ok();
  }

  Status ReleaseSavepoint() override {
    if (!sp_active_) return Internal("postgres write: no savepoint");
    sp_active_ = false;
    undo_.clear();
    return Status::Ok();
  }

  Status RollbackToSavepoint() override {
    if (!sp_active_) return Internal("postgres write: no savepoint");
    pending_.resize(sp_pending_mark_);
    while (undo_.size() > sp_undo_mark_) {
      Undo& u = undo_.back();
      if (u.had) {
        overlay_[u.key] = std::move(u.prev);
      } else {
        overlay_.erase(u.key);
      }
      undo_.pop_back();
    }
    sp_active_ = false;
    undo_.clear();
    return Status::Ok();
  }

  Result<std::vector<std::string>> DeleteExpired(int64_t now_ms) override {
    KVC_RETURN_IF_ERROR(Flush());
    if (!leader_) {
      KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("try_leader", Params().Text(db_)));
      leader_ = r.rows() > 0 && r.Int(0, 0) != 0;
      if (!leader_) return std::vector<std::string>();
      spdlog::info("database {}: this node now sweeps expired keys", db_);
    }
    KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("delete_expired", Params().Text(db_).Int64(now_ms)));
    std::vector<std::string> keys;
    for (int i = 0; i < r.rows(); ++i) {
      keys.push_back(r.Bytes(i, 0));
      SetOverlay(keys.back(), std::nullopt, /*dirty=*/false);
    }
    return keys;
  }

  Result<std::optional<int64_t>> EarliestExpiry() override {
    // A node that is not the sweeper asks again soon, to take over from one that died.
    if (!leader_) return std::optional<int64_t>(NowUnixMs() + o_.tuning.expiry_leader_retry_ms);
    KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("earliest", Params().Text(db_)));
    if (r.rows() == 0) return std::optional<int64_t>();
    return std::optional<int64_t>(r.Int(0, 0));
  }

  Status Commit() override {
    std::vector<Statement> stmts = KvStatements();
    commit_version_ = 0;
    if (!log_rows_.empty()) {
      std::vector<int64_t> v, prev, t;
      std::vector<std::string> rec;
      for (ChangeLogRow& row : log_rows_) {
        v.push_back(row.version);
        if (row.version > commit_version_) {
          commit_version_ = row.version;
          commit_time_ms_ = row.time_ms;
          commit_record_ = row.bytes;  // what identifies this commit's record (CommittedAnyway)
        }
        prev.push_back(row.prev_version);
        t.push_back(row.time_ms);
        rec.push_back(std::move(row.bytes));
      }
      stmts.push_back(
          Stmt("log_add_many",
               Params().Text(db_).Int64Array(v).Int64Array(prev).Int64Array(t).BytesArray(rec)));
    }
    for (Statement& st : pending_) stmts.push_back(std::move(st));
    stmts.push_back(Stmt("commit", Params()));
    auto r = conn_.Pipeline(stmts);
    ResetTxn();
    if (!r.ok()) {
      if (!conn_.connected() && CommittedAnyway()) return Status::Ok();
      conn_.RollbackQuietly();
      return r.status();
    }
    return Status::Ok();
  }

  void Rollback() override {
    ResetTxn();
    conn_.RollbackQuietly();
  }

  // Queue delivery: pg_queue.h, after the batched statements reached the server.
  Result<std::vector<QueuedMessage>> QueueDue(int64_t now_ms, size_t limit) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.Due(now_ms, limit);
  }
  Result<std::optional<int64_t>> QueueEarliest(bool running) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.Earliest(running);
  }
  Status QueueLease(const QueueRow& row, int64_t deadline_ms,
                    const QueueDeliveryState& state) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.Lease(row, deadline_ms, state);
  }
  Result<std::optional<QueuedMessage>> QueueGetRunning(std::string_view id) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.GetRunning(id);
  }
  Result<std::vector<std::string>> QueueRunningDue(int64_t now_ms, size_t limit) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.RunningDue(now_ms, limit);
  }
  Status QueueSetDeadline(std::string_view id, int64_t deadline_ms) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.SetDeadline(id, deadline_ms);
  }
  Status QueueRemoveRunning(std::string_view id) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.RemoveRunning(id);
  }
  Status QueueRequeue(const QueueRow& row, const QueueDeliveryState& state) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.Requeue(row, state);
  }
  Status QueueAddDead(const DeadLetterRow& dead) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.AddDead(dead);
  }
  Result<std::vector<DeadLetterRow>> QueueListDead(std::string_view after, size_t limit) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.ListDead(after, limit);
  }
  Result<std::optional<DeadLetterRow>> QueueTakeDead(std::string_view id) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.TakeDead(id);
  }
  Result<int64_t> QueuePruneDead(int64_t before_ms) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.PruneDead(before_ms);
  }
  Result<QueueTableCounts> QueueCounts(int64_t now_ms) override {
    KVC_RETURN_IF_ERROR(Flush());
    return queue_.Counts(now_ms);
  }

 private:
  struct Undo {
    std::string key;
    bool had = false;
    std::optional<StoredRow> prev;
  };

  Status Broken(const Status& s) {
    conn_.RollbackQuietly();
    if (!conn_.connected()) {
      timeline_ = -1;
      leader_ = false;
    }
    return s;
  }

  // The connection broke during COMMIT: whether the transaction committed is unknown, and
  // answering 503 would make clients send the write again (a second increment). Asks
  // PostgreSQL on a new session, reconnecting for up to commit_outcome_wait_ms (a failover in
  // progress), then gives up (503, outcome unknown):
  //  - the commit's own change record (written in the same transaction) is there: it landed,
  //    on this timeline or, replicated, on a promoted standby. The record is matched by its
  //    version, time and bytes, not its version alone: after PostgreSQL crashed, a lost
  //    commit's version is allocated again to whichever transaction comes next;
  //  - on the timeline the transaction ran on, pg_xact_status says aborted, or in progress
  //    (asked again), or committed: believed only when the change record is there too (or the
  //    transaction wrote none), since a crashed PostgreSQL reuses ids it never made durable;
  //  - on a later timeline without the record: it was in the old primary's lost tail, never
  //    to appear, so a client's retry applies it once. A transaction id is not trusted there
  //    (the promoted standby may have reused it).
  bool CommittedAnyway() {
    if (xid_.empty() || timeline_ < 0) return false;
    Connection probe(o_.conninfo,
                     {{"target_session_attrs", "read-write"},
                      {"connect_timeout", "2"},
                      {"application_name", o_.tuning.application_name}},
                     "postgres commit check");
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(o_.tuning.commit_outcome_wait_ms);
    while (true) {
      // The transaction id is asked about only on its own timeline: a promoted standby that
      // never saw it may not have reached it yet, and pg_xact_status fails for such an id.
      auto r = probe.Query(
          "select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint, "
          "(case when exists (select 1 from kvc_changes where db = $1::uuid and version = $2 "
          "and time_ms = $3 and record = $4) then 1 else 0 end)::bigint",
          Params().Text(db_).Int64(commit_version_).Int64(commit_time_ms_).Bytes(commit_record_));
      bool asked = r.ok() && r->rows() == 1;
      if (asked) {
        const bool same_timeline = r->Int(0, 0) == timeline_;
        if (commit_version_ > 0 && r->Int(0, 1) == 1) {
          spdlog::warn(
              "database {}: the connection broke during COMMIT, which landed (version {}{})", db_,
              commit_version_, same_timeline ? "" : ", on the new timeline");
          return true;
        }
        if (!same_timeline) {
          spdlog::warn(
              "database {}: the connection broke during COMMIT, which was lost with the "
              "old primary's tail (version {}); the client's retry applies it",
              db_, commit_version_);
          return false;
        }
        auto x = probe.Query("select pg_xact_status($1::xid8)", Params().Text(xid_));
        asked = x.ok() && x->rows() == 1;
        if (asked) {
          const std::string status = x->IsNull(0, 0) ? "" : x->Bytes(0, 0);
          if (status == "committed") {
            // With a change record, only the record proves it: after a crash of PostgreSQL,
            // an id whose transaction left nothing in the durable WAL is handed out again, and
            // "committed" may then speak of another transaction (crash_pg saw a write answered
            // as landed that was lost). The record is asked again, after the status, in case
            // the transaction committed between the two questions.
            const int64_t records = CommitRecordCount(probe);
            if (records > 0) {
              spdlog::warn("database {}: the connection broke during COMMIT, which landed (xid {})",
                           db_, xid_);
              return true;
            }
            if (records == 0) {
              spdlog::warn(
                  "database {}: the connection broke during COMMIT, which did not land (version "
                  "{}; xid {} was reused after PostgreSQL restarted); the client's retry applies "
                  "it",
                  db_, commit_version_, xid_);
              return false;
            }
            asked = false;  // the record could not be asked: again after a pause, in the deadline
          } else if (status != "in progress") {
            return false;
          }
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        spdlog::error(
            "database {}: the connection broke during COMMIT and PostgreSQL did not say "
            "within {} ms whether it landed (xid {}): answered as unavailable",
            db_, o_.tuning.commit_outcome_wait_ms, xid_);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(asked ? 100 : 250));
    }
  }

  // How many change records of the commit CommittedAnyway asks about PostgreSQL holds (0 or
  // 1), asked on `probe`: 1 when the transaction wrote none, -1 when it could not be asked.
  int64_t CommitRecordCount(Connection& probe) {
    if (commit_version_ <= 0) return 1;
    auto again = probe.Query(
        "select count(*) from kvc_changes where db = $1::uuid and version = $2 and time_ms = $3 "
        "and record = $4",
        Params().Text(db_).Int64(commit_version_).Int64(commit_time_ms_).Bytes(commit_record_));
    return again.ok() && again->rows() == 1 ? again->Int(0, 0) : -1;
  }

  // The final state of the keys changed since the last flush: one upsert and one delete.
  std::vector<Statement> KvStatements() {
    std::vector<Statement> out;
    std::vector<std::string> put_keys, values, del_keys;
    std::vector<int32_t> encodings;
    std::vector<int64_t> versions, expiries;
    for (const std::string& k : dirty_) {
      auto it = overlay_.find(k);
      if (it == overlay_.end()) continue;  // rolled back to a savepoint
      if (it->second) {
        put_keys.push_back(k);
        values.push_back(it->second->value);
        encodings.push_back(static_cast<int32_t>(it->second->encoding));
        versions.push_back(it->second->version);
        expiries.push_back(it->second->expire_at_ms);
      } else {
        del_keys.push_back(k);
      }
    }
    dirty_.clear();
    if (!put_keys.empty()) {
      out.push_back(Stmt("put_many", Params()
                                         .Text(db_)
                                         .BytesArray(put_keys)
                                         .BytesArray(values)
                                         .Int32Array(encodings)
                                         .Int64Array(versions)
                                         .Int64Array(expiries)));
    }
    if (!del_keys.empty()) {
      out.push_back(Stmt("delete_many", Params().Text(db_).BytesArray(del_keys)));
    }
    return out;
  }

  void ResetTxn() {
    conn_.set_pinned(false);
    pending_.clear();
    log_rows_.clear();
    dirty_.clear();
    overlay_.clear();
    undo_.clear();
    sp_active_ = false;
  }

  // `dirty`: the change is still to be sent (false for rows the server already changed).
  void SetOverlay(std::string key, std::optional<StoredRow> row, bool dirty = true) {
    if (dirty) dirty_.insert(key);
    auto it = overlay_.find(key);
    if (sp_active_) {
      Undo u;
      u.key = key;
      u.had = it != overlay_.end();
      if (u.had) u.prev = it->second;
      undo_.push_back(std::move(u));
    }
    if (it != overlay_.end()) {
      it->second = std::move(row);
    } else {
      overlay_.emplace(std::move(key), std::move(row));
    }
  }

  // Sends the batched changes (inside the transaction) before a statement that must see them.
  // Never inside a savepoint: only the engine's writes use savepoints, and they change keys and
  // enqueue only (kept until Commit).
  Status Flush() {
    if (sp_active_) return Internal("postgres write: a direct statement inside a savepoint");
    std::vector<Statement> stmts = KvStatements();
    for (Statement& st : pending_) stmts.push_back(std::move(st));
    pending_.clear();
    if (stmts.empty()) return Status::Ok();
    return conn_.Pipeline(stmts).status();
  }

  const PgBackendOptions o_;
  const std::string db_;
  const std::string channel_;
  Connection conn_;
  pg::QueueStatements queue_;
  std::vector<Statement> pending_;  // queued statements other than key changes
  std::vector<ChangeLogRow> log_rows_;
  std::unordered_map<std::string, std::optional<StoredRow>> overlay_;
  std::set<std::string> dirty_;  // keys of overlay_ not yet sent
  std::vector<Undo> undo_;
  bool sp_active_ = false;
  size_t sp_pending_mark_ = 0;
  size_t sp_undo_mark_ = 0;
  int64_t timeline_ = -1;
  std::string xid_;             // the open transaction's id (text), for CommittedAnyway
  int64_t commit_version_ = 0;  // the newest version the committing transaction recorded
  int64_t commit_time_ms_ = 0;  // that record's time_ms and bytes
  std::string commit_record_;
  bool leader_ = false;
  int64_t last_prune_ms_ = 0;
};

// LISTEN on the database's channel; on a notification (or every feed_poll_ms) read the commits
// after the last one seen.
class PgChangeFeed : public ChangeFeed {
 public:
  PgChangeFeed(const PgBackendOptions& o, int64_t after, Backend::CommitCallback cb)
      : o_(o),
        db_(o.database_id),
        channel_("kvc_" + pg::UuidHex(o.database_id)),
        last_(after),
        cb_(std::move(cb)),
        conn_(o.conninfo,
              {{"target_session_attrs", "read-write"},
               {"application_name", o.tuning.application_name}},
              "postgres change feed") {
    conn_.Define("changes",
                 "select version, prev_version, time_ms, record from kvc_changes where db = "
                 "$1::uuid and version > $2 order by version limit 512");
    conn_.Define("oldest", "select coalesce(min(version), 0) from kvc_changes where db = $1::uuid");
  }

  Status Start() {
    if (::pipe(stop_pipe_) != 0) return IoError("pipe for the change feed failed");
    thread_ = std::thread([this] {
      NameThisThread("kvc-pg-feed");
      Loop();
    });
    return Status::Ok();
  }

  ~PgChangeFeed() override {
    if (thread_.joinable()) {
      stop_.store(true);
      const char b = 1;
      (void)!::write(stop_pipe_[1], &b, 1);
      thread_.join();
    }
    for (int fd : stop_pipe_) {
      if (fd >= 0) ::close(fd);
    }
  }

 private:
  void Loop() {
    int backoff_ms = 100;
    while (!stop_.load()) {
      if (!conn_.connected()) {
        Status s = conn_.Connect();
        if (s.ok()) s = conn_.Exec("listen " + channel_);
        if (!s.ok()) {
          spdlog::warn("database {}: change feed: {}; retrying", db_, s.message());
          conn_.Close();
          Wait(backoff_ms);
          backoff_ms = std::min(backoff_ms * 2, 2000);
          continue;
        }
        backoff_ms = 100;
      }
      // Read everything after the last commit seen (after a reconnect too: nothing is missed
      // unless it was pruned).
      Status s = ReadNew();
      if (!s.ok()) {
        spdlog::warn("database {}: change feed: {}", db_, s.message());
        conn_.Close();
        continue;
      }
      Wait(static_cast<int>(o_.tuning.feed_poll_ms));
      if (conn_.raw()) {
        if (!PQconsumeInput(conn_.raw())) {
          conn_.Close();
          continue;
        }
        while (PGnotify* n = PQnotifies(conn_.raw())) PQfreemem(n);
      }
    }
  }

  Status ReadNew() {
    for (;;) {
      KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("changes", Params().Text(db_).Int64(last_)));
      if (r.rows() == 0) return Status::Ok();
      CommitGroup group;
      group.origin = CommitOrigin::kOtherWriter;
      for (int i = 0; i < r.rows(); ++i) {
        const int64_t prev = r.Int(i, 1);
        if (i == 0 && prev > last_) {
          spdlog::warn("database {}: change feed missed commits {}..{} (pruned); watchers re-read",
                       db_, last_ + 1, prev);
          group.resync = true;
        }
        KVC_ASSIGN_OR_RETURN(LoggedCommit c, DecodeLoggedCommit(r.Bytes(i, 3)));
        group.time_ms = c.time_ms;
        group.records.push_back(std::move(c.record));
      }
      last_ = group.records.back().version;
      const bool more = r.rows() == 512;
      cb_(std::move(group));
      if (!more || stop_.load()) return Status::Ok();
    }
  }

  // Sleeps until the connection has input, a stop, or `ms`.
  void Wait(int ms) {
    pollfd fds[2] = {{stop_pipe_[0], POLLIN, 0}, {conn_.socket(), POLLIN, 0}};
    const nfds_t n = conn_.socket() >= 0 ? 2 : 1;
    (void)::poll(fds, n, ms);
  }

  const PgBackendOptions o_;
  const std::string db_;
  const std::string channel_;
  int64_t last_;
  const Backend::CommitCallback cb_;
  Connection conn_;
  std::atomic<bool> stop_{false};
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<PgBackend>> PgBackend::Open(const PgBackendOptions& options) {
  std::unique_ptr<PgBackend> b(new PgBackend(options));
  KVC_RETURN_IF_ERROR(b->LoadDataVersion().status());
  return b;
}

Result<int64_t> PgBackend::LoadDataVersion() {
  Connection c(options_.conninfo, {{"application_name", options_.tuning.application_name}},
               "postgres open");
  KVC_ASSIGN_OR_RETURN(PgResult r,
                       c.Query("select version from kvc_data_version where db = $1::uuid",
                               Params().Text(options_.database_id)));
  if (r.rows() == 0) {
    return NotFound("database " + options_.database_id + " has no data in PostgreSQL");
  }
  const int64_t v = r.Int(0, 0);
  loaded_version_.store(v);
  return v;
}

Result<std::unique_ptr<ChangeFeed>> PgBackend::OpenChangeFeed(const CommitCallback& on_commit) {
  auto feed = std::make_unique<PgChangeFeed>(options_, loaded_version_.load(), on_commit);
  KVC_RETURN_IF_ERROR(feed->Start());
  return std::unique_ptr<ChangeFeed>(std::move(feed));
}

Result<std::unique_ptr<Reader>> PgBackend::OpenReader() {
  return std::unique_ptr<Reader>(std::make_unique<PgReader>(options_));
}

Result<std::unique_ptr<Writer>> PgBackend::OpenWriter() {
  return std::unique_ptr<Writer>(std::make_unique<PgWriter>(options_));
}

}  // namespace kvc::storage
