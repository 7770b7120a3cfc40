// Engine: the transactional KV semantics of one database on top of a storage::Backend.
//
// - Reads run on a pool of reader threads, each with its own connection; all ranges of one
//   request come from one snapshot. Expired rows are invisible at once.
// - Writes go to one writer thread that commits them in groups: every write queued at the
//   moment the writer wakes (up to max_batch_writes and the backend's transaction limits)
//   shares one transaction and one fsync, yet each keeps its own checks,
//   its own strictly increasing versionstamp and all-or-nothing effect (one savepoint each).
//   Nothing waits to fill a batch, so a lone write has no added latency.
// - Versionstamps are allocated here, above the committed version that the storage writer's
//   Begin() reads under the storage write lock: each committed write advances the version by a
//   random step in [1, 9]; a writer task's transaction by 1.
// - The backend's capabilities (storage/capabilities.h) are read by name: Open refuses a
//   backend that lacks what the options need (a queue store always; a change log for
//   EngineOptions::change_log; a change feed when others write too).
// - Every durable commit is published once, in version order, as a storage::CommitGroup to
//   the registered CommitListeners (the WatchHub among them), after the commit and before the
//   writes are acknowledged. For a backend that is not the exclusive writer, its change feed
//   publishes instead every commit including ours; the read cache is then off.
// - A failed commit of a fail-stop backend (SQLite) stops writes until restart; with a
//   reconnecting backend (PostgreSQL) the writes answer Unavailable and the next group tries
//   again. An optimistic backend's commit conflict runs the group again, checks re-evaluated,
//   at most EngineOptions::max_commit_retries times, then answers Unavailable.
// - Writer tasks (WriterTask) run on the writer thread between groups: the expiry sweep and
//   queue delivery (queue/queue.h) are such tasks.
// - Point reads are served from a ReadCache kept coherent by the writer; a read whose every
//   range is one key and whose keys all hit completes inline, on the caller's thread.
//   Single-key reads waiting together (misses, or all of them without a cache) are answered
//   from one snapshot in one storage call, and with a cache they fill it.
// - Long snapshot scans (SnapshotScan, for exports) page through a range at one snapshot on one
//   reader thread, as fast as their consumer takes the pages.
//
// Callbacks are invoked on engine threads, or inline (requests refused up front, cache hits),
// never while an engine lock is held; they must not block.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "engine/commit_listener.h"
#include "engine/limits.h"
#include "engine/read_cache.h"
#include "engine/watch_hub.h"
#include "engine/writer_task.h"
#include "storage/backend.h"
#include "storage/kv_types.h"

