#include "storage/postgres/pg_catalog.h"

namespace kvc::storage {
namespace {

using pg::Params;
using pg::PgResult;

constexpr const char* kDatabaseColumns = "id::text, name, location, created_ms";
// Selected columns (the uuid read as text) and, in the same order, the columns an insert names.
constexpr const char* kTokenColumns =
    "id, name, database_id::text, scope, hash, created_ms, expires_ms, revoked_ms, rate_limit, "
    "database_ids, all_databases";
constexpr const char* kTokenInsertColumns =
    "id, name, database_id, scope, hash, created_ms, expires_ms, revoked_ms, rate_limit, "
    "database_ids, all_databases";

DatabaseRecord ReadDatabase(const PgResult& r, int i) {
  return DatabaseRecord{.id = r.Bytes(i, 0),
                        .name = r.Bytes(i, 1),
                        .location = r.Bytes(i, 2),
                        .created_ms = r.Int(i, 3)};
}

AccessTokenRecord ReadToken(const PgResult& r, int i) {
  AccessTokenRecord t;
  t.id = r.Bytes(i, 0);
  t.name = r.Bytes(i, 1);
  t.all_databases = r.Int(i, 10) != 0;
  t.database_ids = DecodeTokenDatabases(r.Bytes(i, 9), r.Bytes(i, 2), t.all_databases);
  t.scope = static_cast<int>(r.Int(i, 3));
  t.hash = r.Bytes(i, 4);
  t.created_ms = r.Int(i, 5);
  t.expires_ms = r.Int(i, 6);
  t.revoked_ms = r.Int(i, 7);
  t.rate_limit = r.Double(i, 8);
  return t;
}

}  // namespace

PgCatalog::PgCatalog(const std::string& conninfo)
    : conn_(conninfo, {{"target_session_attrs", "read-write"}}, "postgres catalog") {}

template <typename F>
Status PgCatalog::WriteTxn(F&& body) {
  conn_.CloseIfEndedByServer();
  KVC_RETURN_IF_ERROR(conn_.Exec("begin"));
  conn_.set_pinned(true);  // never finish the body on a new session, outside the transaction
  Status s = body();
  if (s.ok()) s = conn_.Exec("update kvc_catalog_meta set v = v + 1 where k = 'generation'");
  if (s.ok()) s = conn_.Exec("commit");
  conn_.set_pinned(false);
  if (!s.ok()) conn_.RollbackQuietly();
  return s;
}

Result<std::vector<DatabaseRecord>> PgCatalog::ListDatabases() {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Query(std::string("select ") + kDatabaseColumns +
                                                   " from kvc_databases order by name",
                                               {}));
  return pg::AllRows<DatabaseRecord>(r, ReadDatabase);
}

Result<DatabaseRecord> PgCatalog::FindDatabase(const std::string& name_or_id) {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(
      PgResult r, conn_.Query(std::string("select ") + kDatabaseColumns +
                                  " from kvc_databases where name = $1 or id::text = lower($1)",
                              Params().Text(name_or_id)));
  if (r.rows() > 0) return ReadDatabase(r, 0);
  return NotFound("Database '" + name_or_id + "' not found.");
}

Status PgCatalog::AddDatabase(const DatabaseRecord& db) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(PgResult found,
                         conn_.Query("select 1 from kvc_databases where name = $1 or id::text = $2",
                                     Params().Text(db.name).Text(db.id)));
    if (found.rows() > 0) {
      return AlreadyExists("A database named '" + db.name + "' (or with its id) already exists.");
    }
    auto r = conn_.Query(
        "insert into kvc_databases (id, name, location, created_ms) values ($1::uuid, $2, $3, $4)",
        Params().Text(db.id).Text(db.name).Text(db.location).Int64(db.created_ms));
    if (!r.ok()) {
      // Another node may have added it between the check and the insert.
      if (r.status().message().find("duplicate key") != std::string::npos) {
        return AlreadyExists("A database named '" + db.name + "' (or with its id) already exists.");
      }
      return r.status();
    }
    return Status::Ok();
  });
}

Status PgCatalog::RenameDatabase(const std::string& id, const std::string& new_name) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(PgResult found, conn_.Query("select 1 from kvc_databases where name = $1",
                                                     Params().Text(new_name)));
    if (found.rows() > 0) {
      return AlreadyExists("A database named '" + new_name + "' already exists.");
    }
    KVC_ASSIGN_OR_RETURN(PgResult r,
                         conn_.Query("update kvc_databases set name = $2 where id::text = $1",
                                     Params().Text(id).Text(new_name)));
    if (r.Affected() == 0) return NotFound("Database not found.");
    return Status::Ok();
  });
}

