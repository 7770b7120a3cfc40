#include "storage/sqlite/sqlite_catalog.h"

#include <sqlite3.h>

#include <iterator>

#include "storage/sqlite/sqlite_util.h"

namespace kvc::storage {
namespace {

constexpr const char* kSchema = R"sql(
create table if not exists catalog_meta (k text primary key, v integer not null);
insert or ignore into catalog_meta (k, v) values ('schema_version', 1), ('generation', 0);
create table if not exists databases (
  id text primary key,
  name text not null unique,
  path text not null,
  created_ms integer not null
);
create table if not exists access_tokens (
  id text primary key,
  name text not null,
  database_id text not null,
  scope integer not null,
  hash text not null,
  created_ms integer not null,
  expires_ms integer not null default 0,
  revoked_ms integer not null default 0,
  rate_limit real not null default -1
);
create index if not exists access_tokens_by_db on access_tokens (database_id);
)sql";

// Applied in order to a catalog at schema_version i (1-based: kCatalogMigrations[0] takes version 1
// to 2), each in the transaction that opens the catalog. Do not change one that shipped: add a
// new one.
constexpr const char* kCatalogMigrations[] = {
    // Tokens for several databases, or all (catalog.h: EncodeTokenDatabases).
    R"sql(
alter table access_tokens add column database_ids text not null default '';
alter table access_tokens add column all_databases integer not null default 0;
update access_tokens set database_ids = database_id;
)sql",
};
constexpr int64_t kSchemaVersion = 1 + static_cast<int64_t>(std::size(kCatalogMigrations));

using sqlite::Stmt;

// Every SQLite failure is an I/O error: "catalog: <what>: <sqlite's message>".
constexpr const char* kCatalogErrorPrefix = "catalog: ";
constexpr int kBusyTimeoutMs = 10000;

DatabaseRecord ReadDatabase(const Stmt& s) {
  return DatabaseRecord{.id = s.ColumnText(0),
                        .name = s.ColumnText(1),
                        .location = s.ColumnText(2),
                        .created_ms = s.ColumnInt64(3)};
}

AccessTokenRecord ReadToken(const Stmt& s) {
  AccessTokenRecord t;
  t.id = s.ColumnText(0);
  t.name = s.ColumnText(1);
  t.all_databases = s.ColumnInt64(10) != 0;
  t.database_ids = DecodeTokenDatabases(s.ColumnText(9), s.ColumnText(2), t.all_databases);
  t.scope = static_cast<int>(s.ColumnInt64(3));
  t.hash = s.ColumnText(4);
  t.created_ms = s.ColumnInt64(5);
  t.expires_ms = s.ColumnInt64(6);
  t.revoked_ms = s.ColumnInt64(7);
  t.rate_limit = s.ColumnDouble(8);
  return t;
}

constexpr const char* kTokenColumns =
    "id, name, database_id, scope, hash, created_ms, expires_ms, revoked_ms, rate_limit, "
    "database_ids, all_databases";

