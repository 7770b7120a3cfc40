#include "testutil/power_loss_vfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "storage/sqlite/vfs_shim.h"

namespace kvc::testutil {
namespace {

// The unit a disk writes atomically, at worst; a torn write keeps some of its sectors.
constexpr int64_t kSectorBytes = 512;

constexpr int kKindMask = SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TRANSIENT_DB |
                          SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_TEMP_JOURNAL |
                          SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_SUPER_JOURNAL | SQLITE_OPEN_WAL;

// What SQLite allocates for one open file of ours: this header, then (at kRealOffset) the
// wrapped VFS's own file object.
struct ShimFile {
  sqlite3_file base;  // first, so SQLite can treat a ShimFile* as a sqlite3_file*
  PowerLossVfs* vfs;
  const char* path;  // SQLite keeps it valid until xClose; nullptr for temporary files
  int kind;          // SQLITE_OPEN_MAIN_DB, SQLITE_OPEN_WAL, ...
  sqlite3_file* real;
};
constexpr size_t kRealOffset = (sizeof(ShimFile) + 15) & ~size_t{15};

ShimFile* Shim(sqlite3_file* f) { return reinterpret_cast<ShimFile*>(f); }

// A file descriptor closed on destruction, with the few calls a rewrite needs.
class PosixFile {
 public:
  explicit PosixFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDWR | O_CLOEXEC)) {}
  ~PosixFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status status() const { return fd_ >= 0 ? Status::Ok() : Error("open"); }
  Status Resize(int64_t size) {
    return ::ftruncate(fd_, static_cast<off_t>(size)) == 0 ? Status::Ok() : Error("ftruncate");
  }
  Status WriteAt(const char* data, size_t n, int64_t offset) {
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, data, n, static_cast<off_t>(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Error("pwrite");
      data += w;
      n -= static_cast<size_t>(w);
      offset += w;
    }
    return Status::Ok();
  }

 private:
  Status Error(const char* what) const {
    return IoError(std::string("power loss: ") + what + " " + path_ + ": " + std::strerror(errno));
  }

  const std::string path_;
  const int fd_;
};

}  // namespace

// The C entry points SQLite calls: each forwards to the wrapped VFS, tracking and cutting as
// the class comment says.
struct PowerLossGlue : storage::sqlite::ForwardedIo<PowerLossGlue> {
  using Change = PowerLossVfs::Change;

  static sqlite3_file* Real(sqlite3_file* file) { return Shim(file)->real; }

  static PowerLossVfs* Owner(sqlite3_vfs* vfs) { return static_cast<PowerLossVfs*>(vfs->pAppData); }

  static int Refuse(PowerLossVfs* v, int rc) KVC_REQUIRES(v->mu_) {
    ++v->counters_.refused_after_cut;
    return rc;
  }
  static int RefuseUnlocked(PowerLossVfs* v, int rc) {
    MutexLock lock(v->mu_);
    return Refuse(v, rc);
  }

  // Fills c->old_size and c->old with the file's size and the bytes in [offset, offset + n)
  // that exist, before a change.
  static int Capture(ShimFile* f, int64_t offset, int64_t n, Change* c) {
    sqlite3_int64 size = 0;
    int rc = f->real->pMethods->xFileSize(f->real, &size);
    if (rc != SQLITE_OK) return rc;
    c->old_size = size;
    const int64_t have = std::min<int64_t>(n, size - offset);
    if (have <= 0) return SQLITE_OK;
    c->old.resize(static_cast<size_t>(have));
    return f->real->pMethods->xRead(f->real, c->old.data(), static_cast<int>(have), offset);
  }

