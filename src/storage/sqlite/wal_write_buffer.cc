#include "storage/sqlite/wal_write_buffer.h"

#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "storage/sqlite/vfs_shim.h"

namespace kvc::storage::sqlite {
namespace {

// The largest buffer one may ask for (serve --sqlite-wal-buffer-bytes checks the same bound).
constexpr size_t kMaxBufferBytes = size_t{64} << 20;

// Our VFS: a copy of the wrapped VFS's table with our xOpen and a larger file object. The
// other entries are the wrapped VFS's own functions, and SQLite calls them with a pointer to
// this copy; they find their state through pAppData and the sizes in the table, which the copy
// keeps, so they behave as if called on the original.
struct BufferVfs {
  sqlite3_vfs vfs;  // first, so SQLite can treat a BufferVfs* as a sqlite3_vfs*
  sqlite3_vfs* base;
  size_t buffer_bytes;
  std::string name;
};

// The writes gathered for a WAL file: bytes [start, start + data.size()) of the file.
struct Pending {
  int64_t start = 0;
  std::vector<char> data;
};

// What SQLite allocates for one open WAL file: this header, then (at kRealOffset) the wrapped
// VFS's own file object. Files of other kinds are the wrapped VFS's object alone.
struct BufferedFile {
  sqlite3_file base;  // first, so SQLite can treat a BufferedFile* as a sqlite3_file*
  sqlite3_file* real;
  size_t capacity;
  Pending* pending;  // owned: allocated in Open, deleted in Close
};
constexpr size_t kRealOffset = (sizeof(BufferedFile) + 15) & ~size_t{15};

BufferedFile* Buffered(sqlite3_file* f) { return reinterpret_cast<BufferedFile*>(f); }
const sqlite3_io_methods* Methods(const BufferedFile* f) { return f->real->pMethods; }

// The most one xWrite to the wrapped VFS carries: SQLite's unix VFS writes at most 128 KiB - 1
// bytes per pwrite() (it masks the length with 0x1ffff, so a larger write could be cut to 0
// bytes and reported as a full disk). A commit of 30 pages is about 124 KiB of frames.
constexpr size_t kMaxWriteBytes = 124 << 10;

// Writes the gathered bytes to the wrapped file, in as few calls as kMaxWriteBytes allows. The
// buffer is empty afterwards even if that failed: SQLite then fails the transaction that wrote
// them, and it never counts on bytes a failed write held.
int Flush(BufferedFile* f) {
  Pending& p = *f->pending;
  int rc = SQLITE_OK;
  for (size_t done = 0; done < p.data.size() && rc == SQLITE_OK; done += kMaxWriteBytes) {
    const size_t n = std::min(kMaxWriteBytes, p.data.size() - done);
    rc = Methods(f)->xWrite(f->real, p.data.data() + done, static_cast<int>(n),
                            p.start + static_cast<int64_t>(done));
  }
  p.data.clear();
  return rc;
}

// sqlite3_io_methods of a WAL file. Everything that looks at the file's bytes or size, or
// promises they are on disk, first flushes (the header's list); the rest passes through.
struct WalFile : ForwardedIo<WalFile> {
  static sqlite3_file* Real(sqlite3_file* file) { return Buffered(file)->real; }

