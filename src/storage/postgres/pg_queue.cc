#include "storage/postgres/pg_queue.h"

#include "storage/queue_text.h"

namespace kvc::storage::pg {
namespace {

constexpr const char* kDeadColumns = "id, dead_at, attempts, last_error, data, keys_if_undelivered";

Result<DeadLetterRow> ReadDead(const PgResult& r, int i) {
  DeadLetterRow d;
  d.id = r.Bytes(i, 0);
  d.dead_at_ms = r.Int(i, 1);
  d.attempts = static_cast<int32_t>(r.Int(i, 2));
  d.last_error = r.Bytes(i, 3);
  d.payload = r.Bytes(i, 4);
  KVC_ASSIGN_OR_RETURN(d.keys_if_undelivered, ParseKeys(r.Bytes(i, 5)));
  return d;
}

// The messages of a queue table (`table`, its time column `ts`) after a (ts, id) place, with
// their delivery state.
std::string ScanSql(const char* table, const char* ts) {
  return std::string("select q.") + ts +
         ", q.id, q.data, q.backoff_schedule, q.keys_if_undelivered, coalesce(s.attempts, "
         "0)::bigint, coalesce(s.lease, ''), coalesce(s.last_error, '') from " +
         table +
         " q left join kvc_queue_state s on s.db = q.db and s.id = q.id where q.db = $1::uuid "
         "and (q." +
         ts + ", q.id) > ($2, $3) order by q." + ts + ", q.id limit $4";
}

// A message from row i's columns ts, id, data, backoff_schedule, keys_if_undelivered,
// attempts, lease, last_error.
Result<QueuedMessage> ReadQueued(const PgResult& r, int i) {
  QueuedMessage m;
  m.row.ts = r.Int(i, 0);
  m.row.id = r.Bytes(i, 1);
  m.row.payload = r.Bytes(i, 2);
  KVC_ASSIGN_OR_RETURN(m.row.backoff_schedule, ParseBackoffSchedule(r.Bytes(i, 3)));
  KVC_ASSIGN_OR_RETURN(m.row.keys_if_undelivered, ParseKeys(r.Bytes(i, 4)));
  m.state.attempts = static_cast<int32_t>(r.Int(i, 5));
  m.state.lease = r.Bytes(i, 6);
  m.state.last_error = r.Bytes(i, 7);
  return m;
}

}  // namespace

void DefineQueueScans(Connection& conn) {
  conn.Define("q_scan_ready", ScanSql("kvc_queue", "ts"));
  conn.Define("q_scan_running", ScanSql("kvc_queue_running", "deadline"));
  conn.Define("q_scan_dead", std::string("select ") + kDeadColumns +
                                 " from kvc_queue_dead where db = $1::uuid and id > $2 order by "
                                 "id limit $3");
}

Status AppendQueued(const PgResult& r, std::vector<QueuedMessage>* out) {
  return AppendRows(r, ReadQueued, out);
}

Status AppendDead(const PgResult& r, std::vector<DeadLetterRow>* out) {
  return AppendRows(r, ReadDead, out);
}

void QueueStatements::Define() {
  conn_.Define("q_add",
               "insert into kvc_queue (db, ts, id, data, backoff_schedule, keys_if_undelivered) "
               "values ($1::uuid, $2, $3, $4, $5, $6)");
  conn_.Define("q_add_running",
               "insert into kvc_queue_running (db, deadline, id, data, backoff_schedule, "
               "keys_if_undelivered) values ($1::uuid, $2, $3, $4, $5, $6)");
  conn_.Define("q_due",
               "select q.ts, q.id, q.data, q.backoff_schedule, q.keys_if_undelivered, "
               "coalesce(s.attempts, 0)::bigint, coalesce(s.lease, ''), "
               "coalesce(s.last_error, '') from kvc_queue q left join kvc_queue_state s on "
               "s.db = q.db and s.id = q.id where q.db = $1::uuid and q.ts <= $2 order by q.ts, "
               "q.id limit $3");
  conn_.Define("q_earliest_ready",
               "select ts from kvc_queue where db = $1::uuid order by ts limit 1");
  conn_.Define("q_earliest_running",
               "select deadline from kvc_queue_running where db = $1::uuid order by deadline "
               "limit 1");
  conn_.Define("q_del_ready", "delete from kvc_queue where db = $1::uuid and id = $2");
  conn_.Define("q_put_state",
               "insert into kvc_queue_state (db, id, attempts, lease, last_error) values "
               "($1::uuid, $2, $3, $4, $5) on conflict (db, id) do update set attempts = "
               "excluded.attempts, lease = excluded.lease, last_error = excluded.last_error");
  conn_.Define("q_get_running",
               "select r.deadline, r.id, r.data, r.backoff_schedule, r.keys_if_undelivered, "
               "coalesce(s.attempts, 0)::bigint, coalesce(s.lease, ''), "
               "coalesce(s.last_error, '') from kvc_queue_running r left join kvc_queue_state s "
               "on s.db = r.db and s.id = r.id where r.db = $1::uuid and r.id = $2 limit 1");
  conn_.Define("q_running_due",
               "select id from kvc_queue_running where db = $1::uuid and deadline <= $2 order "
               "by deadline limit $3");
  conn_.Define("q_set_deadline",
               "update kvc_queue_running set deadline = $3 where db = $1::uuid and id = $2");
  conn_.Define("q_del_running", "delete from kvc_queue_running where db = $1::uuid and id = $2");
  conn_.Define("q_del_state", "delete from kvc_queue_state where db = $1::uuid and id = $2");
  conn_.Define("q_add_dead",
               std::string("insert into kvc_queue_dead (db, ") + kDeadColumns +
                   ") values ($1::uuid, $2, $3, $4, $5, $6, $7) on conflict (db, id) do update "
                   "set dead_at = excluded.dead_at, attempts = excluded.attempts, last_error = "
                   "excluded.last_error, data = excluded.data, keys_if_undelivered = "
                   "excluded.keys_if_undelivered");
  conn_.Define("q_list_dead", std::string("select ") + kDeadColumns +
                                  " from kvc_queue_dead where db = $1::uuid and id > $2 order by "
                                  "id limit $3");
  conn_.Define("q_take_dead", std::string("delete from kvc_queue_dead where db = $1::uuid and "
                                          "id = $2 returning ") +
                                  kDeadColumns);
  conn_.Define("q_prune_dead", "delete from kvc_queue_dead where db = $1::uuid and dead_at < $2");
  conn_.Define("q_prune_state",
               "delete from kvc_queue_state s where s.db = $1::uuid and not exists (select 1 "
               "from kvc_queue q where q.db = s.db and q.id = s.id) and not exists (select 1 "
               "from kvc_queue_running r where r.db = s.db and r.id = s.id)");
  conn_.Define("q_counts",
               "select (select count(*) from kvc_queue where db = $1::uuid and ts <= $2), "
               "(select count(*) from kvc_queue where db = $1::uuid and ts > $2), (select "
               "count(*) from kvc_queue_running where db = $1::uuid), (select count(*) from "
               "kvc_queue_dead where db = $1::uuid)");
}

Statement QueueStatements::RowStatement(const char* name, const QueueRow& row, int64_t ts) const {
  Params p;
  p.Text(db_).Int64(ts).Text(row.id).Bytes(row.payload);
  p.Text(BackoffScheduleJson(row.backoff_schedule)).Text(KeysJson(row.keys_if_undelivered));
  return Statement{name, std::move(p)};
}

Statement QueueStatements::StateStatement(std::string_view id, const QueueDeliveryState& st) const {
  Params p;
  p.Text(db_).Text(id).Int32(st.attempts).Text(st.lease).Text(st.last_error);
  return Statement{"q_put_state", std::move(p)};
}

Status QueueStatements::RunAll(const std::vector<Statement>& stmts) {
  return conn_.Pipeline(stmts).status();
}

Statement QueueStatements::AddStatement(const QueueRow& row) const {
  return RowStatement("q_add", row, row.ts);
}

Result<std::vector<QueuedMessage>> QueueStatements::Due(int64_t now_ms, size_t limit) {
  KVC_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Run("q_due", Params().Text(db_).Int64(now_ms).Int64(static_cast<int64_t>(limit))));
  return AllRows<QueuedMessage>(r, ReadQueued);
}

