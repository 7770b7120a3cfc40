// PowerLossVfs: a SQLite VFS shim that simulates the machine losing power, so tests can check
// what survives a power cut and not only a process crash (after `kill -9` the OS still writes
// out everything the process wrote; after a power cut only what was fsynced is sure to be
// there).
//
// It wraps the default VFS (on Linux "unix") and forwards every call to it, so files on disk
// are real SQLite files any connection can open. On the side it remembers, per file path,
// every write and truncate that no xSync of that file has covered yet, with the bytes each one
// overwrote. Then:
//   - ArmCut(n) makes the n-th write/sync/truncate call from then on (counted across all files)
//     the moment the power goes out: that call and every later I/O call on any file (reads,
//     sizes, opens and deletes too) fail with SQLITE_IOERR_*, as if the machine had died.
//     Locks, shared memory, xFileControl and xClose keep working so connections can be closed.
//   - ApplyPowerLoss(mode, seed), once every connection through the shim is closed, rewrites
//     each file to a state a disk could hold after the cut: kDiscardUnsynced undoes every
//     unsynced write and truncate, newest first; kTorn keeps, drops or tears (keeps some of
//     the 512-byte sectors of) each unsynced write independently, and keeps or undoes each
//     unsynced truncate, as chosen by `seed` (which also sets how likely a write is to
//     survive: about a third, three quarters or nearly all of them, so some power losses keep
//     a commit whose sync never returned). The -shm file of every database is removed
//     (shared memory does not survive a power cut; SQLite rebuilds the wal-index from the
//     WAL). Tracking then starts afresh, so the files can be reopened through the shim or any
//     other VFS.
// The call at which the power goes out is itself performed and tracked as unsynced when it is
// a write or a truncate (part of it may reach the disk, as in a real cut), but reported as
// failed. A file created through the shim counts as created durably (its creation is never
// undone); its contents are tracked like any other file's. Deleting a file is forwarded and
// ends its tracking. Files SQLite opens without a name (temporary files) are not tracked.
//
// The disk model matches what SQLite asks of a disk through the unix VFS
// (SQLITE_IOCAP_POWERSAFE_OVERWRITE, no atomic or sequential writes): an unsynced write may be
// lost or torn at sector granularity, bytes outside a write are never damaged by it, and a
// successful xSync makes everything written to that file before it durable.
//
// Ownership: Register() returns the owner of the registration; SQLite keeps pointers to it
// until it is destroyed (which unregisters the VFS). REQUIRES: no connection uses the VFS when
// it is destroyed.
// Thread-safety: thread-safe. SQLite calls the VFS from any number of connections on any
// threads; the controls may be called from any thread.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace kvc::testutil {

// Monotonic counts of what went through the shim since it was registered.
struct PowerLossCounters {
  int64_t writes = 0;             // xWrite calls
  int64_t syncs = 0;              // xSync calls
  int64_t truncates = 0;          // xTruncate calls
  int64_t cuts = 0;               // times the power went out
  int64_t cuts_in_database = 0;   // ... at a call on a main database file (a WAL checkpoint)
  int64_t cuts_in_wal = 0;        // ... at a call on a -wal file
  int64_t refused_after_cut = 0;  // I/O calls failed because the power was out
};

// What one ApplyPowerLoss did.
struct PowerLossReport {
  int64_t files = 0;             // files rewritten (those with unsynced changes)
  int64_t writes_kept = 0;       // unsynced writes that survived whole
  int64_t writes_dropped = 0;    // ... that were lost whole
  int64_t writes_torn = 0;       // ... of which only some sectors survived
  int64_t truncates_kept = 0;    // unsynced truncates that survived
  int64_t truncates_undone = 0;  // ... that were undone
  int64_t shm_removed = 0;       // -shm files removed
};

class PowerLossVfs {
 public:
  enum class Mode { kDiscardUnsynced, kTorn };

