#include "storage/sqlite/sqlite_catalog.h"

#include <sqlite3.h>

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

Status Error(sqlite3* db, const std::string& what) {
  return Internal("catalog: " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) s_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return s_ != nullptr; }
  Stmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(s_); }
  std::string ColText(int i) const {
    const unsigned char* p = sqlite3_column_text(s_, i);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  int64_t ColInt(int i) const { return sqlite3_column_int64(s_, i); }
  double ColReal(int i) const { return sqlite3_column_double(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
};

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return Internal(std::string("catalog: ") + msg);
  }
  return Status::Ok();
}

DatabaseRecord ReadDatabase(const Stmt& s) {
  DatabaseRecord d;
  d.id = s.ColText(0);
  d.name = s.ColText(1);
  d.path = s.ColText(2);
  d.created_ms = s.ColInt(3);
  return d;
}

AccessTokenRecord ReadToken(const Stmt& s) {
  AccessTokenRecord t;
  t.id = s.ColText(0);
  t.name = s.ColText(1);
  t.database_id = s.ColText(2);
  t.scope = static_cast<int>(s.ColInt(3));
  t.hash = s.ColText(4);
  t.created_ms = s.ColInt(5);
  t.expires_ms = s.ColInt(6);
  t.revoked_ms = s.ColInt(7);
  t.rate_limit = s.ColReal(8);
  return t;
}

constexpr const char* kTokenColumns =
    "id, name, database_id, scope, hash, created_ms, expires_ms, revoked_ms, rate_limit";

}  // namespace

Result<std::unique_ptr<SqliteCatalog>> SqliteCatalog::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Status s = Error(db, "cannot open " + path);
    sqlite3_close_v2(db);
    return s;
  }
  std::unique_ptr<SqliteCatalog> c(new SqliteCatalog(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, 10000);
  KVC_RETURN_IF_ERROR(Exec(db, "pragma journal_mode=wal; pragma synchronous=full;"));
  KVC_RETURN_IF_ERROR(c->WriteTxn([&]() { return Exec(db, kSchema); }));
  return c;
}

SqliteCatalog::~SqliteCatalog() { sqlite3_close_v2(db_); }

template <typename F>
Status SqliteCatalog::WriteTxn(F&& body) {
  KVC_RETURN_IF_ERROR(Exec(db_, "begin immediate"));
  Status s = body();
  if (s.ok()) {
    s = Exec(db_, "update catalog_meta set v = v + 1 where k = 'generation'");
  }
  if (s.ok()) s = Exec(db_, "commit");
  if (!s.ok()) (void)Exec(db_, "rollback");
  return s;
}

Result<std::vector<DatabaseRecord>> SqliteCatalog::ListDatabases() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "select id, name, path, created_ms from databases order by name");
  if (!s.ok()) return Error(db_, "list databases");
  std::vector<DatabaseRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadDatabase(s));
  if (rc != SQLITE_DONE) return Error(db_, "list databases");
  return out;
}

Result<DatabaseRecord> SqliteCatalog::FindDatabase(const std::string& name_or_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "select id, name, path, created_ms from databases where name = ?1 or id = lower(?1)");
  if (!s.ok()) return Error(db_, "find database");
  s.Text(1, name_or_id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadDatabase(s);
  if (rc != SQLITE_DONE) return Error(db_, "find database");
  return NotFound("Database '" + name_or_id + "' not found.");
}

Status SqliteCatalog::AddDatabase(const DatabaseRecord& db) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    Stmt check(db_, "select 1 from databases where name = ?1 or id = ?2");
    if (!check.ok()) return Error(db_, "add database");
    check.Text(1, db.name).Text(2, db.id);
    if (check.Step() == SQLITE_ROW) {
      return AlreadyExists("A database named '" + db.name + "' (or with its id) already exists.");
    }
    Stmt s(db_, "insert into databases (id, name, path, created_ms) values (?1, ?2, ?3, ?4)");
    if (!s.ok()) return Error(db_, "add database");
    s.Text(1, db.id).Text(2, db.name).Text(3, db.path).Int(4, db.created_ms);
    if (s.Step() != SQLITE_DONE) return Error(db_, "add database");
    return Status::Ok();
  });
}