namespace kvc::engine {

// The most EngineOptions::max_commit_retries may be (`serve --max-commit-retries`): a group
// that keeps conflicting holds the writer thread and every write queued behind it.
inline constexpr size_t kMaxCommitRetriesLimit = 1000;

struct EngineOptions {
  int reader_threads = 2;
  size_t max_batch_writes = 512;          // writes per group commit at most
  int64_t max_sweep_interval_ms = 60000;  // expiry sweep at least this often
  // Back-pressure: beyond these many queued requests new ones fail fast with Unavailable (503,
  // which clients retry) instead of growing memory without bound.
  size_t max_queued_reads = 10000;
  // Up to this many waiting single-key reads (read-cache misses, or every one without a
  // cache) are answered from one snapshot in one storage call.
  size_t max_read_batch = 64;
  size_t max_queued_writes = 10000;
  // 0: no read cache (also off when the backend is not the exclusive writer of its database).
  size_t read_cache_bytes = 64u << 20;
  // Shared with the read caches of other engines (cache_budget.h); null: none, the cache has
  // read_cache_bytes to itself. With one, read_cache_bytes still bounds this engine's cache.
  std::shared_ptr<CacheBudget> read_cache_budget;
  // After open, fill the read cache from the database on a reader thread, in key order, until it
  // is full or every key was read, so reads after a restart hit as before it (`serve` turns this
  // on). Chunks of prewarm_chunk_rows rows, each from a snapshot of its own, queued like reads:
  // reads and writes go on meanwhile, and a row a write changed since is left out.
  bool prewarm_read_cache = false;
  size_t prewarm_chunk_rows = 1000;
  // An optimistic backend (BackendCapabilities::optimistic_conflicts) that refuses a group
  // commit for a conflict gets it again, checks re-evaluated, up to this many times; then its
  // writes answer Unavailable (503, which clients retry).
  size_t max_commit_retries = 8;  // 0..kMaxCommitRetriesLimit
  // SnapshotScans running at once; each holds a reader thread (and its snapshot) throughout.
  size_t max_snapshot_scans = 1;
  Limits limits;
  const Clock* clock = nullptr;  // nullptr: the system clock
  // More writer tasks for every engine (the expiry sweep is built in).
  std::vector<std::function<std::unique_ptr<WriterTask>()>> task_factories;
  // Record every commit in the backend's change log, in the commit's own transaction
  // (storage/change_log.h), for continuous backup. The log grows until PruneChangeLogThrough.
  // Needs a backend with BackendCapabilities::change_log (Open refuses others).
  bool change_log = false;
};

// Counters for metrics; monotonic.
struct EngineCounters {
  std::atomic<uint64_t> cache_hits{0};      // reads answered from the read cache
  std::atomic<uint64_t> cache_misses{0};    // point reads that went to storage (cache on)
  std::atomic<uint64_t> storage_reads{0};   // storage calls answering reads (a batch: one)
  std::atomic<uint64_t> reads_refused{0};   // read queue full
  std::atomic<uint64_t> writes_refused{0};  // write queue full
  std::atomic<uint64_t> commit_failures{0};
  std::atomic<uint64_t> commit_conflicts{0};  // group commits an optimistic backend refused
  // Group commits run again after such a conflict (at most max_commit_retries per group).
  std::atomic<uint64_t> commit_retries{0};
};

struct ReadResult {
  std::vector<std::vector<Entry>> ranges;  // one per requested range, in order
  int64_t version = 0;                     // data version of the snapshot
  bool strong = true;                      // false: read from a replica that may lag
};

// One page of a SnapshotScan.
struct ScanPage {
  std::vector<Entry> entries;  // ascending key order, live rows only
  int64_t version = 0;         // data version of the snapshot (the same for every page)
  bool last = false;           // no entries follow
};

class Engine {
 public:
  using ScanCallback = std::function<bool(Result<ScanPage>)>;
  using ReadCallback = std::function<void(Result<ReadResult>)>;
  using WriteCallback = std::function<void(Result<CommitResult>)>;

  // Checks the backend's capabilities against `options` and starts the engine's threads.
  // Errors: Internal (the backend lacks a queue store, or has other writers but no change
  // feed), InvalidArgument (the options ask for what the backend cannot do: a change log, or
  // atomic writes larger than one of its transactions holds), storage errors.
  // REQUIRES: backend is not used by anyone else.
  static Result<std::unique_ptr<Engine>> Open(std::unique_ptr<storage::Backend> backend,
                                              const EngineOptions& options);
  // Calls Shutdown(). The last reference must not be dropped on one of the engine's own threads
  // (by a callback that captured it): that thread cannot join itself, so it aborts with a log
  // line. Owners call Shutdown() first (the Directory does); then the destructor is trivial.
  ~Engine();

  const std::string& database_id() const { return database_id_; }
  const Limits& limits() const { return options_.limits; }

  // Validates and reads `ranges` from one snapshot. Errors: InvalidArgument (limits),
  // Unavailable (shutting down, or the read queue is full), IoError/Corruption (storage).
  // kWatchSnapshot: never answered from the cache on the calling thread and never refused for
  // a full read queue (a watch's first snapshot must not fail for load); refusals up front
  // (limits, shutdown) still run inline.
  enum class ReadMode { kDefault, kWatchSnapshot };
  void SnapshotRead(std::vector<ReadRange> ranges, ReadCallback done,
                    ReadMode mode = ReadMode::kDefault);
  // Validates and commits `write`. CommitResult.ok=false when a check failed (nothing applied).
  // Errors: InvalidArgument (limits, type mismatches), Unavailable, IoError/Corruption
  // (storage); in every case nothing of this write is applied.
  void Write(AtomicWrite write, WriteCallback done);
  // Subscribes to changes of `keys`; see WatchHub for callback rules.
  std::unique_ptr<WatchHub::Subscription> Subscribe(std::vector<std::string> keys,
                                                    WatchHub::Callbacks callbacks);

  // Registers a listener for every commit published from now on (see CommitListener).
  // REQUIRES: not called from a listener callback.
  void AddListener(std::shared_ptr<CommitListener> listener);
  // After it returns, `listener` is not being called and will not be. REQUIRES: as AddListener.
  void RemoveListener(const CommitListener* listener);