// Brings a catalog made by an older kvconnect to kSchemaVersion. Errors: InvalidArgument (made by
// a newer kvconnect), IoError.
Status MigrateSchema(sqlite::Connection& conn) {
  KVC_ASSIGN_OR_RETURN(Stmt get,
                       conn.PrepareOnce("select v from catalog_meta where k = 'schema_version'"));
  if (get.Step() != SQLITE_ROW) return conn.Error("read schema version");
  const int64_t version = get.ColumnInt64(0);
  if (version > kSchemaVersion) {
    return InvalidArgument("the catalog's schema is at version " + std::to_string(version) +
                           ", made by a newer kvconnect (this one knows " +
                           std::to_string(kSchemaVersion) + "); upgrade kvconnect");
  }
  for (int64_t v = version; v < kSchemaVersion; ++v) {
    KVC_RETURN_IF_ERROR(conn.Exec(kCatalogMigrations[v - 1]));
  }
  if (version == kSchemaVersion) return Status::Ok();
  KVC_ASSIGN_OR_RETURN(
      Stmt set, conn.PrepareOnce("update catalog_meta set v = ?1 where k = 'schema_version'"));
  set.BindInt64(1, kSchemaVersion);
  if (set.Step() != SQLITE_DONE) return conn.Error("write schema version");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<SqliteCatalog>> SqliteCatalog::Open(const std::string& path,
                                                           const std::string& vfs) {
  auto conn = std::make_unique<sqlite::Connection>(kCatalogErrorPrefix);
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  KVC_RETURN_IF_ERROR(conn->Open(path, flags, kBusyTimeoutMs,
                                 "pragma journal_mode=wal; pragma synchronous=full;", vfs));
  std::unique_ptr<SqliteCatalog> c(new SqliteCatalog(std::move(conn)));
  {
    MutexLock lock(c->mu_);  // uncontended: nobody else has `c` yet
    sqlite::Connection* raw = c->conn_.get();
    KVC_RETURN_IF_ERROR(c->WriteTxn([raw]() -> Status {
      KVC_RETURN_IF_ERROR(raw->Exec(kSchema));
      return MigrateSchema(*raw);
    }));
  }
  return c;
}

SqliteCatalog::SqliteCatalog(std::unique_ptr<sqlite::Connection> conn) : conn_(std::move(conn)) {}

SqliteCatalog::~SqliteCatalog() = default;

template <typename F>
Status SqliteCatalog::WriteTxn(F&& body) {
  KVC_RETURN_IF_ERROR(conn_->Exec("begin immediate"));
  Status s = body();
  if (s.ok()) {
    s = conn_->Exec("update catalog_meta set v = v + 1 where k = 'generation'");
  }
  if (s.ok()) s = conn_->Exec("commit");
  if (!s.ok()) (void)conn_->Exec("rollback");
  return s;
}

Result<std::vector<DatabaseRecord>> SqliteCatalog::ListDatabases() {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(
      Stmt s, conn_->PrepareOnce("select id, name, path, created_ms from databases order by name"));
  return sqlite::AllRows<DatabaseRecord>(*conn_, s, "list databases", ReadDatabase);
}

Result<DatabaseRecord> SqliteCatalog::FindDatabase(const std::string& name_or_id) {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(
      Stmt s,
      conn_->PrepareOnce(
          "select id, name, path, created_ms from databases where name = ?1 or id = lower(?1)"));
  s.BindText(1, name_or_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadDatabase(s);
  if (rc != SQLITE_DONE) return conn_->Error("find database");
  return NotFound("Database '" + name_or_id + "' not found.");
}

Status SqliteCatalog::AddDatabase(const DatabaseRecord& db) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(Stmt check,
                         conn_->PrepareOnce("select 1 from databases where name = ?1 or id = ?2"));
    check.BindText(1, db.name).BindText(2, db.id);
    if (check.Step() == SQLITE_ROW) {
      return AlreadyExists("A database named '" + db.name + "' (or with its id) already exists.");
    }
    KVC_ASSIGN_OR_RETURN(
        Stmt s, conn_->PrepareOnce(
                    "insert into databases (id, name, path, created_ms) values (?1, ?2, ?3, ?4)"));
    s.BindText(1, db.id).BindText(2, db.name).BindText(3, db.location).BindInt64(4, db.created_ms);
    if (s.Step() != SQLITE_DONE) return conn_->Error("add database");
    return Status::Ok();
  });
}

Status SqliteCatalog::RenameDatabase(const std::string& id, const std::string& new_name) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(Stmt check, conn_->PrepareOnce("select 1 from databases where name = ?1"));
    check.BindText(1, new_name);
    if (check.Step() == SQLITE_ROW) {
      return AlreadyExists("A database named '" + new_name + "' already exists.");
    }
    KVC_ASSIGN_OR_RETURN(Stmt s,
                         conn_->PrepareOnce("update databases set name = ?2 where id = ?1"));
    s.BindText(1, id).BindText(2, new_name);
    if (s.Step() != SQLITE_DONE) return conn_->Error("rename database");
    if (sqlite3_changes(conn_->db()) == 0) return NotFound("Database not found.");
    return Status::Ok();
  });
}

Status SqliteCatalog::RemoveDatabase(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(Stmt del, conn_->PrepareOnce("delete from databases where id = ?1"));
    del.BindText(1, id);
    if (del.Step() != SQLITE_DONE) return conn_->Error("remove database");
    if (sqlite3_changes(conn_->db()) == 0) return NotFound("Database not found.");
    // The tokens that may open it (a superset: the comma-bounded match is exact, ids have none).
    std::string sql = std::string("select ") + kTokenColumns +
                      " from access_tokens where all_databases = 0 and (database_id = ?1 or "
                      "instr(',' || database_ids || ',', ',' || ?1 || ',') > 0)";
    KVC_ASSIGN_OR_RETURN(Stmt find, conn_->PrepareOnce(sql.c_str()));
    find.BindText(1, id);
    std::vector<AccessTokenRecord> tokens;
    int rc;
    while ((rc = find.Step()) == SQLITE_ROW) tokens.push_back(ReadToken(find));
    if (rc != SQLITE_DONE) return conn_->Error("find the database's tokens");
    for (AccessTokenRecord& t : tokens) {
      if (!RemoveDatabaseFromToken(&t, id, now_ms)) continue;
      KVC_ASSIGN_OR_RETURN(
          Stmt up, conn_->PrepareOnce("update access_tokens set database_ids = ?2, database_id "
                                      "= ?3, revoked_ms = ?4 where id = ?1"));
      const std::string ids = EncodeTokenDatabases(t.database_ids);
      const std::string legacy = LegacyTokenDatabaseId(t);
      up.BindText(1, t.id).BindText(2, ids).BindText(3, legacy).BindInt64(4, t.revoked_ms);
      if (up.Step() != SQLITE_DONE) return conn_->Error("update the database's tokens");
    }
    return Status::Ok();
  });
}