  // sqlite3_io_methods.
  static int Close(sqlite3_file* file) {
    ShimFile* f = Shim(file);
    const int rc = f->real->pMethods->xClose(f->real);
    MutexLock lock(f->vfs->mu_);
    --f->vfs->open_files_;
    return rc;
  }
  static int Read(sqlite3_file* file, void* buf, int amt, sqlite3_int64 offset) {
    ShimFile* f = Shim(file);
    if (f->vfs->powered_off()) return RefuseUnlocked(f->vfs, SQLITE_IOERR_READ);
    return f->real->pMethods->xRead(f->real, buf, amt, offset);
  }
  static int Write(sqlite3_file* file, const void* buf, int amt, sqlite3_int64 offset) {
    ShimFile* f = Shim(file);
    PowerLossVfs* v = f->vfs;
    MutexLock lock(v->mu_);
    if (v->powered_off()) return Refuse(v, SQLITE_IOERR_WRITE);
    ++v->counters_.writes;
    const bool cut = v->Tick(f->kind, "write", f->path);
    Change c;
    if (f->path != nullptr) {
      c.offset = offset;
      c.data.assign(static_cast<const char*>(buf), static_cast<size_t>(amt));
      const int rc = Capture(f, offset, amt, &c);
      if (rc != SQLITE_OK) return rc;
    }
    // At the cut the write still happens (part of it may reach the disk) but it is tracked as
    // unsynced and reported as failed.
    const int rc = f->real->pMethods->xWrite(f->real, buf, amt, offset);
    if (rc == SQLITE_OK) v->Track(f->path, f->kind, std::move(c));
    return cut ? SQLITE_IOERR_WRITE : rc;
  }
  static int Truncate(sqlite3_file* file, sqlite3_int64 size) {
    ShimFile* f = Shim(file);
    PowerLossVfs* v = f->vfs;
    MutexLock lock(v->mu_);
    if (v->powered_off()) return Refuse(v, SQLITE_IOERR_TRUNCATE);
    ++v->counters_.truncates;
    const bool cut = v->Tick(f->kind, "truncate", f->path);
    Change c;
    if (f->path != nullptr) {
      c.truncate = true;
      c.offset = size;
      int rc = Capture(f, size, INT64_MAX / 2, &c);
      if (rc != SQLITE_OK) return rc;
    }
    const int rc = f->real->pMethods->xTruncate(f->real, size);
    if (rc == SQLITE_OK) v->Track(f->path, f->kind, std::move(c));
    return cut ? SQLITE_IOERR_TRUNCATE : rc;
  }
  static int Sync(sqlite3_file* file, int flags) {
    ShimFile* f = Shim(file);
    PowerLossVfs* v = f->vfs;
    MutexLock lock(v->mu_);
    if (v->powered_off()) return Refuse(v, SQLITE_IOERR_FSYNC);
    ++v->counters_.syncs;
    // At the cut the sync never happens: what it would have made durable stays unsynced.
    if (v->Tick(f->kind, "sync", f->path)) return SQLITE_IOERR_FSYNC;
    const int rc = f->real->pMethods->xSync(f->real, flags);
    if (rc == SQLITE_OK && f->path != nullptr) {
      auto it = v->files_.find(f->path);
      if (it != v->files_.end()) it->second.unsynced.clear();
    }
    return rc;
  }
  static int FileSize(sqlite3_file* file, sqlite3_int64* size) {
    ShimFile* f = Shim(file);
    if (f->vfs->powered_off()) return RefuseUnlocked(f->vfs, SQLITE_IOERR_FSTAT);
    return f->real->pMethods->xFileSize(f->real, size);
  }
  // Locks, file controls and shared memory are forwarded by ForwardedIo, even after the cut:
  // shared memory lives in memory (and the -shm file, removed at the power loss), and locks and
  // shared memory must keep working so connections can still be closed.

