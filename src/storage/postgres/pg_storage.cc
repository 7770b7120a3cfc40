#include "storage/postgres/pg_storage.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/clock.h"
#include "common/random.h"
#include "storage/postgres/pg_catalog.h"
#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_schema.h"
#include "storage/private_file.h"
#include "storage/snapshot_file.h"

namespace kvc::storage {
namespace {

namespace fs = std::filesystem;
using pg::Connection;
using pg::Params;
using pg::PgResult;

class NoClaim : public WriterLock {};

// Rows per transaction when a snapshot file is loaded (CreateFromSnapshot).
constexpr int32_t kSnapshotLoadRows = 1000;

pg::Connection Admin(const StorageOptions& o, const char* what) {
  return pg::Connection(
      o.location,
      {{"target_session_attrs", "read-write"}, {"application_name", o.pg.application_name}}, what);
}

}  // namespace

std::string RedactConninfo(const std::string& conninfo) {
  std::string out = conninfo;
  // keyword=value form
  for (size_t at = out.find("password="); at != std::string::npos;
       at = out.find("password=", at + 1)) {
    size_t v = at + 9;
    size_t end = v;
    if (end < out.size() && out[end] == '\'') {
      ++end;
      while (end < out.size() && out[end] != '\'') end += out[end] == '\\' ? 2 : 1;
      if (end < out.size()) ++end;
    } else {
      while (end < out.size() && out[end] != ' ' && out[end] != '&') ++end;
    }
    out.replace(v, std::min(end, out.size()) - v, "***");
  }
  // URI form: scheme://user:password@host
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t at = out.find('@', scheme);
    const size_t colon = out.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at) {
      out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  return out;
}

PgStorage::PgStorage(std::unique_ptr<Catalog> catalog, StorageOptions options,
                     std::string description)
    : Storage(std::move(catalog)),
      options_(std::move(options)),
      description_(std::move(description)),
      nodes_(std::make_unique<PgNodeRegistry>(options_.location, options_.read_location,
                                              use_replica_)) {}

Result<std::unique_ptr<PgStorage>> PgStorage::Open(const StorageOptions& options) {
  if (options.location.empty()) {
    return InvalidArgument("the PostgreSQL connection string is empty");
  }
  {
    Connection c = Admin(options, "postgres schema");
    KVC_RETURN_IF_ERROR(pg::MigrateSchema(c));
  }
  std::unique_ptr<PgStorage> s(new PgStorage(std::make_unique<PgCatalog>(options.location), options,
                                             "postgres:" + RedactConninfo(options.location)));
  KVC_RETURN_IF_ERROR(s->RegisterDefault());
  return s;
}

Status PgStorage::RegisterDefault() {
  auto found = catalog().FindDatabase(kDefaultDatabase);
  if (found.ok()) return Status::Ok();
  if (found.status().code() != StatusCode::kNotFound) return found.status();
  KVC_ASSIGN_OR_RETURN(DatabaseRecord rec, Create(kDefaultDatabase));
  Status s = catalog().AddDatabase(rec);
  if (!s.ok() && s.code() == StatusCode::kAlreadyExists) {
    (void)Destroy(rec);  // another node registered it at the same moment
    return Status::Ok();
  }
  return s;
}

Result<DatabaseRecord> PgStorage::Create(const std::string& name) {
  return CreateWithId(name, NewUuidV4());
}

Result<DatabaseRecord> PgStorage::CreateWithId(const std::string& name, const std::string& id) {
  if (!LooksLikeUuid(id)) return InvalidArgument("'" + id + "' is not a database id (a UUID)");
  Connection c = Admin(options_, "postgres create");
  // The timeline it is created on, so a failover before its first write still jumps.
  auto r = c.Query(
      "insert into kvc_data_version (db, version, timeline) values ($1::uuid, 0, "
      "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)",
      Params().Text(id));
  if (!r.ok()) {
    if (r.status().message().find("duplicate key") != std::string::npos) {
      return AlreadyExists("PostgreSQL already holds a database with id " + id);
    }
    return r.status();
  }
  DatabaseRecord rec;
  rec.id = id;
  rec.name = name;
  rec.location = "postgres";
  rec.created_ms = NowUnixMs();
  return rec;
}

Status PgStorage::Destroy(const DatabaseRecord& database) {
  Connection c = Admin(options_, "postgres destroy");
  KVC_RETURN_IF_ERROR(c.Exec("begin"));
  c.set_pinned(true);  // all tables or none
  Status s = Status::Ok();
  for (const char* t : {"kvc_kv", "kvc_changes", "kvc_queue", "kvc_queue_running",
                        "kvc_queue_state", "kvc_queue_dead", "kvc_data_version"}) {
    s = c.Query(std::string("delete from ") + t + " where db = $1::uuid",
                Params().Text(database.id))
            .status();
    if (!s.ok()) break;
  }
  if (s.ok()) s = c.Exec("commit");
  if (!s.ok()) c.RollbackQuietly();
  return s;
}

std::string PgStorage::Location(const DatabaseRecord& /*database*/) const {
  return description_;  // its rows carry its id
}

Result<std::unique_ptr<Backend>> PgStorage::OpenBackend(const DatabaseRecord& database) {
  PgBackendOptions o;
  o.conninfo = options_.location;
  o.read_conninfo = options_.read_location;
  o.use_replica = use_replica_;
  o.database_id = database.id;
  o.tuning = options_.pg;
  KVC_ASSIGN_OR_RETURN(auto b, PgBackend::Open(o));
  return std::unique_ptr<Backend>(std::move(b));
}

Result<std::string> PgStorage::LoadOrCreateSecret(const std::string& name,
                                                  const std::function<std::string()>& make,
                                                  bool* created) {
  Connection c = Admin(options_, "postgres secret");
  const std::string fresh = make();
  KVC_ASSIGN_OR_RETURN(
      PgResult ins,
      c.Query("insert into kvc_secrets (name, value, created_ms) values ($1, $2, $3) on "
              "conflict (name) do nothing",
              Params().Text(name).Bytes(fresh).Int64(NowUnixMs())));
  *created = ins.Affected() == 1;
  KVC_ASSIGN_OR_RETURN(
      PgResult r, c.Query("select value from kvc_secrets where name = $1", Params().Text(name)));
  if (r.rows() == 0 || r.Bytes(0, 0).empty()) {
    return Corruption("the secret '" + name + "' in PostgreSQL is empty");
  }
  return r.Bytes(0, 0);
}

Result<std::optional<std::string>> PgStorage::ReadSecret(const std::string& name) {
  Connection c = Admin(options_, "postgres secret");
  KVC_ASSIGN_OR_RETURN(
      PgResult r, c.Query("select value from kvc_secrets where name = $1", Params().Text(name)));
  if (r.rows() == 0) return std::optional<std::string>();
  if (r.Bytes(0, 0).empty()) return Corruption("the secret '" + name + "' in PostgreSQL is empty");
  return std::optional<std::string>(r.Bytes(0, 0));
}

std::string PgStorage::SecretLocation(const std::string& name) const {
  return description_ + " (table kvc_secrets, row '" + name + "')";
}

Result<std::unique_ptr<WriterLock>> PgStorage::LockWriters() {
  return std::unique_ptr<WriterLock>(std::make_unique<NoClaim>());
}

Result<std::string> PgStorage::ScratchDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir =
      fs::path(tmp && *tmp ? tmp : "/tmp") / ("kvconnect-" + std::to_string(::getuid()));
  // A shared place: refused if another user made it first (storage/private_file.h).
  KVC_RETURN_IF_ERROR(MakeOwnedPrivateDirectory(dir.string()));
  return dir.string();
}

Result<DatabaseRecord> PgStorage::CreateFromSnapshot(const std::string& name,
                                                     const std::string& snapshot_file,
                                                     const std::string& id) {
  auto remove_file = [&] {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      fs::remove(snapshot_file + suffix, ec);
  };
  Result<DatabaseRecord> rec = CreateWithId(name, id);
  if (!rec.ok()) {
    remove_file();
    return rec.status();
  }
  // The file's rows and queue, loaded into the new database's rows.
  Status s = [&]() -> Status {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> dest, OpenBackend(*rec));
    return FillFromSnapshotFile(snapshot_file, *dest, kSnapshotLoadRows).status();
  }();
  remove_file();
  if (!s.ok()) {
    (void)Destroy(*rec);
    return s;
  }
  return rec;
}

}  // namespace kvc::storage
