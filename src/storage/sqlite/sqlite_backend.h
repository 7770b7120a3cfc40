// SQLite storage backend, file-compatible with Deno's own local KV backend: the same tables
// (`kv`, `data_version`, `migration_state`, `queue`, `queue_running`) and migrations, so a file
// made by `Deno.openKv("./x.sqlite")` is served as is and a file we write opens in Deno.
// We add one table of our own, `kvconnect_meta`, holding the database UUID; Deno ignores it.
//
// WAL journal. Sync mode FULL by default: a committed transaction is fsynced before Commit()
// returns, so it survives power loss.
//
// Thread-safety: SqliteBackend is thread-safe; each Reader/Writer owns its own connection and
// is used by one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "storage/backend.h"

namespace kvc::storage {

struct CheckpointCounts;

struct SqliteOptions {
  SyncMode sync = SyncMode::kFull;
  int busy_timeout_ms = 5000;
  int cache_size_kib = 16384;  // per connection
  // Reader connections map up to this many bytes of the database file instead of copying
  // pages with read() (SQLite's mmap_size); 0 turns it off. The writer never maps.
  int64_t reader_mmap_bytes = 0;  // serve defaults to 4 GiB (--sqlite-mmap-bytes)
  // The writer's WAL checkpoints (checkpointer.h): from checkpoint_pages WAL pages on a thread
  // of their own copies the WAL into the database file; at wal_limit_pages (raised to
  // checkpoint_pages if below) the writer does itself. checkpoint_pages 0: SQLite's automatic
  // checkpoint inside the commit at 1000 pages, as SQLite does by default.
  // 4000 rather than SQLite's 1000: a page written by several commits between two checkpoints
  // is copied and fsynced into the database file once, and the file is fsynced 4x less often.
  // (`kvconnect bench` durable sets, 1 x 64, alternated: server CPU per set 18.2 -> 16.2 us on
  // 10,000 keys, 25.1 -> 23.7 on 1,000,000.) The WAL file then stays at about 16 MiB, at most
  // about 64 MiB (wal_limit_pages) if the thread falls behind.
  int64_t checkpoint_pages = 4000;
  int64_t wal_limit_pages = 16000;
  // In sync FULL the writer gathers each commit's WAL writes into one write of up to this many
  // bytes (wal_write_buffer.h); 0 writes each frame as SQLite does.
  size_t wal_buffer_bytes = size_t{1} << 20;
  bool create_if_missing = true;
  std::string vfs;  // SQLite VFS name; empty: the default (tests inject power loss here)
};

class SqliteBackend : public Backend {
 public:
  // Opens the database file at `path` (creating it if options.create_if_missing), migrating
  // it to the current schema.
  static Result<std::unique_ptr<SqliteBackend>> Open(const std::string& path,
                                                     const SqliteOptions& options);
  ~SqliteBackend() override;

  const std::string& database_id() const override { return database_id_; }
  // The only writer (one writer connection per file; Storage::LockWriters keeps other
  // processes out), fail-stop on a failed commit (a failed fsync leaves the outcome unknown),
  // with Deno's queue tables and our change log; no change feed (nobody else writes).
  BackendCapabilities capabilities() const override {
    return {.exclusive_writer = true,
            .on_commit_error = CommitErrorPolicy::kFailStop,
            .change_log = true,
            .queue_store = true};
  }
  Result<int64_t> LoadDataVersion() override;
  Result<std::unique_ptr<Reader>> OpenReader() override;
  Result<std::unique_ptr<Writer>> OpenWriter() override;

  const std::string& path() const { return path_; }
  // The checkpoints its writers' Checkpointers ran (checkpointer.h), since the backend opened.
  const CheckpointCounts& checkpoint_counts() const { return *checkpoint_counts_; }

 private:
  SqliteBackend(std::string path, SqliteOptions options);
  Status Initialize();

  const std::string path_;
  const SqliteOptions options_;
  const std::shared_ptr<CheckpointCounts> checkpoint_counts_;
  std::string database_id_;
};

}  // namespace kvc::storage
