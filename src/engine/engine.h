// Engine: the transactional KV semantics of one database on top of a storage::Backend.
//
// - Reads run on a pool of reader threads, each with its own connection; all ranges of one
//   request come from one snapshot. Expired rows are invisible at once.
// - Writes go to one writer thread that commits them in groups: every write queued at the
//   moment the writer wakes shares one transaction and one fsync, yet each keeps its own checks,
//   its own strictly increasing versionstamp and all-or-nothing effect (one savepoint each).
//   Nothing waits to fill a batch, so a lone write has no added latency.
// - Versionstamps are allocated here (not in storage): each committed write advances the
//   version by a random step in [1, 9]; the expiry sweep advances it by 1.
// - Change notification (WatchHub) happens here after the commit is durable.
// - Expired keys are deleted by the writer at the earliest expiry time (rescheduled as writes
//   set earlier expiries), and watchers of those keys are notified.
//
// - Point reads are served from a ReadCache kept coherent by the writer; a read whose every
//   range is one key and whose keys all hit completes inline, on the caller's thread.
//
// Callbacks are invoked on engine threads, or inline (requests refused up front, cache hits),
// never while an engine lock is held; they must not block.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/limits.h"
#include "engine/read_cache.h"
#include "engine/watch_hub.h"
#include "storage/backend.h"
#include "storage/kv_types.h"

namespace kvc::engine {

struct EngineOptions {
  int reader_threads = 2;
  size_t max_batch_writes = 512;          // writes per group commit at most
  int64_t max_sweep_interval_ms = 60000;  // expiry sweep at least this often
  // Back-pressure: beyond these many queued requests new ones fail fast with Unavailable (503,
  // which clients retry) instead of growing memory without bound.
  size_t max_queued_reads = 10000;
  size_t max_queued_writes = 10000;
  size_t read_cache_bytes = 64u << 20;  // 0: no read cache
  Limits limits;
};

struct ReadResult {
  std::vector<std::vector<Entry>> ranges;  // one per requested range, in order
  int64_t version = 0;                     // data version of the snapshot
};

class Engine {
 public:
  using ReadCallback = std::function<void(Result<ReadResult>)>;
  using WriteCallback = std::function<void(Result<CommitResult>)>;

  // Starts the engine's threads. REQUIRES: backend is not used by anyone else.
  static Result<std::unique_ptr<Engine>> Open(std::unique_ptr<storage::Backend> backend,
                                              const EngineOptions& options);
  ~Engine();  // calls Shutdown()

  const std::string& database_id() const { return database_id_; }
  const Limits& limits() const { return options_.limits; }

  // Validates and reads `ranges` from one snapshot. Errors: InvalidArgument (limits),
  // Unavailable (shutting down), Internal (storage). With Completion::kNeverInline the callback
  // never runs on the calling thread, even for a cache hit.
  enum class Completion { kMayBeInline, kNeverInline };
  void SnapshotRead(std::vector<ReadRange> ranges, ReadCallback done,
                    Completion completion = Completion::kMayBeInline);
  // Validates and commits `write`. CommitResult.ok=false when a check failed (nothing applied).
  // Errors: InvalidArgument (limits, type mismatches; nothing applied), Unavailable.
  void Write(AtomicWrite write, WriteCallback done);
  // Subscribes to changes of `keys`; see WatchHub for callback rules.
  std::unique_ptr<WatchHub::Subscription> Subscribe(std::vector<std::string> keys,
                                                    WatchHub::Callback on_change);

  // Finishes queued work, stops the threads and closes storage. Idempotent.
  void Shutdown();

  // The last committed version (for tests and metrics).
  int64_t committed_version() const;
  size_t watch_count() const { return hub_.subscription_count(); }
  const ReadCache& read_cache() const { return cache_; }

 private:
  struct ReadJob {
    std::vector<ReadRange> ranges;
    ReadCallback done;
  };
  struct WriteJob {
    AtomicWrite write;
    WriteCallback done;
    Result<CommitResult> result = Internal("not run");
    std::vector<std::string> changed_keys;
  };

  Engine(std::unique_ptr<storage::Backend> backend, const EngineOptions& options);
  Status Start();
  // Answers `ranges` from the cache if every range is a point read and every key hits.
  bool TryCachedRead(const std::vector<ReadRange>& ranges, ReadResult* out);
  // Reads point ranges with Reader::Get and fills the cache. REQUIRES: AllPointReads(ranges).
  Result<ReadResult> ReadPoints(storage::Reader* reader, const std::vector<ReadRange>& ranges,
                                int64_t now_ms);
  void ReaderLoop(storage::Reader* reader);
  void WriterLoop();
  void CommitBatch(std::vector<WriteJob>& batch);
  // Applies one write inside the open transaction. On error or check failure the caller rolls
  // back to the write's savepoint.
  Result<CommitResult> ApplyWrite(WriteJob& job, int64_t now_ms, int64_t* min_expiry);
  void Sweep(int64_t now_ms);

  const EngineOptions options_;
  std::unique_ptr<storage::Backend> backend_;
  std::string database_id_;
  WatchHub hub_;
  ReadCache cache_;

  std::vector<std::unique_ptr<storage::Reader>> readers_;
  std::vector<std::thread> reader_threads_;
  std::mutex read_mu_;
  std::condition_variable read_cv_;
  std::deque<ReadJob> read_queue_;  // guarded by read_mu_
  bool read_stop_ = false;          // guarded by read_mu_

  std::unique_ptr<storage::Writer> writer_;  // writer thread only
  std::thread writer_thread_;
  std::mutex write_mu_;
  std::condition_variable write_cv_;
  std::deque<WriteJob> write_queue_;  // guarded by write_mu_
  bool write_stop_ = false;           // guarded by write_mu_
  int64_t next_expiry_ms_ = -1;       // guarded by write_mu_; -1: none known

  // Writer-thread state.
  int64_t version_ = 0;
  bool failed_ = false;  // a commit failed: refuse writes until restart
  std::mt19937_64 rng_;
  std::atomic<int64_t> committed_version_{0};

  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
};

}  // namespace kvc::engine
