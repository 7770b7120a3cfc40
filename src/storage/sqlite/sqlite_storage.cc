#include "storage/sqlite/sqlite_storage.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/random.h"
#include "storage/private_file.h"
#include "storage/sqlite/sqlite_catalog.h"
#include "storage/sqlite/sqlite_util.h"

namespace kvc::storage {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCatalogFile = "catalog.sqlite3";
constexpr const char* kDefaultFile = "default.sqlite3";
constexpr const char* kLockFile = "kvconnect.lock";

// An flock on the lock file, held as long as the descriptor is open.
class FileWriterLock : public WriterLock {
 public:
  explicit FileWriterLock(int fd) : fd_(fd) {}
  ~FileWriterLock() override {
    [[maybe_unused]] const int cleared = ::ftruncate(fd_, 0);  // the pid no longer holds it
    ::close(fd_);                                              // releases the flock
  }
  FileWriterLock(const FileWriterLock&) = delete;
  FileWriterLock& operator=(const FileWriterLock&) = delete;

 private:
  const int fd_;
};

// Opens (creating if needed) the database file at `path` and returns the UUID it carries.
Result<std::string> DatabaseIdOf(const std::string& path, const SqliteOptions& sqlite) {
  auto backend = SqliteBackend::Open(path, sqlite);
  if (!backend.ok()) return IoError("cannot open " + path + ": " + backend.status().message());
  return (*backend)->database_id();
}

void RemoveDatabaseFiles(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix, ec);
}

}  // namespace

Result<std::unique_ptr<SqliteStorage>> SqliteStorage::Open(const StorageOptions& options) {
  const std::string& dir = options.location;
  if (dir.empty()) return InvalidArgument("the data directory must not be empty");
  // New directories are 0700; one the operator made keeps its mode (the files in it are 0600).
  if (Status s = MakePrivateDirectories(dir); !s.ok()) {
    return IoError("cannot create data directory " + dir + ": " + s.message());
  }
  const fs::path root(dir);
  KVC_ASSIGN_OR_RETURN(auto catalog,
                       SqliteCatalog::Open((root / kCatalogFile).string(), options.vfs));
  SqliteOptions sqlite;
  sqlite.vfs = options.vfs;
  sqlite.sync = options.sync;
  sqlite.reader_mmap_bytes = options.mmap_bytes;
  sqlite.checkpoint_pages = options.checkpoint_pages;
  sqlite.wal_limit_pages = options.wal_limit_pages;
  sqlite.wal_buffer_bytes = options.wal_buffer_bytes;
  std::unique_ptr<SqliteStorage> storage(new SqliteStorage(std::move(catalog), root, sqlite));
  KVC_RETURN_IF_ERROR(storage->RegisterDefault());
  if (!options.default_database_file.empty()) {
    KVC_RETURN_IF_ERROR(storage->PointDefaultAt(options.default_database_file));
  }
  return storage;
}

Status SqliteStorage::RegisterDefault() {
  auto found = catalog().FindDatabase(kDefaultDatabase);
  if (found.ok()) return Status::Ok();
  if (found.status().code() != StatusCode::kNotFound) return found.status();
  // First start, or a data directory from before the catalog: register default.sqlite3.
  KVC_ASSIGN_OR_RETURN(auto rec, RecordFor(kDefaultDatabase, kDefaultFile));
  Status s = catalog().AddDatabase(rec);
  // Another process may have registered it at the same moment.
  if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
  return Status::Ok();
}

Status SqliteStorage::PointDefaultAt(const std::string& file) {
  const std::string abs = fs::absolute(file).lexically_normal().string();
  KVC_ASSIGN_OR_RETURN(const std::string id, DatabaseIdOf(abs, sqlite_));
  KVC_ASSIGN_OR_RETURN(auto current, catalog().FindDatabase(kDefaultDatabase));
  if (current.id == id && Resolve(current.location) == abs) return Status::Ok();
  return catalog().RebindDatabase(kDefaultDatabase, id, abs);
}

Result<DatabaseRecord> SqliteStorage::RecordFor(const std::string& name,
                                                const std::string& file) const {
  DatabaseRecord rec;
  KVC_ASSIGN_OR_RETURN(rec.id, DatabaseIdOf(Resolve(file), sqlite_));
  rec.name = name;
  rec.location = file;
  rec.created_ms = NowUnixMs();
  return rec;
}

std::string SqliteStorage::Resolve(const std::string& location) const {
  const fs::path p(location);
  return p.is_absolute() ? p.string() : (root_ / p).string();
}

Result<std::unique_ptr<Backend>> SqliteStorage::OpenBackend(const DatabaseRecord& database) {
  SqliteOptions existing = sqlite_;
  existing.create_if_missing = false;
  KVC_ASSIGN_OR_RETURN(auto backend, SqliteBackend::Open(Resolve(database.location), existing));
  return std::unique_ptr<Backend>(std::move(backend));
}

Result<DatabaseRecord> SqliteStorage::Create(const std::string& name) {
  return RecordFor(name, "db-" + HexEncode(RandomBytes(8)) + ".sqlite3");
}

Result<std::string> SqliteStorage::ScratchDirectory() {
  const fs::path dir = root_ / "tmp";
  KVC_RETURN_IF_ERROR(MakeOwnedPrivateDirectory(dir.string()));
  return dir.string();
}

