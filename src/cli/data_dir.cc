#include "cli/data_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/random.h"

namespace kvc::cli {
namespace fs = std::filesystem;

Result<std::string> LoadOrCreateSecret(const fs::path& path,
                                       const std::function<std::string()>& make, bool* created) {
  *created = false;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string v = ss.str();
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
    if (v.empty()) return Internal("secret file " + path.string() + " is empty");
    return v;
  }
  std::string v = make();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Internal("cannot create " + path.string() + ": " + std::strerror(errno));
  std::string line = v + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  if (!ok) return Internal("cannot write " + path.string());
  *created = true;
  return v;
}

namespace {
// Opens (creating if needed) the database file at `path` and returns the UUID it carries.
Result<std::string> DatabaseIdOf(const std::string& path, const storage::SqliteOptions& sqlite) {
  auto backend = storage::SqliteBackend::Open(path, sqlite);
  if (!backend.ok()) return Internal("cannot open " + path + ": " + backend.status().message());
  return (*backend)->database_id();
}

// A catalog record for `file` (relative to the data directory) under `name`.
Result<storage::DatabaseRecord> RecordFor(const DataDir& dd, const std::string& name,
                                          const std::string& file,
                                          const storage::SqliteOptions& sqlite) {
  storage::DatabaseRecord rec;
  KVC_ASSIGN_OR_RETURN(rec.id, DatabaseIdOf(dd.Resolve(file), sqlite));
  rec.name = name;
  rec.path = file;
  rec.created_ms = NowUnixMs();
  return rec;
}
}  // namespace

std::string DataDir::Resolve(const std::string& path) const {
  fs::path p(path);
  return p.is_absolute() ? p.string() : (root / p).string();
}

Result<DataDir> OpenDataDir(const std::string& dir, const storage::SqliteOptions& sqlite) {
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create data directory " + dir + ": " + ec.message());
  if (!existed) fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  DataDir dd;
  dd.root = fs::path(dir);
  KVC_ASSIGN_OR_RETURN(dd.catalog,
                       storage::SqliteCatalog::Open((dd.root / "catalog.sqlite3").string()));
  auto found = dd.catalog->FindDatabase(kDefaultDatabase);
  if (found.ok()) return dd;
  if (found.status().code() != StatusCode::kNotFound) return found.status();
  // First start, or a data directory from before the catalog: register default.sqlite3.
  KVC_ASSIGN_OR_RETURN(auto rec, RecordFor(dd, kDefaultDatabase, "default.sqlite3", sqlite));
  Status s = dd.catalog->AddDatabase(rec);
  // Another process may have registered it at the same moment.
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
  return dd;
}

Result<storage::DatabaseRecord> SqliteProvisioner::Create(const std::string& name) {
  const std::string file = "db-" + HexEncode(RandomBytes(8)) + ".sqlite3";
  return RecordFor(*dd_, name, file, sqlite_);
}

Status SqliteProvisioner::Destroy(const storage::DatabaseRecord& database) {
  RemoveDatabaseFiles(dd_->Resolve(database.path));
  return Status::Ok();
}

std::string SqliteProvisioner::Location(const storage::DatabaseRecord& database) const {
  return dd_->Resolve(database.path);
}

Result<storage::DatabaseRecord> CreateDatabase(DataDir& dd, const std::string& name,
                                               const storage::SqliteOptions& sqlite) {
  SqliteProvisioner provisioner(&dd, sqlite);
  service::AdminOps ops(dd.catalog.get(), &provisioner);
  KVC_ASSIGN_OR_RETURN(service::DatabaseInfo info, ops.CreateDatabase(name));
  return std::move(info.record);
}

Status PointDefaultAt(DataDir& dd, const std::string& sqlite_path,
                      const storage::SqliteOptions& sqlite) {
  const std::string abs = fs::absolute(sqlite_path).lexically_normal().string();
  KVC_ASSIGN_OR_RETURN(const std::string id, DatabaseIdOf(abs, sqlite));
  KVC_ASSIGN_OR_RETURN(auto current, dd.catalog->FindDatabase(kDefaultDatabase));
  if (current.id == id && dd.Resolve(current.path) == abs) return Status::Ok();
  return dd.catalog->RebindDatabase(kDefaultDatabase, id, abs);
}

void RemoveDatabaseFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
}

}  // namespace kvc::cli