Status SqliteCatalog::RebindDatabase(const std::string& name, const std::string& new_id,
                                     const std::string& location) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(
        Stmt s, conn_->PrepareOnce("update databases set id = ?2, path = ?3 where name = ?1"));
    s.BindText(1, name).BindText(2, new_id).BindText(3, location);
    if (s.Step() != SQLITE_DONE) return conn_->Error("rebind database");
    if (sqlite3_changes(conn_->db()) == 0) return NotFound("Database '" + name + "' not found.");
    return Status::Ok();
  });
}

Status SqliteCatalog::AddToken(const AccessTokenRecord& t) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    std::string sql = std::string("insert into access_tokens (") + kTokenColumns +
                      ") values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
    KVC_ASSIGN_OR_RETURN(Stmt s, conn_->PrepareOnce(sql.c_str()));
    const std::string legacy = LegacyTokenDatabaseId(t);
    const std::string ids = EncodeTokenDatabases(t.database_ids);
    s.BindText(1, t.id).BindText(2, t.name).BindText(3, legacy);
    s.BindInt64(4, t.scope).BindText(5, t.hash).BindInt64(6, t.created_ms);
    s.BindInt64(7, t.expires_ms).BindInt64(8, t.revoked_ms).BindDouble(9, t.rate_limit);
    s.BindText(10, ids).BindInt64(11, t.all_databases ? 1 : 0);
    const int rc = s.Step();
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) return AlreadyExists("Token id collision.");
    if (rc != SQLITE_DONE) return conn_->Error("add token");
    return Status::Ok();
  });
}

Result<std::vector<AccessTokenRecord>> SqliteCatalog::ListTokens() {
  MutexLock lock(mu_);
  std::string sql =
      std::string("select ") + kTokenColumns + " from access_tokens order by created_ms, id";
  KVC_ASSIGN_OR_RETURN(Stmt s, conn_->PrepareOnce(sql.c_str()));
  return sqlite::AllRows<AccessTokenRecord>(*conn_, s, "list tokens", ReadToken);
}

Result<AccessTokenRecord> SqliteCatalog::FindToken(const std::string& id) {
  MutexLock lock(mu_);
  std::string sql = std::string("select ") + kTokenColumns + " from access_tokens where id = ?1";
  KVC_ASSIGN_OR_RETURN(Stmt s, conn_->PrepareOnce(sql.c_str()));
  s.BindText(1, id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadToken(s);
  if (rc != SQLITE_DONE) return conn_->Error("find token");
  return NotFound("Access token '" + id + "' not found.");
}

Status SqliteCatalog::RevokeToken(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(Stmt find,
                         conn_->PrepareOnce("select revoked_ms from access_tokens where id = ?1"));
    find.BindText(1, id);
    const int rc = find.Step();
    if (rc == SQLITE_DONE) return NotFound("Access token '" + id + "' not found.");
    if (rc != SQLITE_ROW) return conn_->Error("revoke token");
    if (find.ColumnInt64(0) != 0) {
      return AlreadyExists("Access token '" + id + "' is already revoked.");
    }
    KVC_ASSIGN_OR_RETURN(
        Stmt s, conn_->PrepareOnce("update access_tokens set revoked_ms = ?2 where id = ?1"));
    s.BindText(1, id).BindInt64(2, now_ms);
    if (s.Step() != SQLITE_DONE) return conn_->Error("revoke token");
    return Status::Ok();
  });
}

Result<int64_t> SqliteCatalog::ChangeCounter() {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(Stmt s,
                       conn_->PrepareOnce("select v from catalog_meta where k = 'generation'"));
  if (s.Step() != SQLITE_ROW) return conn_->Error("read generation");
  return s.ColumnInt64(0);
}

}  // namespace kvc::storage