  // Reads every live entry of [start, end) from ONE snapshot, in pages of at most
  // `page_entries` (>= 1), calling `on_page` with each page in key order on one reader thread;
  // `on_page` returns false to stop early. An error is always the final call: Unavailable
  // (shutting down or retired, the read queue is full, or max_snapshot_scans scans are
  // running; refusals come inline), IoError/Corruption (storage). The scan's slot is free again
  // when the final call (last page or error) begins, or when `on_page` has returned false.
  // The scan occupies one reader thread, and holds its snapshot open, until it ends: `on_page`
  // may block to pace the scan to its consumer, but every moment it blocks keeps that reader
  // away from other reads (and SQLite cannot checkpoint the WAL past the snapshot), so it must
  // wait with a deadline. Expiry is judged at the scan's start.
  void SnapshotScan(std::string start, std::string end, size_t page_entries, ScanCallback on_page);

  // Counts keys and bytes on a reader thread. Errors: Unavailable, storage errors.
  void QueryStats(std::function<void(Result<storage::StorageStats>)> done);

  // Makes the writer re-evaluate its tasks' schedules now (e.g. after a ManualClock moved).
  void WakeWriter();
  // The writer task named `name` (EngineOptions::task_factories), or nullptr. Thread-safe: the
  // task list is fixed once the engine has started.
  std::shared_ptr<WriterTask> FindTask(std::string_view name) const;

  // Runs `fn` on a reader thread with that thread's storage connection and no snapshot open
  // (fn opens its own, e.g. backup::WriteSnapshotFile, or reads the change log). `fn` may take a
  // while; it occupies the reader thread meanwhile. If the engine is shutting down, `fn` is
  // called inline with nullptr and the refusal.
  void WithReader(std::function<void(storage::Reader*, const Status&)> fn);

  // Change log (EngineOptions::change_log): entries with version <= `version` may go; they are
  // removed in the next commit's transaction (no extra fsync). Thread-safe; never lowers.
  void PruneChangeLogThrough(int64_t version);

  // Ends watch streams and tells listeners (OnRetire); reads and writes keep working until
  // Shutdown. Called when the database stops being served by this engine. Idempotent.
  void Retire();
  // Retires, finishes queued work, stops the threads and closes storage. Idempotent.
  void Shutdown();

  // The engine's clock (EngineOptions::clock).
  int64_t now_ms() const { return Now(); }
  // The last committed version (for tests and metrics).
  int64_t committed_version() const;
  // False after a failed commit of a fail-stop backend (writes are refused until restart).
  bool writable() const { return !failed_.load(std::memory_order_acquire); }
  // What the backend can do (storage/capabilities.h), as read at construction.
  const storage::BackendCapabilities& capabilities() const { return caps_; }
  // Retire() was called: another engine (or none) serves the database now.
  bool retired() const { return retired_flag_.load(std::memory_order_acquire); }
  size_t watch_count() const { return hub_->subscription_count(); }
  size_t queued_reads() const;
  size_t queued_writes() const;
  const ReadCache& read_cache() const { return cache_; }
  // Gives back read-cache memory beyond this engine's share of a budget shared with other
  // engines (ReadCache::Trim). Thread-safe; takes only the cache's locks, briefly.
  void TrimReadCache() { cache_.Trim(); }
  const EngineCounters& counters() const { return counters_; }
  // The read cache's prewarm (EngineOptions::prewarm_read_cache), for metrics and tests.
  struct PrewarmProgress {
    bool running = false;
    uint64_t entries = 0;  // entries it stored
    double seconds = 0;    // from its start to its end, or to now while it runs
  };
  PrewarmProgress prewarm_progress() const;

 private:
  struct ReadJob {
    std::vector<ReadRange> ranges;
    ReadCallback done;
    std::function<void(storage::Reader&)> custom;  // instead of ranges/done when set
  };
  struct WriteJob {
    AtomicWrite write;
    WriteCallback done;
    Result<CommitResult> result = Internal("not run");
    std::vector<storage::KeyChange> changes;
    std::vector<storage::QueueRow> enqueues;
    size_t bytes = 0;  // AtomicWriteBytes, when the backend bounds a transaction's bytes
  };
  class TaskContext;
  class TaskHost;