Result<std::optional<int64_t>> QueueStatements::Earliest(bool running) {
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run(running ? "q_earliest_running" : "q_earliest_ready",
                                             Params().Text(db_)));
  if (r.rows() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(r.Int(0, 0));
}

Status QueueStatements::Lease(const QueueRow& row, int64_t deadline_ms,
                              const QueueDeliveryState& state) {
  std::vector<Statement> s;
  s.push_back(Statement{"q_del_ready", Params().Text(db_).Text(row.id)});
  s.push_back(RowStatement("q_add_running", row, deadline_ms));
  s.push_back(StateStatement(row.id, state));
  return RunAll(s);
}

Result<std::optional<QueuedMessage>> QueueStatements::GetRunning(std::string_view id) {
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("q_get_running", Params().Text(db_).Text(id)));
  if (r.rows() == 0) return std::optional<QueuedMessage>();
  KVC_ASSIGN_OR_RETURN(QueuedMessage m, ReadQueued(r, 0));  // its ts is the deadline
  return std::optional<QueuedMessage>(std::move(m));
}

Result<std::vector<std::string>> QueueStatements::RunningDue(int64_t now_ms, size_t limit) {
  KVC_ASSIGN_OR_RETURN(
      PgResult r, conn_.Run("q_running_due",
                            Params().Text(db_).Int64(now_ms).Int64(static_cast<int64_t>(limit))));
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) ids.push_back(r.Bytes(i, 0));
  return ids;
}