Result<DatabaseRecord> SqliteStorage::CreateFromSnapshot(const std::string& name,
                                                         const std::string& snapshot_file,
                                                         const std::string& id) {
  const std::string location = "db-" + HexEncode(RandomBytes(8)) + ".sqlite3";
  const std::string path = Resolve(location);
  std::error_code ec;
  fs::rename(snapshot_file, path, ec);
  if (ec) {  // another file system: copy, then remove the original
    ec.clear();
    fs::copy_file(snapshot_file, path, ec);
    if (ec) return IoError("cannot move " + snapshot_file + " to " + path + ": " + ec.message());
    fs::remove(snapshot_file, ec);
  }
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(snapshot_file + suffix, ec);
  Status s = StampDatabaseId(path, id);
  if (!s.ok()) {
    RemoveDatabaseFiles(path);
    if (s.code() == StatusCode::kInvalidArgument) {
      return InvalidArgument(snapshot_file + " is not a Deno KV database file");
    }
    return s;
  }
  return RecordFor(name, location);
}

Result<DatabaseRecord> SqliteStorage::CreateWithId(const std::string& name, const std::string& id) {
  if (!LooksLikeUuid(id)) return InvalidArgument("'" + id + "' is not a database id (a UUID)");
  const std::string location = "db-" + HexEncode(RandomBytes(8)) + ".sqlite3";
  const std::string path = Resolve(location);
  // Made with an id of its own (and every table) first, then given `id`.
  auto made = DatabaseIdOf(path, sqlite_);
  Status s = made.ok() ? StampDatabaseId(path, id) : made.status();
  if (!s.ok()) {
    RemoveDatabaseFiles(path);
    return s;
  }
  return RecordFor(name, location);
}

Status SqliteStorage::StampDatabaseId(const std::string& path, const std::string& id) const {
  sqlite::Connection c("sqlite ");
  KVC_RETURN_IF_ERROR(
      c.Open(path, SQLITE_OPEN_READWRITE, 5000, "pragma synchronous=full", sqlite_.vfs));
  {
    KVC_ASSIGN_OR_RETURN(sqlite::Stmt check,
                         c.PrepareOnce("select count(*) from sqlite_master where name in "
                                       "('kv', 'data_version', 'migration_state')"));
    if (check.Step() != SQLITE_ROW || check.ColumnInt64(0) != 3) {
      return InvalidArgument(path + " is not a Deno KV database file");
    }
  }
  KVC_RETURN_IF_ERROR(
      c.Exec("create table if not exists kvconnect_meta (k text primary key, v text not null)"));
  KVC_ASSIGN_OR_RETURN(sqlite::Stmt put,
                       c.PrepareOnce("insert or replace into kvconnect_meta (k, v) values "
                                     "('database_id', ?1)"));
  put.BindText(1, id);
  if (put.Step() != SQLITE_DONE) return c.Error("store database id");
  return Status::Ok();
}

Status SqliteStorage::Destroy(const DatabaseRecord& database) {
  RemoveDatabaseFiles(Resolve(database.location));
  return Status::Ok();
}

std::string SqliteStorage::Location(const DatabaseRecord& database) const {
  return Resolve(database.location);
}

std::string SqliteStorage::SecretLocation(const std::string& name) const {
  return (root_ / name).string();
}

Result<std::optional<std::string>> SqliteStorage::ReadSecret(const std::string& name) {
  const fs::path path = root_ / name;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (ec) return IoError("cannot read " + path.string() + ": " + ec.message());
    return std::optional<std::string>();
  }
  KVC_RETURN_IF_ERROR(PreparePrivateFile(path.string(), false));  // tightened if older and looser
  std::ifstream in(path);
  if (!in) return IoError("cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return IoError("cannot read " + path.string());
  std::string v = ss.str();
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
  if (v.empty()) return Corruption("secret file " + path.string() + " is empty");
  return std::optional<std::string>(std::move(v));
}

Result<std::string> SqliteStorage::LoadOrCreateSecret(const std::string& name,
                                                      const std::function<std::string()>& make,
                                                      bool* created) {
  *created = false;
  KVC_ASSIGN_OR_RETURN(std::optional<std::string> stored, ReadSecret(name));
  if (stored) return std::move(*stored);
  const fs::path path = root_ / name;
  std::string v = make();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return IoError("cannot create " + path.string() + ": " + std::strerror(errno));
  const std::string line = v + "\n";
  bool ok = ::fchmod(fd, kPrivateFileMode) == 0;  // exactly 0600, whatever the umask
  ok = ok && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  if (!ok) return IoError("cannot write " + path.string());
  *created = true;
  return v;
}

Result<std::unique_ptr<WriterLock>> SqliteStorage::LockWriters() {
  const std::string path = (root_ / kLockFile).string();
  KVC_RETURN_IF_ERROR(PreparePrivateFile(path, true));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return IoError("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) return IoError("cannot lock " + path + ": " + std::strerror(err));
    if (n > 0) {
      holder.assign(buf, static_cast<size_t>(n));
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    }
    return Unavailable("another kvconnect process writes to the data directory " + root_.string() +
                       " (it holds " + path + (holder.empty() ? std::string() : ", pid " + holder) +
                       ")");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // If this fails, only the message of a refused claim is poorer; the lock itself is held.
  [[maybe_unused]] const bool recorded =
      ::ftruncate(fd, 0) == 0 &&
      ::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
  return std::unique_ptr<WriterLock>(std::make_unique<FileWriterLock>(fd));
}

}  // namespace kvc::storage
