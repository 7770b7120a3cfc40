// Building blocks for a SQLite VFS that wraps another one file by file (wal_write_buffer.cc, and
// the tests' testutil::PowerLossVfs): the calls a wrapper passes through unchanged, and the
// method tables SQLite reads.
//
//   struct MyFile : ForwardedIo<MyFile> {
//     static sqlite3_file* Real(sqlite3_file* f);  // the wrapped VFS's file object inside f
//     static int Close(sqlite3_file*); ...         // the calls it changes (see ShimIoMethods)
//   };
//   file->pMethods = ShimIoMethods<MyFile>(real->pMethods->iVersion);
//
// Thread-safety: stateless; the tables are constants.
#pragma once

#include <sqlite3.h>

#include <algorithm>

namespace kvc::storage::sqlite {

// The io methods a wrapper forwards as they are: locks, file controls, sector size and device
// characteristics, shared memory, and memory-mapped reads. `File::Real(f)` names the wrapped
// file. A wrapper may declare any of these itself; its own then takes their place.
template <typename File>
struct ForwardedIo {
  static sqlite3_file* R(sqlite3_file* f) { return File::Real(f); }
  static int Lock(sqlite3_file* f, int level) { return R(f)->pMethods->xLock(R(f), level); }
  static int Unlock(sqlite3_file* f, int level) { return R(f)->pMethods->xUnlock(R(f), level); }
  static int CheckReservedLock(sqlite3_file* f, int* out) {
    return R(f)->pMethods->xCheckReservedLock(R(f), out);
  }
  static int FileControl(sqlite3_file* f, int op, void* arg) {
    return R(f)->pMethods->xFileControl(R(f), op, arg);
  }
  static int SectorSize(sqlite3_file* f) { return R(f)->pMethods->xSectorSize(R(f)); }
  static int DeviceCharacteristics(sqlite3_file* f) {
    return R(f)->pMethods->xDeviceCharacteristics(R(f));
  }
  static int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
    return R(f)->pMethods->xShmMap(R(f), region, size, extend, out);
  }
  static int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
    return R(f)->pMethods->xShmLock(R(f), offset, n, flags);
  }
  static void ShmBarrier(sqlite3_file* f) { R(f)->pMethods->xShmBarrier(R(f)); }
  static int ShmUnmap(sqlite3_file* f, int delete_flag) {
    return R(f)->pMethods->xShmUnmap(R(f), delete_flag);
  }
  static int Fetch(sqlite3_file* f, sqlite3_int64 offset, int amt, void** out) {
    return R(f)->pMethods->xFetch(R(f), offset, amt, out);
  }
  static int Unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
    return R(f)->pMethods->xUnfetch(R(f), offset, p);
  }
};

// File's methods (Close, Read, Write, Truncate, Sync, FileSize and those of ForwardedIo) as a
// table with the iVersion of the wrapped file's (1 to 3), so SQLite uses exactly the optional
// methods (shared memory, mmap) that the wrapped file has.
template <typename File>
const sqlite3_io_methods* ShimIoMethods(int version) {
  static constexpr auto kMake = [](int v) {
    sqlite3_io_methods m{};
    m.iVersion = v;
    m.xClose = File::Close;
    m.xRead = File::Read;
    m.xWrite = File::Write;
    m.xTruncate = File::Truncate;
    m.xSync = File::Sync;
    m.xFileSize = File::FileSize;
    m.xLock = File::Lock;
    m.xUnlock = File::Unlock;
    m.xCheckReservedLock = File::CheckReservedLock;
    m.xFileControl = File::FileControl;
    m.xSectorSize = File::SectorSize;
    m.xDeviceCharacteristics = File::DeviceCharacteristics;
    m.xShmMap = File::ShmMap;
    m.xShmLock = File::ShmLock;
    m.xShmBarrier = File::ShmBarrier;
    m.xShmUnmap = File::ShmUnmap;
    m.xFetch = File::Fetch;
    m.xUnfetch = File::Unfetch;
    return m;
  };
  static constexpr sqlite3_io_methods kTables[3] = {kMake(1), kMake(2), kMake(3)};
  return &kTables[std::clamp(version, 1, 3) - 1];
}

}  // namespace kvc::storage::sqlite