  Engine(std::unique_ptr<storage::Backend> backend, const EngineOptions& options);
  Status Start();
  // Answers `*ranges` from the cache if every range is a point read and every key hits; the
  // keys of the answer are then moved out of `*ranges`, which is left as it was when this fails.
  bool TryCachedRead(std::vector<ReadRange>* ranges, ReadResult* out);
  // Reads point ranges with Reader::Get and fills the cache. REQUIRES: AllPointReads(ranges).
  Result<ReadResult> ReadPoints(storage::Reader* reader, const std::vector<ReadRange>& ranges,
                                int64_t now_ms);
  // Queues a read job unless stopping (or full, when `bounded`). Returns the refusal.
  Status EnqueueRead(ReadJob job, bool bounded) KVC_EXCLUDES(read_mu_);
  void ReaderLoop(storage::Reader* reader);
  // Queues the read cache prewarm's chunk of keys from `from` on; the chunk queues the next.
  void PrewarmFrom(std::string from);
  // One chunk on a reader thread: false when the prewarm is over.
  bool PrewarmChunk(storage::Reader& reader, std::string* from);
  void EndPrewarm(const std::string& why);
  // The body of a SnapshotScan on a reader thread.
  void RunScan(storage::Reader& reader, const std::string& start, const std::string& end,
               int32_t page, const ScanCallback& on_page);
  void WriterLoop();
  // Moves queued writes to *batch while the group stays within max_batch_writes and the
  // backend's transaction limits; the first write always goes (a group is never empty).
  void TakeQueuedWrites(std::vector<WriteJob>* batch) KVC_REQUIRES(write_mu_);
  void RunDueTasks();
  // Commits `batch` as one group (again after an optimistic backend's conflict) and answers
  // every write.
  void CommitBatch(std::vector<WriteJob>& batch);
  // One attempt at committing `batch` in one transaction: sets every job's result. Returns the
  // commit's conflict (storage::CommitConflict: nothing applied, the group may run again) or
  // OK; other errors are in the results.
  Status TryCommitGroup(std::vector<WriteJob>& batch,
                        std::chrono::steady_clock::time_point started);
  // What ApplyGroup did with the open transaction.
  enum class GroupApplied {
    kNone,             // no write applied (the caller rolls back)
    kSome,             // at least one write applied; the failed ones left nothing
    kRunAgainGuarded,  // a write without a savepoint erred part-way: roll back, run again
  };
  // Applies the writes of `batch` in the open transaction, from *version up. A write that can
  // fail after changing something (a sum, min or max: the stored value may be of the wrong
  // type), or every write when `guard_every_write`, runs under its own savepoint and is rolled
  // back to it when it fails. The others run without one: a failed check changes nothing (checks
  // run first), and a storage error part-way answers kRunAgainGuarded, after which the caller
  // rolls the transaction back and runs the group again guarded (storage errors are rare; a
  // savepoint per write cost about 0.7 us of server CPU under durable sets at 1x64). Errors: a
  // rollback to a savepoint failed (the transaction is rolled back and the engine has failed).
  Result<GroupApplied> ApplyGroup(std::vector<WriteJob>& batch, int64_t now_ms,
                                  bool guard_every_write, int64_t* version);
  // Applies one write inside the open transaction at a version above *version, which it
  // advances. Evaluates every check before it changes anything: a write whose checks fail returns
  // ok=false having changed nothing. On an error the write may be partly applied.
  Result<CommitResult> ApplyWrite(WriteJob& job, int64_t now_ms, int64_t* version);
  // The id of a new queue message: a UUIDv7 above every earlier one. Writer thread only.
  std::string NextMessageId(int64_t now_ms);
  // Writer-task transactions (see WriterTaskContext::Transact).
  Status Transact(storage::CommitOrigin origin, const WriterTaskContext::StateBody& body);
  // Appends `records` to the change log (when LogsCommits(); the first one follows `base`) and
  // applies a pending prune.
  Status LogCommits(int64_t base, const std::vector<storage::CommitRecord>& records,
                    int64_t now_ms);
  // Logs `records`, sets the data version, commits the open transaction (the read cache
  // bracketed around it) and publishes `records` as one group (unless the change feed does).
  // On failure the transaction is gone; a fail-stop backend's engine refuses writes from then
  // on. Returns a commit conflict as it is (nothing applied).
  Status CommitAndPublish(storage::CommitOrigin origin, int64_t base, int64_t version,
                          std::vector<storage::CommitRecord> records,
                          std::chrono::steady_clock::time_point started, int64_t now_ms);
  // Hands a committed group to every listener, in order. Publishing thread only.
  void Publish(const storage::CommitGroup& group) KVC_EXCLUDES(listeners_mu_, publish_mu_);
  void OnFeedCommit(storage::CommitGroup group);
  static bool IsSinglePoint(const ReadJob& job);
  // Answers single-key reads from one snapshot (Reader::GetAlone). Reader thread only.
  void RunPointBatch(storage::Reader* reader, std::vector<ReadJob>& batch);
  // The feed lost commits (CommitGroup::resync): reads every watched key in one snapshot and
  // makes `group` end with their current state at that snapshot's version. Feed thread only.
  void ResyncWatchers(storage::CommitGroup* group);
  void MarkFailed(const char* what, const Status& s);
  int64_t Now() const { return clock_->NowMs(); }
  // Capability questions, each named for what it decides.
  // Our own commits reach the listeners through the backend's change feed (others write too).
  bool FeedPublishes() const { return !caps_.exclusive_writer; }
  // A failed commit may have left storage in an unknown state: stop writing until restart.
  bool FailStop() const { return caps_.on_commit_error == storage::CommitErrorPolicy::kFailStop; }
  // `s` is an optimistic backend's commit conflict (to run again, not a failure).
  bool IsConflict(const Status& s) const {
    return caps_.optimistic_conflicts && storage::IsCommitConflict(s);
  }
  // Every commit goes to the change log: for backups, or because the change feed reads it.
  bool LogsCommits() const {
    return options_.change_log || (FeedPublishes() && caps_.change_feed_reads_log);
  }