  // Memory-mapped reads: after the cut, no mapping (SQLite falls back to xRead, which fails).
  static int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amt, void** out) {
    ShimFile* f = Shim(file);
    *out = nullptr;
    if (f->vfs->powered_off() || f->real->pMethods->iVersion < 3) return SQLITE_OK;
    return f->real->pMethods->xFetch(f->real, offset, amt, out);
  }
  static int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
    ShimFile* f = Shim(file);
    if (f->real->pMethods->iVersion < 3) return SQLITE_OK;
    return f->real->pMethods->xUnfetch(f->real, offset, p);
  }

  // sqlite3_vfs.
  static int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags,
                  int* out_flags) {
    PowerLossVfs* v = Owner(vfs);
    ShimFile* f = Shim(file);
    f->base.pMethods = nullptr;  // SQLite calls xClose only if this is set
    if (v->powered_off()) return RefuseUnlocked(v, SQLITE_CANTOPEN);
    f->vfs = v;
    f->path = name;
    f->kind = flags & kKindMask;
    f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
    f->real->pMethods = nullptr;
    const int rc = v->base_->xOpen(v->base_, name, f->real, flags, out_flags);
    if (f->real->pMethods == nullptr) return rc;
    f->base.pMethods = storage::sqlite::ShimIoMethods<PowerLossGlue>(f->real->pMethods->iVersion);
    MutexLock lock(v->mu_);
    ++v->open_files_;
    if (name != nullptr && f->kind == SQLITE_OPEN_MAIN_DB) v->databases_.insert(name);
    return rc;
  }
  static int Delete(sqlite3_vfs* vfs, const char* path, int sync_dir) {
    PowerLossVfs* v = Owner(vfs);
    MutexLock lock(v->mu_);
    if (v->powered_off()) return Refuse(v, SQLITE_IOERR_DELETE);
    const int rc = v->base_->xDelete(v->base_, path, sync_dir);
    v->files_.erase(path);
    return rc;
  }
  static int Access(sqlite3_vfs* vfs, const char* path, int flags, int* out) {
    PowerLossVfs* v = Owner(vfs);
    if (v->powered_off()) return RefuseUnlocked(v, SQLITE_IOERR_ACCESS);
    return v->base_->xAccess(v->base_, path, flags, out);
  }
  static int FullPathname(sqlite3_vfs* vfs, const char* path, int n, char* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xFullPathname(base, path, n, out);
  }
  static void* DlOpen(sqlite3_vfs* vfs, const char* path) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xDlOpen(base, path);
  }
  static void DlError(sqlite3_vfs* vfs, int n, char* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    base->xDlError(base, n, out);
  }
  using Symbol = void (*)();
  static Symbol DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xDlSym(base, handle, symbol);
  }
  static void DlClose(sqlite3_vfs* vfs, void* handle) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    base->xDlClose(base, handle);
  }
  static int Randomness(sqlite3_vfs* vfs, int n, char* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xRandomness(base, n, out);
  }
  static int Sleep(sqlite3_vfs* vfs, int us) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xSleep(base, us);
  }
  static int CurrentTime(sqlite3_vfs* vfs, double* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xCurrentTime(base, out);
  }
  static int GetLastError(sqlite3_vfs* vfs, int n, char* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xGetLastError(base, n, out);
  }
  static int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xCurrentTimeInt64(base, out);
  }
  static int SetSystemCall(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr p) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xSetSystemCall(base, name, p);
  }
  static sqlite3_syscall_ptr GetSystemCall(sqlite3_vfs* vfs, const char* name) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xGetSystemCall(base, name);
  }
  static const char* NextSystemCall(sqlite3_vfs* vfs, const char* name) {
    sqlite3_vfs* base = Owner(vfs)->base_;
    return base->xNextSystemCall(base, name);
  }

  // Rewrites the file at `path` as the power loss leaves it: every change undone, newest
  // first, back to what the last sync made durable; then, for kTorn, the surviving parts of
  // the changes written again, oldest first.
  // `keep_percent`: the odds (kTorn) that a write survives whole; the rest are dropped or torn
  // in equal parts.
  static Status Rewrite(const std::string& path, const std::vector<Change>& changes,
                        PowerLossVfs::Mode mode, int keep_percent, std::mt19937_64& rng,
                        PowerLossReport* r) {
    PosixFile file(path);
    KVC_RETURN_IF_ERROR(file.status());
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
      KVC_RETURN_IF_ERROR(file.Resize(it->old_size));
      KVC_RETURN_IF_ERROR(file.WriteAt(it->old.data(), it->old.size(), it->offset));
    }
    for (const Change& c : changes) {
      if (mode == PowerLossVfs::Mode::kDiscardUnsynced) {
        ++(c.truncate ? r->truncates_undone : r->writes_dropped);
        continue;
      }
      if (c.truncate) {
        if (rng() % 2 == 0) {
          ++r->truncates_undone;
          continue;
        }
        ++r->truncates_kept;
        KVC_RETURN_IF_ERROR(file.Resize(c.offset));
        continue;
      }
      const int roll = static_cast<int>(rng() % 100);
      const int drop_below = keep_percent + (100 - keep_percent) / 2;
      if (roll < keep_percent) {
        ++r->writes_kept;
        KVC_RETURN_IF_ERROR(file.WriteAt(c.data.data(), c.data.size(), c.offset));
      } else if (roll < drop_below) {
        ++r->writes_dropped;
      } else {
        // Each sector the write touched survives on its own, or not.
        ++r->writes_torn;
        const int64_t end = c.offset + static_cast<int64_t>(c.data.size());
        for (int64_t pos = c.offset; pos < end;) {
          const int64_t sector_end = std::min(end, (pos / kSectorBytes + 1) * kSectorBytes);
          if (rng() % 2 == 0) {
            KVC_RETURN_IF_ERROR(file.WriteAt(c.data.data() + (pos - c.offset),
                                             static_cast<size_t>(sector_end - pos), pos));
          }
          pos = sector_end;
        }
      }
    }
    return Status::Ok();
  }
};

Result<std::unique_ptr<PowerLossVfs>> PowerLossVfs::Register(const std::string& name) {
  if (sqlite3_initialize() != SQLITE_OK) return Internal("sqlite3_initialize failed");
  if (sqlite3_vfs_find(name.c_str()) != nullptr) {
    return AlreadyExists("a SQLite VFS named '" + name + "' is already registered");
  }
  sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
  if (base == nullptr) return Internal("SQLite has no default VFS");
  std::unique_ptr<PowerLossVfs> v(new PowerLossVfs(name, base));
  if (sqlite3_vfs_register(&v->vfs_, /*makeDflt=*/0) != SQLITE_OK) {
    return Internal("sqlite3_vfs_register failed for '" + name + "'");
  }
  return v;
}

