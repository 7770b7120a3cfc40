#include "storage/postgres/pg_schema.h"

#include <string>

namespace kvc::storage::pg {
namespace {

// Applied in order; each one runs in its own transaction. Do not change one that shipped: add
// a new one.
constexpr const char* kMigrations[] = {
    R"sql(
create table kvc_catalog_meta (k text primary key, v bigint not null);
insert into kvc_catalog_meta (k, v) values ('generation', 0);
create table kvc_databases (
  id uuid primary key,
  name text not null unique,
  location text not null,
  created_ms bigint not null
);
create table kvc_access_tokens (
  id text primary key,
  name text not null,
  database_id uuid not null,
  scope integer not null,
  hash text not null,
  created_ms bigint not null,
  expires_ms bigint not null default 0,
  revoked_ms bigint not null default 0,
  rate_limit double precision not null default -1
);
create index kvc_access_tokens_by_db on kvc_access_tokens (database_id);
create table kvc_secrets (name text primary key, value bytea not null, created_ms bigint not null);
create table kvc_data_version (
  db uuid primary key,
  version bigint not null,
  timeline bigint not null default 0
);
create table kvc_kv (
  db uuid not null,
  k bytea not null,
  v bytea not null,
  v_encoding smallint not null,
  version bigint not null,
  expiration_ms bigint not null default -1,
  primary key (db, k)
);
create index kvc_kv_expiration on kvc_kv (db, expiration_ms) where expiration_ms >= 0;
create table kvc_changes (
  db uuid not null,
  version bigint not null,
  prev_version bigint not null,
  time_ms bigint not null,
  record bytea not null,
  primary key (db, version)
);
create index kvc_changes_time on kvc_changes (db, time_ms);
create table kvc_queue (
  db uuid not null,
  ts bigint not null,
  id text not null,
  data bytea not null,
  backoff_schedule text not null,
  keys_if_undelivered text not null,
  primary key (db, ts, id)
);
create index kvc_queue_id on kvc_queue (db, id);
create table kvc_queue_running (
  db uuid not null,
  deadline bigint not null,
  id text not null,
  data bytea not null,
  backoff_schedule text not null,
  keys_if_undelivered text not null,
  primary key (db, deadline, id)
);
create index kvc_queue_running_id on kvc_queue_running (db, id);
create table kvc_queue_state (
  db uuid not null,
  id text not null,
  attempts integer not null,
  lease text not null,
  last_error text not null,
  primary key (db, id)
);
create table kvc_queue_dead (
  db uuid not null,
  id text not null,
  dead_at bigint not null,
  attempts integer not null,
  last_error text not null,
  data bytea not null,
  keys_if_undelivered text not null,
  primary key (db, id)
);
create index kvc_queue_dead_at on kvc_queue_dead (db, dead_at);
create table kvc_nodes (
  id text primary key,
  url text not null,
  role text not null,
  region text not null,
  started_ms bigint not null,
  heartbeat_ms bigint not null
);
)sql",
    // Tokens for several databases, or all (catalog.h: EncodeTokenDatabases).
    R"sql(
alter table kvc_access_tokens add column database_ids text not null default '';
alter table kvc_access_tokens add column all_databases integer not null default 0;
update kvc_access_tokens set database_ids = database_id::text;
)sql",
};

constexpr int kKnown = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

}  // namespace

Status MigrateSchema(Connection& conn) {
  KVC_RETURN_IF_ERROR(conn.Ensure());
  const std::string lock = "select pg_advisory_lock(" + std::to_string(kLockSchema) + ", 0)";
  const std::string unlock = "select pg_advisory_unlock(" + std::to_string(kLockSchema) + ", 0)";
  KVC_RETURN_IF_ERROR(conn.Exec(lock));
  auto body = [&]() -> Status {
    KVC_RETURN_IF_ERROR(
        conn.Exec("create table if not exists kvc_schema_version (version integer not null)"));
    KVC_ASSIGN_OR_RETURN(PgResult r, conn.Query("select version from kvc_schema_version", {}));
    int applied = 0;
    if (r.rows() == 0) {
      KVC_RETURN_IF_ERROR(conn.Exec("insert into kvc_schema_version (version) values (0)"));
    } else {
      applied = static_cast<int>(r.Int(0, 0));
    }
    if (applied > kKnown) {
      return InvalidArgument("the PostgreSQL schema is at version " + std::to_string(applied) +
                             ", made by a newer kvconnect (this one knows " +
                             std::to_string(kKnown) + "); upgrade kvconnect");
    }
    for (int i = applied; i < kKnown; ++i) {
      Status s = conn.Exec(std::string("begin;") + kMigrations[i] +
                           ";update kvc_schema_version set version = " + std::to_string(i + 1) +
                           ";commit;");
      if (!s.ok()) {
        conn.RollbackQuietly();
        return s;
      }
    }
    return Status::Ok();
  };
  Status s = body();
  (void)conn.Exec(unlock);
  return s;
}

}  // namespace kvc::storage::pg