  const EngineOptions options_;
  const Clock* const clock_;
  std::unique_ptr<storage::Backend> backend_;
  const storage::BackendCapabilities caps_;
  std::string database_id_;
  std::shared_ptr<WatchHub> hub_;
  ReadCache cache_;
  EngineCounters counters_;
  // The prewarm: started (steady clock, ns) and ended (0 while it runs or if it never ran).
  std::atomic<bool> prewarm_running_{false};
  std::atomic<uint64_t> prewarm_entries_{0};
  std::atomic<int64_t> prewarm_start_ns_{0};
  std::atomic<int64_t> prewarm_end_ns_{0};

  // Listeners: replaced whole under listeners_mu_; publish_mu_ is held while publishing so
  // RemoveListener can wait for a running publication. Lock order: listeners_mu_ is never held
  // while taking publish_mu_ (it is released first).
  Mutex listeners_mu_;
  std::shared_ptr<const std::vector<std::shared_ptr<CommitListener>>> listeners_
      KVC_GUARDED_BY(listeners_mu_);
  Mutex publish_mu_;
  std::unique_ptr<storage::ChangeFeed> feed_;
  int64_t resync_floor_ = 0;  // feed thread only: records at or below it are already published
  std::unique_ptr<WriterTaskHost> task_host_;
  std::vector<std::shared_ptr<WriterTask>> tasks_;  // fixed after Start; Run on the writer only

  std::vector<std::unique_ptr<storage::Reader>> readers_;
  std::vector<std::thread> reader_threads_;
  mutable Mutex read_mu_;
  CondVar read_cv_;
  std::deque<ReadJob> read_queue_ KVC_GUARDED_BY(read_mu_);
  bool read_stop_ KVC_GUARDED_BY(read_mu_) = false;

  std::unique_ptr<storage::Writer> writer_;  // writer thread only
  storage::QueueStore* queue_ = nullptr;     // writer_'s queue store; writer thread only
  storage::ChangeLogWriter* log_ = nullptr;  // writer_'s change log, if any; writer thread only
  size_t max_group_writes_ = 0;              // max_batch_writes within the backend's limit
  std::thread writer_thread_;
  mutable Mutex write_mu_;
  CondVar write_cv_;
  std::deque<WriteJob> write_queue_ KVC_GUARDED_BY(write_mu_);
  bool write_stop_ KVC_GUARDED_BY(write_mu_) = false;
  bool wake_ KVC_GUARDED_BY(write_mu_) = false;  // WakeWriter was called

  // Writer-thread state.
  std::mt19937_64 rng_;
  std::atomic<bool> failed_{false};  // a commit failed: refuse writes until restart
  std::atomic<int64_t> committed_version_{0};
  std::atomic<int64_t> log_prune_through_{0};  // PruneChangeLogThrough
  int64_t log_pruned_through_ = 0;             // writer thread only
  int64_t id_ms_ = 0;                          // NextMessageId, writer thread only
  uint32_t id_seq_ = 0;

  std::atomic<size_t> scans_running_{0};
  std::atomic<bool> scans_stop_{false};  // set by Retire: running scans end after their page

  std::atomic<bool> retired_flag_{false};
  Mutex shutdown_mu_;
  bool retired_ KVC_GUARDED_BY(shutdown_mu_) = false;
  bool shut_down_ KVC_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace kvc::engine