Status QueueStatements::SetDeadline(std::string_view id, int64_t deadline_ms) {
  return conn_.Run("q_set_deadline", Params().Text(db_).Text(id).Int64(deadline_ms)).status();
}

Status QueueStatements::RemoveRunning(std::string_view id) {
  std::vector<Statement> s;
  s.push_back(Statement{"q_del_running", Params().Text(db_).Text(id)});
  s.push_back(Statement{"q_del_state", Params().Text(db_).Text(id)});
  return RunAll(s);
}

Status QueueStatements::Requeue(const QueueRow& row, const QueueDeliveryState& state) {
  std::vector<Statement> s;
  s.push_back(Statement{"q_del_running", Params().Text(db_).Text(row.id)});
  s.push_back(RowStatement("q_add", row, row.ts));
  s.push_back(StateStatement(row.id, state));
  return RunAll(s);
}

Status QueueStatements::AddDead(const DeadLetterRow& d) {
  Params p;
  p.Text(db_).Text(d.id).Int64(d.dead_at_ms).Int32(d.attempts).Text(d.last_error);
  p.Bytes(d.payload).Text(KeysJson(d.keys_if_undelivered));
  std::vector<Statement> s;
  s.push_back(Statement{"q_add_dead", std::move(p)});
  s.push_back(Statement{"q_del_state", Params().Text(db_).Text(d.id)});
  return RunAll(s);
}

Result<std::vector<DeadLetterRow>> QueueStatements::ListDead(std::string_view after, size_t limit) {
  KVC_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Run("q_list_dead", Params().Text(db_).Text(after).Int64(static_cast<int64_t>(limit))));
  return AllRows<DeadLetterRow>(r, ReadDead);
}

Result<std::optional<DeadLetterRow>> QueueStatements::TakeDead(std::string_view id) {
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("q_take_dead", Params().Text(db_).Text(id)));
  if (r.rows() == 0) return std::optional<DeadLetterRow>();
  KVC_ASSIGN_OR_RETURN(DeadLetterRow d, ReadDead(r, 0));
  return std::optional<DeadLetterRow>(std::move(d));
}

Result<int64_t> QueueStatements::PruneDead(int64_t before_ms) {
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("q_prune_dead", Params().Text(db_).Int64(before_ms)));
  const int64_t n = r.Affected();
  // Delivery state of messages someone else finished.
  KVC_RETURN_IF_ERROR(conn_.Run("q_prune_state", Params().Text(db_)).status());
  return n;
}

Result<QueueTableCounts> QueueStatements::Counts(int64_t now_ms) {
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Run("q_counts", Params().Text(db_).Int64(now_ms)));
  QueueTableCounts c;
  c.ready = r.Int(0, 0);
  c.delayed = r.Int(0, 1);
  c.leased = r.Int(0, 2);
  c.dead = r.Int(0, 3);
  return c;
}

}  // namespace kvc::storage::pg
