// Checkpointer: SQLite's WAL checkpoints moved off the writer's commit path.
//
// By default SQLite runs a checkpoint inside the commit that takes the WAL past 1000 pages: that
// commit, and every write waiting behind it in the group commit, waits while pages are copied
// into the database file and the file is fsynced. (Measured with no checkpoint at all, durable
// sets at 64 in flight had a p99 of about 7.5 ms instead of 10 ms. With this thread, on a
// 2-core machine where it competes with the server for CPU, `kvconnect bench` durable sets at
// 64 in flight ran a median 11% faster over six alternated rounds; the p99 did not measurably
// change.) Here the writer connection's WAL hook wakes a thread with a connection of its own at
// `wake_pages`, which runs PASSIVE checkpoints: they never wait for the writer or for readers,
// and readers never wait for them.
//
// A passive checkpoint beside a busy writer copies only the frames that were in the WAL when it
// began, and SQLite writes the WAL from its start again only when a new write transaction finds
// every frame copied. So at `limit_pages` the writer runs a passive checkpoint itself, inside
// the commit as SQLite would have: the thread has copied most pages by then, the writer copies
// the rest, and the next write restarts the WAL. The WAL stays within about `limit_pages` plus
// one commit (unless a reader keeps an old snapshot open, as with SQLite's own checkpoints).
// Durability is unchanged: a commit is acknowledged once its WAL frames are synced, and a
// checkpoint only copies synced frames.
//
// Ownership: the writer (sqlite_backend.cc) owns it, and destroys it before its own connection.
// The checkpointer owns its thread and its connection.
// Thread-safety: OnCommit is called on the writer's thread (from SQLite's WAL hook); everything
// else runs on the checkpointer's own thread; CheckpointCounts are atomics.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "common/worker_thread.h"
#include "storage/sqlite/sqlite_util.h"

namespace kvc::storage {

struct SqliteOptions;

// How many checkpoints ran where; kept by the backend across its writers (read them any time).
struct CheckpointCounts {
  std::atomic<int64_t> background{0};  // the thread's, that completed
  std::atomic<int64_t> by_writer{0};   // the writer's own at the WAL limit, that completed
  std::atomic<int64_t> busy{0};        // the thread's that found another checkpoint running
};

class Checkpointer {
 public:
  // Opens the checkpoint connection to `path` (with `options`' VFS and busy timeout) and starts
  // the thread, then hooks `writer`: SQLite's own automatic checkpoints are turned off there.
  // Counts into `counts`.
  // REQUIRES: 0 < wake_pages <= limit_pages; `writer` outlives the Checkpointer.
  static Result<std::unique_ptr<Checkpointer>> Start(sqlite3* writer, const std::string& path,
                                                     const SqliteOptions& options,
                                                     int64_t wake_pages, int64_t limit_pages,
                                                     std::shared_ptr<CheckpointCounts> counts);
  // Unhooks the writer, stops and joins the thread, closes the connection.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

 private:
  Checkpointer(sqlite3* writer, int64_t wake_pages, int64_t limit_pages,
               std::shared_ptr<CheckpointCounts> counts);
  // SQLite's WAL hook on the writer connection, after each commit: `wal_pages` is the WAL's size.
  static int OnCommit(void* self, sqlite3* db, const char* schema, int wal_pages);
  void Loop();

  sqlite3* const writer_;
  const int64_t wake_pages_;
  const int64_t limit_pages_;
  const std::shared_ptr<CheckpointCounts> counts_;
  sqlite::Connection conn_;  // the thread's, once Start returns

  Mutex mu_;
  CondVar cv_;
  bool wanted_ KVC_GUARDED_BY(mu_) = false;  // a wake not yet served
  // What the hook last saw, and the frames (from the WAL's start) the thread's last checkpoint
  // copied: the thread is woken again only when wake_pages more have been written since, so
  // that a busy writer does not get a checkpoint (and a database fsync) per commit.
  int64_t last_pages_ KVC_GUARDED_BY(mu_) = 0;
  int64_t copied_ KVC_GUARDED_BY(mu_) = 0;
  // Counts the WAL restarts the hook saw: a checkpoint that ran across one copied frames of the
  // WAL before it, and must not set copied_.
  int64_t restarts_ KVC_GUARDED_BY(mu_) = 0;
  bool failing_ KVC_GUARDED_BY(mu_) = false;  // the last background checkpoint failed (logged)
  WorkerThread worker_;
};

}  // namespace kvc::storage