Status PgCatalog::RemoveDatabase(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Query("delete from kvc_databases where id::text = $1",
                                                 Params().Text(id)));
    if (r.Affected() == 0) return NotFound("Database not found.");
    // The tokens that may open it (the comma-bounded match is exact: ids have no comma).
    KVC_ASSIGN_OR_RETURN(
        PgResult found,
        conn_.Query(std::string("select ") + kTokenColumns +
                        " from kvc_access_tokens where all_databases = 0 and (database_id::text "
                        "= $1 or strpos(',' || database_ids || ',', ',' || $1::text || ',') > 0) "
                        "for update",
                    Params().Text(id)));
    for (int i = 0; i < found.rows(); ++i) {
      AccessTokenRecord t = ReadToken(found, i);
      if (!RemoveDatabaseFromToken(&t, id, now_ms)) continue;
      KVC_ASSIGN_OR_RETURN(PgResult up,
                           conn_.Query("update kvc_access_tokens set database_ids = $2, "
                                       "database_id = $3::uuid, revoked_ms = $4 where id = $1",
                                       Params()
                                           .Text(t.id)
                                           .Text(EncodeTokenDatabases(t.database_ids))
                                           .Text(LegacyTokenDatabaseId(t))
                                           .Int64(t.revoked_ms)));
    }
    return Status::Ok();
  });
}

Status PgCatalog::RebindDatabase(const std::string& name, const std::string& new_id,
                                 const std::string& location) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(
        PgResult r,
        conn_.Query("update kvc_databases set id = $2::uuid, location = $3 where name = $1",
                    Params().Text(name).Text(new_id).Text(location)));
    if (r.Affected() == 0) return NotFound("Database '" + name + "' not found.");
    return Status::Ok();
  });
}

Status PgCatalog::AddToken(const AccessTokenRecord& t) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    auto r = conn_.Query(std::string("insert into kvc_access_tokens (") + kTokenInsertColumns +
                             ") values ($1, $2, $3::uuid, $4, $5, $6, $7, $8, $9, $10, $11)",
                         Params()
                             .Text(t.id)
                             .Text(t.name)
                             .Text(LegacyTokenDatabaseId(t))
                             .Int32(t.scope)
                             .Text(t.hash)
                             .Int64(t.created_ms)
                             .Int64(t.expires_ms)
                             .Int64(t.revoked_ms)
                             .Double(t.rate_limit)
                             .Text(EncodeTokenDatabases(t.database_ids))
                             .Int32(t.all_databases ? 1 : 0));
    if (!r.ok() && r.status().message().find("duplicate key") != std::string::npos) {
      return AlreadyExists("Token id collision.");
    }
    return r.status();
  });
}

Result<std::vector<AccessTokenRecord>> PgCatalog::ListTokens() {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(PgResult r,
                       conn_.Query(std::string("select ") + kTokenColumns +
                                       " from kvc_access_tokens order by created_ms, id",
                                   {}));
  return pg::AllRows<AccessTokenRecord>(r, ReadToken);
}

Result<AccessTokenRecord> PgCatalog::FindToken(const std::string& id) {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(PgResult r, conn_.Query(std::string("select ") + kTokenColumns +
                                                   " from kvc_access_tokens where id = $1",
                                               Params().Text(id)));
  if (r.rows() > 0) return ReadToken(r, 0);
  return NotFound("Access token '" + id + "' not found.");
}

Status PgCatalog::RevokeToken(const std::string& id, int64_t now_ms) {
  MutexLock lock(mu_);
  return WriteTxn([&]() KVC_REQUIRES(mu_) -> Status {
    KVC_ASSIGN_OR_RETURN(
        PgResult found,
        conn_.Query("select revoked_ms from kvc_access_tokens where id = $1 for update",
                    Params().Text(id)));
    if (found.rows() == 0) return NotFound("Access token '" + id + "' not found.");
    if (found.Int(0, 0) != 0) {
      return AlreadyExists("Access token '" + id + "' is already revoked.");
    }
    KVC_ASSIGN_OR_RETURN(PgResult r,
                         conn_.Query("update kvc_access_tokens set revoked_ms = $2 where id = $1",
                                     Params().Text(id).Int64(now_ms)));
    return Status::Ok();
  });
}

Result<int64_t> PgCatalog::ChangeCounter() {
  MutexLock lock(mu_);
  KVC_ASSIGN_OR_RETURN(PgResult r,
                       conn_.Query("select v from kvc_catalog_meta where k = 'generation'", {}));
  if (r.rows() == 0) return Corruption("postgres catalog: the change counter row is missing");
  return r.Int(0, 0);
}

}  // namespace kvc::storage