  // Registers a VFS called `name` (not as the default) on top of the current default VFS.
  // Errors: AlreadyExists if a VFS of that name is registered; Internal if SQLite refuses.
  static Result<std::unique_ptr<PowerLossVfs>> Register(const std::string& name);
  ~PowerLossVfs();
  PowerLossVfs(const PowerLossVfs&) = delete;
  PowerLossVfs& operator=(const PowerLossVfs&) = delete;

  // The name to open connections with (sqlite3_open_v2's zVfs, SqliteOptions::vfs, ...).
  const std::string& name() const { return name_; }

  // The n-th write/sync/truncate call from now on (n >= 1, counted across every file) is
  // where the power goes out. Replaces an earlier arming. REQUIRES: n >= 1.
  void ArmCut(int64_t n) KVC_EXCLUDES(mu_);
  // As ArmCut, counting xSync calls only: the power goes out at the n-th sync from now, when
  // everything a commit wrote has been handed to the disk and none of it is known durable.
  void ArmCutAtSync(int64_t n) KVC_EXCLUDES(mu_);
  // Cancels an armed cut that has not happened yet.
  void Disarm() KVC_EXCLUDES(mu_);
  // True from the cut until ApplyPowerLoss.
  bool powered_off() const { return powered_off_.load(std::memory_order_acquire); }
  // Which call the last cut happened at ("write of /path/x.sqlite3-wal"), for test output.
  std::string last_cut() const KVC_EXCLUDES(mu_);

  // Rewrites every tracked file to a state a disk could have after the power went out now
  // (see the file comment), removes the -shm files, and resets tracking and the power (an
  // armed cut is disarmed). Tears are chosen by `seed` (unused for kDiscardUnsynced).
  // Fills *report if not null. Errors: Internal if a file through the shim is still open;
  // IoError if a file cannot be rewritten.
  Status ApplyPowerLoss(Mode mode, uint64_t seed, PowerLossReport* report = nullptr)
      KVC_EXCLUDES(mu_);

  PowerLossCounters counters() const KVC_EXCLUDES(mu_);

 private:
  friend struct PowerLossGlue;  // the C callbacks SQLite calls (power_loss_vfs.cc)

  // An unsynced change to a file: a write of `data` at `offset`, or a truncate to `offset`
  // bytes. `old` holds the bytes at `offset` that the change overwrote or cut off, and
  // `old_size` the file's size before it, which is all it takes to undo it.
  struct Change {
    bool truncate = false;
    int64_t offset = 0;
    std::string data;
    int64_t old_size = 0;
    std::string old;
  };
  struct TrackedFile {
    int kind = 0;  // SQLITE_OPEN_MAIN_DB, SQLITE_OPEN_WAL, ...
    std::vector<Change> unsynced;
  };

  PowerLossVfs(std::string name, sqlite3_vfs* base);

  // Counts a write/sync/truncate call towards an armed cut; true if the power goes out at it.
  bool Tick(int kind, const char* what, const char* path) KVC_REQUIRES(mu_);
  // Arms a cut; see ArmCut and ArmCutAtSync.
  void Arm(int64_t n, bool syncs_only) KVC_EXCLUDES(mu_);
  // Records `change` as unsynced for `path` (nullptr: an untracked temporary file).
  void Track(const char* path, int kind, Change change) KVC_REQUIRES(mu_);

  const std::string name_;
  sqlite3_vfs* const base_;  // the wrapped VFS; owned by SQLite
  sqlite3_vfs vfs_{};        // what SQLite sees; pAppData points back here
  std::atomic<bool> powered_off_{false};

  mutable Mutex mu_;
  int64_t cut_countdown_ KVC_GUARDED_BY(mu_) = 0;    // > 0: armed
  bool cut_syncs_only_ KVC_GUARDED_BY(mu_) = false;  // count xSync calls only
  std::string last_cut_ KVC_GUARDED_BY(mu_);
  int64_t open_files_ KVC_GUARDED_BY(mu_) = 0;
  std::map<std::string, TrackedFile> files_ KVC_GUARDED_BY(mu_);
  std::set<std::string> databases_ KVC_GUARDED_BY(mu_);  // main database paths seen
  PowerLossCounters counters_ KVC_GUARDED_BY(mu_);
};

}  // namespace kvc::testutil