  static int Close(sqlite3_file* file) {
    BufferedFile* f = Buffered(file);
    const int flushed = Flush(f);
    const int closed = Methods(f)->xClose(f->real);
    delete f->pending;
    f->pending = nullptr;
    return flushed != SQLITE_OK ? flushed : closed;
  }
  static int Read(sqlite3_file* file, void* buf, int amt, sqlite3_int64 offset) {
    BufferedFile* f = Buffered(file);
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return Methods(f)->xRead(f->real, buf, amt, offset);
  }
  static int Write(sqlite3_file* file, const void* buf, int amt, sqlite3_int64 offset) {
    BufferedFile* f = Buffered(file);
    Pending& p = *f->pending;
    const auto n = static_cast<size_t>(amt);
    const bool contiguous =
        !p.data.empty() && offset == p.start + static_cast<int64_t>(p.data.size());
    if (!contiguous || p.data.size() + n > f->capacity) {
      if (int rc = Flush(f); rc != SQLITE_OK) return rc;
      if (n >= f->capacity) return Methods(f)->xWrite(f->real, buf, amt, offset);
      p.start = offset;
    }
    const char* bytes = static_cast<const char*>(buf);
    p.data.insert(p.data.end(), bytes, bytes + n);
    return SQLITE_OK;
  }
  static int Truncate(sqlite3_file* file, sqlite3_int64 size) {
    BufferedFile* f = Buffered(file);
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return Methods(f)->xTruncate(f->real, size);
  }
  static int Sync(sqlite3_file* file, int flags) {
    BufferedFile* f = Buffered(file);
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return Methods(f)->xSync(f->real, flags);
  }
  static int FileSize(sqlite3_file* file, sqlite3_int64* size) {
    BufferedFile* f = Buffered(file);
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return Methods(f)->xFileSize(f->real, size);
  }
  static int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amt, void** out) {
    BufferedFile* f = Buffered(file);
    if (int rc = Flush(f); rc != SQLITE_OK) return rc;
    return Methods(f)->xFetch(f->real, offset, amt, out);
  }
};

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  const auto* v = reinterpret_cast<const BufferVfs*>(vfs);
  if ((flags & SQLITE_OPEN_WAL) == 0) return v->base->xOpen(v->base, name, file, flags, out_flags);
  BufferedFile* f = Buffered(file);
  f->base.pMethods = nullptr;  // SQLite calls xClose only if this is set
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
  f->real->pMethods = nullptr;
  const int rc = v->base->xOpen(v->base, name, f->real, flags, out_flags);
  if (f->real->pMethods == nullptr) return rc;
  f->pending = new (std::nothrow) Pending;
  if (f->pending == nullptr) {
    f->real->pMethods->xClose(f->real);
    return SQLITE_NOMEM;
  }
  f->capacity = v->buffer_bytes;
  f->base.pMethods = ShimIoMethods<WalFile>(f->real->pMethods->iVersion);
  return rc;
}

Mutex registry_mu;

// Points `v` at `wrapped`: its table with our name, xOpen and file size. The link SQLite keeps
// in a registered VFS (pNext) stays as it is.
void Wrap(BufferVfs* v, sqlite3_vfs* wrapped) {
  sqlite3_vfs* const next = v->vfs.pNext;
  v->vfs = *wrapped;
  v->base = wrapped;
  v->vfs.zName = v->name.c_str();
  v->vfs.pNext = next;
  v->vfs.xOpen = Open;
  v->vfs.szOsFile = static_cast<int>(kRealOffset) + wrapped->szOsFile;
}

}  // namespace

Result<std::string> WalWriteBufferVfs(const std::string& base, size_t buffer_bytes) {
  if (buffer_bytes == 0 || buffer_bytes > kMaxBufferBytes) {
    return InvalidArgument("the WAL write buffer must be 1 to " + std::to_string(kMaxBufferBytes) +
                           " bytes, not " + std::to_string(buffer_bytes));
  }
  MutexLock lock(registry_mu);
  sqlite3_vfs* wrapped = sqlite3_vfs_find(base.empty() ? nullptr : base.c_str());
  if (wrapped == nullptr) return InvalidArgument("no SQLite VFS is named \"" + base + "\"");
  // Keyed by (base, size); the entries are never removed: SQLite keeps pointers to them.
  static auto* registry = new std::map<std::pair<std::string, size_t>, std::unique_ptr<BufferVfs>>;
  auto& slot = (*registry)[{base, buffer_bytes}];
  if (slot) {
    // A VFS registered anew under the wrapped one's name (tests do, one per test) is wrapped
    // from now on; no connection can still use the one it replaced (it was unregistered).
    if (slot->base != wrapped) Wrap(slot.get(), wrapped);
    return slot->name;
  }
  auto v = std::make_unique<BufferVfs>();
  v->buffer_bytes = buffer_bytes;
  v->name = "kvc-wal-buffer-" + std::to_string(buffer_bytes) + "-" + wrapped->zName;
  Wrap(v.get(), wrapped);
  if (int rc = sqlite3_vfs_register(&v->vfs, /*makeDflt=*/0); rc != SQLITE_OK) {
    return IoError(std::string("cannot register the WAL write buffer VFS: ") + sqlite3_errstr(rc));
  }
  slot = std::move(v);
  return slot->name;
}

}  // namespace kvc::storage::sqlite