Status SqliteCatalog::RenameDatabase(const std::string& id, const std::string& new_name) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    Stmt check(db_, "select 1 from databases where name = ?1");
    if (!check.ok()) return Error(db_, "rename database");
    check.Text(1, new_name);
    if (check.Step() == SQLITE_ROW) {
      return AlreadyExists("A database named '" + new_name + "' already exists.");
    }
    Stmt s(db_, "update databases set name = ?2 where id = ?1");
    if (!s.ok()) return Error(db_, "rename database");
    s.Text(1, id).Text(2, new_name);
    if (s.Step() != SQLITE_DONE) return Error(db_, "rename database");
    if (sqlite3_changes(db_) == 0) return NotFound("Database not found.");
    return Status::Ok();
  });
}

Status SqliteCatalog::RemoveDatabase(const std::string& id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    Stmt del(db_, "delete from databases where id = ?1");
    if (!del.ok()) return Error(db_, "remove database");
    del.Text(1, id);
    if (del.Step() != SQLITE_DONE) return Error(db_, "remove database");
    if (sqlite3_changes(db_) == 0) return NotFound("Database not found.");
    Stmt rev(db_,
             "update access_tokens set revoked_ms = ?2 where database_id = ?1 and revoked_ms = 0");
    if (!rev.ok()) return Error(db_, "revoke tokens");
    rev.Text(1, id).Int(2, now_ms);
    if (rev.Step() != SQLITE_DONE) return Error(db_, "revoke tokens");
    return Status::Ok();
  });
}

Status SqliteCatalog::RebindDatabase(const std::string& name, const std::string& new_id,
                                     const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    Stmt s(db_, "update databases set id = ?2, path = ?3 where name = ?1");
    if (!s.ok()) return Error(db_, "rebind database");
    s.Text(1, name).Text(2, new_id).Text(3, path);
    if (s.Step() != SQLITE_DONE) return Error(db_, "rebind database");
    if (sqlite3_changes(db_) == 0) return NotFound("Database '" + name + "' not found.");
    return Status::Ok();
  });
}

Status SqliteCatalog::AddToken(const AccessTokenRecord& t) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    std::string sql = std::string("insert into access_tokens (") + kTokenColumns +
                      ") values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    Stmt s(db_, sql.c_str());
    if (!s.ok()) return Error(db_, "add token");
    s.Text(1, t.id).Text(2, t.name).Text(3, t.database_id).Int(4, t.scope).Text(5, t.hash);
    s.Int(6, t.created_ms).Int(7, t.expires_ms).Int(8, t.revoked_ms).Real(9, t.rate_limit);
    const int rc = s.Step();
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) return AlreadyExists("Token id collision.");
    if (rc != SQLITE_DONE) return Error(db_, "add token");
    return Status::Ok();
  });
}

Result<std::vector<AccessTokenRecord>> SqliteCatalog::ListTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql =
      std::string("select ") + kTokenColumns + " from access_tokens order by created_ms, id";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error(db_, "list tokens");
  std::vector<AccessTokenRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadToken(s));
  if (rc != SQLITE_DONE) return Error(db_, "list tokens");
  return out;
}

Result<AccessTokenRecord> SqliteCatalog::FindToken(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = std::string("select ") + kTokenColumns + " from access_tokens where id = ?1";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return Error(db_, "find token");
  s.Text(1, id);
  int rc = s.Step();
  if (rc == SQLITE_ROW) return ReadToken(s);
  if (rc != SQLITE_DONE) return Error(db_, "find token");
  return NotFound("Access token '" + id + "' not found.");
}

Status SqliteCatalog::RevokeToken(const std::string& id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return WriteTxn([&]() -> Status {
    Stmt find(db_, "select revoked_ms from access_tokens where id = ?1");
    if (!find.ok()) return Error(db_, "revoke token");
    find.Text(1, id);
    const int rc = find.Step();
    if (rc == SQLITE_DONE) return NotFound("Access token '" + id + "' not found.");
    if (rc != SQLITE_ROW) return Error(db_, "revoke token");
    if (find.ColInt(0) != 0) return AlreadyExists("Access token '" + id + "' is already revoked.");
    Stmt s(db_, "update access_tokens set revoked_ms = ?2 where id = ?1");
    if (!s.ok()) return Error(db_, "revoke token");
    s.Text(1, id).Int(2, now_ms);
    if (s.Step() != SQLITE_DONE) return Error(db_, "revoke token");
    return Status::Ok();
  });
}

Result<int64_t> SqliteCatalog::ChangeCounter() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt s(db_, "select v from catalog_meta where k = 'generation'");
  if (!s.ok()) return Error(db_, "read generation");
  if (s.Step() != SQLITE_ROW) return Error(db_, "read generation");
  return s.ColInt(0);
}

}  // namespace kvc::storage