PowerLossVfs::PowerLossVfs(std::string name, sqlite3_vfs* base)
    : name_(std::move(name)), base_(base) {
  using G = PowerLossGlue;
  vfs_.iVersion = base->iVersion;
  vfs_.szOsFile = static_cast<int>(kRealOffset) + base->szOsFile;
  vfs_.mxPathname = base->mxPathname;
  vfs_.zName = name_.c_str();
  vfs_.pAppData = this;
  vfs_.xOpen = G::Open;
  vfs_.xDelete = G::Delete;
  vfs_.xAccess = G::Access;
  vfs_.xFullPathname = G::FullPathname;
  vfs_.xDlOpen = G::DlOpen;
  vfs_.xDlError = G::DlError;
  vfs_.xDlSym = G::DlSym;
  vfs_.xDlClose = G::DlClose;
  vfs_.xRandomness = G::Randomness;
  vfs_.xSleep = G::Sleep;
  vfs_.xCurrentTime = G::CurrentTime;
  vfs_.xGetLastError = G::GetLastError;
  vfs_.xCurrentTimeInt64 = G::CurrentTimeInt64;
  vfs_.xSetSystemCall = G::SetSystemCall;
  vfs_.xGetSystemCall = G::GetSystemCall;
  vfs_.xNextSystemCall = G::NextSystemCall;
}

PowerLossVfs::~PowerLossVfs() { sqlite3_vfs_unregister(&vfs_); }

void PowerLossVfs::ArmCut(int64_t n) { Arm(n, /*syncs_only=*/false); }

void PowerLossVfs::ArmCutAtSync(int64_t n) { Arm(n, /*syncs_only=*/true); }

void PowerLossVfs::Arm(int64_t n, bool syncs_only) {
  MutexLock lock(mu_);
  cut_countdown_ = std::max<int64_t>(n, 1);
  cut_syncs_only_ = syncs_only;
}

void PowerLossVfs::Disarm() {
  MutexLock lock(mu_);
  cut_countdown_ = 0;
}

std::string PowerLossVfs::last_cut() const {
  MutexLock lock(mu_);
  return last_cut_;
}

PowerLossCounters PowerLossVfs::counters() const {
  MutexLock lock(mu_);
  return counters_;
}

bool PowerLossVfs::Tick(int kind, const char* what, const char* path) {
  if (cut_countdown_ <= 0) return false;
  if (cut_syncs_only_ && std::strcmp(what, "sync") != 0) return false;
  if (--cut_countdown_ > 0) return false;
  powered_off_.store(true, std::memory_order_release);
  ++counters_.cuts;
  if (kind == SQLITE_OPEN_MAIN_DB) ++counters_.cuts_in_database;
  if (kind == SQLITE_OPEN_WAL) ++counters_.cuts_in_wal;
  last_cut_ = std::string(what) + " of " + (path != nullptr ? path : "a temporary file");
  return true;
}

void PowerLossVfs::Track(const char* path, int kind, Change change) {
  if (path == nullptr) return;
  TrackedFile& f = files_[path];
  f.kind = kind;
  f.unsynced.push_back(std::move(change));
}

Status PowerLossVfs::ApplyPowerLoss(Mode mode, uint64_t seed, PowerLossReport* report) {
  MutexLock lock(mu_);
  if (open_files_ > 0) {
    return Internal(std::to_string(open_files_) + " file(s) still open through the VFS '" + name_ +
                    "': close every connection before the power loss");
  }
  PowerLossReport r;
  std::mt19937_64 rng(seed);
  // How much of what was in flight survives varies from one power loss to the next: a third
  // of the writes, most, or nearly all (then a commit whose sync never returned may be whole).
  static constexpr int kKeepPercent[] = {34, 75, 95};
  const int keep_percent = kKeepPercent[rng() % 3];
  for (const auto& [path, file] : files_) {
    if (file.unsynced.empty()) continue;
    KVC_RETURN_IF_ERROR(PowerLossGlue::Rewrite(path, file.unsynced, mode, keep_percent, rng, &r));
    ++r.files;
  }
  for (const std::string& db : databases_) {
    std::error_code ec;
    if (std::filesystem::remove(db + "-shm", ec)) ++r.shm_removed;
  }
  files_.clear();
  databases_.clear();
  cut_countdown_ = 0;
  powered_off_.store(false, std::memory_order_release);
  if (report != nullptr) *report = r;
  return Status::Ok();
}

}  // namespace kvc::testutil
