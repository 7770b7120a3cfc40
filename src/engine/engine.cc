#include "engine/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>

#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/random.h"
#include "common/thread_name.h"
#include "engine/expiry_task.h"
#include "engine/mutation.h"

namespace kvc::engine {

using storage::StoredRow;

namespace {

// The steady clock in nanoseconds (the prewarm's duration).
int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// True if every range selects exactly one key: [k, k + "\0") with a limit of at least 1.
bool AllPointReads(const std::vector<ReadRange>& ranges) {
  for (const ReadRange& r : ranges) {
    if (r.limit < 1 || r.end.size() != r.start.size() + 1 || r.end.back() != '\0' ||
        r.end.compare(0, r.start.size(), r.start) != 0) {
      return false;
    }
  }
  return !ranges.empty();
}

// Ends the read transaction `reader` holds open and returns `out` with the snapshot's version
// and strength. Errors: the reader's.
Result<ReadResult> EndRead(storage::Reader* reader, ReadResult out) {
  auto v = reader->DataVersion();
  out.strong = reader->snapshot_is_strong();
  reader->End();
  if (!v.ok()) return v.status();
  out.version = *v;
  return out;
}

// Refuses, before anything is opened, a backend that lacks what an engine with options `o`
// needs; a capability missing here would otherwise fail the first write that uses it.
Status CheckCapabilities(const storage::BackendCapabilities& c, const EngineOptions& o) {
  if (!c.queue_store) {
    return Internal(
        "the storage backend has no queue store, which the engine needs for the enqueues of "
        "atomic writes");
  }
  if (!c.exclusive_writer && !c.change_feed) {
    return Internal(
        "the storage backend has other writers but no change feed, so the engine could not "
        "learn of their commits");
  }
  if (!c.exclusive_writer && c.change_feed_reads_log && !c.change_log) {
    return Internal("the storage backend's change feed reads a change log it does not have");
  }
  if (o.change_log && !c.change_log) {
    return InvalidArgument(
        "the storage backend has no change log, which continuous backup needs (every commit is "
        "logged in its own transaction)");
  }
  const size_t max_bytes = c.transaction_limits.max_bytes;
  if (max_bytes > 0 && o.limits.max_total_mutation_bytes > max_bytes) {
    return InvalidArgument("an atomic write may hold " +
                           std::to_string(o.limits.max_total_mutation_bytes) +
                           " bytes (max_total_mutation_bytes), more than one transaction of the "
                           "storage backend holds (" +
                           std::to_string(max_bytes) + ")");
  }
  return Status::Ok();
}

}  // namespace

// The writer-task view of the engine.
class Engine::TaskContext : public WriterTaskContext {
 public:
  explicit TaskContext(Engine* e) : e_(e) {}
  Status Transact(storage::CommitOrigin origin, const Body& body) override {
    return e_->Transact(origin, [&](storage::Writer& w, int64_t version) -> Result<StateWrite> {
      KVC_ASSIGN_OR_RETURN(std::vector<storage::KeyChange> changes, body(w, version));
      const bool wrote = !changes.empty();
      return StateWrite{std::move(changes), wrote};
    });
  }
  Status TransactState(storage::CommitOrigin origin, const StateBody& body) override {
    return e_->Transact(origin, body);
  }
  int64_t NowMs() const override { return e_->Now(); }

 private:
  Engine* e_;
};

class Engine::TaskHost : public WriterTaskHost {
 public:
  explicit TaskHost(Engine* e) : e_(e) {}
  int64_t NowMs() const override { return e_->Now(); }
  void Wake() override { e_->WakeWriter(); }

 private:
  Engine* e_;
};

Engine::Engine(std::unique_ptr<storage::Backend> backend, const EngineOptions& options)
    : options_(options),
      clock_(options.clock ? options.clock : SystemClock()),
      backend_(std::move(backend)),
      caps_(backend_->capabilities()),
      hub_(std::make_shared<WatchHub>()),
      // exclusive_writer: another writer's commits would make cached rows stale without the
      // bracket around our commits.
      cache_(caps_.exclusive_writer ? options.read_cache_bytes : 0, options.read_cache_budget),
      listeners_(std::make_shared<const std::vector<std::shared_ptr<CommitListener>>>()) {
  std::string seed = RandomBytes(8);
  uint64_t s = 0;
  for (unsigned char c : seed) s = (s << 8) | c;
  rng_.seed(s);
}

Result<std::unique_ptr<Engine>> Engine::Open(std::unique_ptr<storage::Backend> backend,
                                             const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine(std::move(backend), options));
  KVC_RETURN_IF_ERROR(e->Start());
  return e;
}

Status Engine::Start() {
  KVC_RETURN_IF_ERROR(CheckCapabilities(caps_, options_));
  const size_t backend_writes = caps_.transaction_limits.max_writes;
  max_group_writes_ = backend_writes > 0 ? std::min(options_.max_batch_writes, backend_writes)
                                         : options_.max_batch_writes;
  database_id_ = backend_->database_id();
  KVC_ASSIGN_OR_RETURN(int64_t version, backend_->LoadDataVersion());
  committed_version_ = version;
  KVC_ASSIGN_OR_RETURN(writer_, backend_->OpenWriter());
  queue_ = writer_->queue_store();
  log_ = writer_->change_log();
  if (queue_ == nullptr || (LogsCommits() && log_ == nullptr)) {
    return Internal("the storage backend's writer lacks a part its capabilities promise");
  }
  AddListener(hub_);
  auto expiry = std::make_shared<ExpiryTask>(Now(), options_.max_sweep_interval_ms);
  AddListener(expiry);
  tasks_.push_back(std::move(expiry));
  task_host_ = std::make_unique<TaskHost>(this);
  for (const auto& make : options_.task_factories) {
    std::shared_ptr<WriterTask> task = make();
    if (auto listener = std::dynamic_pointer_cast<CommitListener>(task)) AddListener(listener);
    task->Bind(task_host_.get());
    tasks_.push_back(std::move(task));
  }
  if (FeedPublishes()) {  // other writers' commits and ours arrive here
    KVC_ASSIGN_OR_RETURN(feed_, backend_->OpenChangeFeed([this](storage::CommitGroup g) {
      OnFeedCommit(std::move(g));
    }));
  }
  const int n = std::max(1, options_.reader_threads);
  for (int i = 0; i < n; ++i) {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Reader> r, backend_->OpenReader());
    readers_.push_back(std::move(r));
  }
  // Create spdlog's registry on this thread, before the engine's threads may log first: its lazy
  // creation inside libspdlog is invisible to TSan, which then reports the next log call on
  // another thread as a race (as in net/server.cc).
  (void)spdlog::default_logger_raw();
  for (auto& r : readers_) {
    storage::Reader* raw = r.get();
    reader_threads_.emplace_back([this, raw] {
      NameThisThread("kvc-reader");
      ReaderLoop(raw);
    });
  }
  writer_thread_ = std::thread([this] {
    NameThisThread("kvc-writer");
    WriterLoop();
  });
  if (cache_.enabled() && options_.prewarm_read_cache) {
    prewarm_start_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
    prewarm_running_.store(true, std::memory_order_release);
    PrewarmFrom(std::string());
  }
  return Status::Ok();
}

void Engine::PrewarmFrom(std::string from) {
  WithReader(
      [this, from = std::move(from)](storage::Reader* reader, const Status& refused) mutable {
        if (reader == nullptr) return EndPrewarm("stopped: " + refused.message());
        if (PrewarmChunk(*reader, &from)) PrewarmFrom(std::move(from));
      });
}

bool Engine::PrewarmChunk(storage::Reader& reader, std::string* from) {
  if (retired()) {
    EndPrewarm("stopped: the database was retired");
    return false;
  }
  // Tickets before the snapshot: a row a write changed after them is not stored (ReadCache).
  const std::vector<uint64_t> tickets = cache_.WarmTickets();
  ReadRange range;
  range.start = *from;
  range.end = std::string(1, '\xff');  // above every encoded key
  range.limit = static_cast<int32_t>(std::clamp<size_t>(options_.prewarm_chunk_rows, 1, 1 << 20));
  std::vector<storage::KeyedRow> rows;
  Status s = reader.Begin();
  if (s.ok()) {
    s = reader.ScanRows(range, &rows);
    reader.End();
  }
  if (!s.ok()) {
    EndPrewarm("stopped: " + s.ToString());
    return false;
  }
  bool full = false;
  prewarm_entries_.fetch_add(cache_.Warm(tickets, rows, Now(), &full), std::memory_order_relaxed);
  if (full) {
    EndPrewarm("the cache is full");
    return false;
  }
  if (rows.size() < static_cast<size_t>(range.limit)) {
    EndPrewarm("every key was read");
    return false;
  }
  *from = rows.back().key;
  from->push_back('\0');  // the smallest key after it
  return true;
}

void Engine::EndPrewarm(const std::string& why) {
  prewarm_end_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
  prewarm_running_.store(false, std::memory_order_release);
  const PrewarmProgress p = prewarm_progress();
  spdlog::info("database {}: read cache prewarmed with {} entries ({} of {} bytes) in {:.1f} s; {}",
               database_id_, p.entries, cache_.charged_bytes(), cache_.limit_bytes(), p.seconds,
               why);
}

Engine::PrewarmProgress Engine::prewarm_progress() const {
  PrewarmProgress p;
  p.running = prewarm_running_.load(std::memory_order_acquire);
  p.entries = prewarm_entries_.load(std::memory_order_relaxed);
  const int64_t start = prewarm_start_ns_.load(std::memory_order_relaxed);
  if (start == 0) return p;
  const int64_t end = p.running ? SteadyNowNs() : prewarm_end_ns_.load(std::memory_order_relaxed);
  p.seconds = static_cast<double>(end - start) / 1e9;
  return p;
}

namespace {
// The engine whose reader or writer loop runs on this thread, if any.
thread_local const Engine* t_loop_owner = nullptr;
}  // namespace

Engine::~Engine() {
  if (t_loop_owner == this) {
    // A callback dropped the last reference on one of our own threads, which cannot join
    // itself; continuing would free the state that very loop is using. A programming error.
    spdlog::critical("engine {} destroyed on its own thread; owners must call Shutdown() first",
                     database_id_);
    std::abort();
  }
  Shutdown();
}

void Engine::Retire() {
  {
    MutexLock lock(shutdown_mu_);
    if (retired_) return;
    retired_ = true;
  }
  retired_flag_.store(true, std::memory_order_release);
  scans_stop_.store(true, std::memory_order_release);
  auto listeners = [&] {
    MutexLock lock(listeners_mu_);
    return listeners_;
  }();
  MutexLock lock(publish_mu_);
  for (const auto& l : *listeners) l->OnRetire();
}

void Engine::Shutdown() {
  Retire();
  {
    MutexLock lock(shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  feed_.reset();  // no more commits from other writers
  {
    MutexLock lock(write_mu_);
    write_stop_ = true;
  }
  write_cv_.NotifyAll();
  if (writer_thread_.joinable()) writer_thread_.join();
  {
    MutexLock lock(read_mu_);
    read_stop_ = true;
  }
  read_cv_.NotifyAll();
  for (auto& t : reader_threads_) {
    if (t.joinable()) t.join();
  }
  for (const auto& t : tasks_) t->Stop();
  readers_.clear();
  writer_.reset();
}

std::shared_ptr<WriterTask> Engine::FindTask(std::string_view name) const {
  for (const auto& t : tasks_) {
    if (name == t->name()) return t;
  }
  return nullptr;
}

int64_t Engine::committed_version() const { return committed_version_.load(); }

size_t Engine::queued_reads() const {
  MutexLock lock(read_mu_);
  return read_queue_.size();
}

size_t Engine::queued_writes() const {
  MutexLock lock(write_mu_);
  return write_queue_.size();
}

std::unique_ptr<WatchHub::Subscription> Engine::Subscribe(std::vector<std::string> keys,
                                                          WatchHub::Callbacks callbacks) {
  return hub_->Subscribe(std::move(keys), std::move(callbacks));
}

void Engine::AddListener(std::shared_ptr<CommitListener> listener) {
  MutexLock lock(listeners_mu_);
  auto next = std::make_shared<std::vector<std::shared_ptr<CommitListener>>>(*listeners_);
  next->push_back(std::move(listener));
  listeners_ = std::move(next);
}

void Engine::RemoveListener(const CommitListener* listener) {
  {
    MutexLock lock(listeners_mu_);
    auto next = std::make_shared<std::vector<std::shared_ptr<CommitListener>>>(*listeners_);
    next->erase(std::remove_if(next->begin(), next->end(),
                               [&](const auto& l) { return l.get() == listener; }),
                next->end());
    listeners_ = std::move(next);
  }
  MutexLock wait_for_publication(publish_mu_);
}

void Engine::Publish(const storage::CommitGroup& group) {
  std::shared_ptr<const std::vector<std::shared_ptr<CommitListener>>> listeners;
  {
    MutexLock lock(listeners_mu_);
    listeners = listeners_;
  }
  MutexLock lock(publish_mu_);
  for (const auto& l : *listeners) l->OnCommit(group);
}

void Engine::ResyncWatchers(storage::CommitGroup* group) {
  const std::vector<std::string> keys = hub_->WatchedKeys();
  if (keys.empty()) return;  // nobody to tell
  auto reader = backend_->OpenReader();
  if (!reader.ok() || !(*reader)->Begin().ok()) {
    spdlog::error("watch resync: cannot read the watched keys; watchers wait for the next change");
    return;
  }
  storage::Reader& r = **reader;
  storage::CommitRecord current;
  const int64_t now = Now();
  bool ok = true;
  for (const std::string& k : keys) {
    auto row = r.Get(k);
    if (!row.ok()) {
      ok = false;
      break;
    }
    if (*row && !storage::IsLive((*row)->expire_at_ms, now)) row->reset();
    current.changes.push_back(storage::KeyChange{k, std::move(*row)});
  }
  auto version = r.DataVersion();
  r.End();
  if (!ok || !version.ok()) {
    spdlog::error("watch resync: reading the watched keys failed");
    return;
  }
  // The snapshot already holds every record up to its version.
  current.version = *version;
  auto& recs = group->records;
  recs.erase(std::remove_if(recs.begin(), recs.end(),
                            [&](const storage::CommitRecord& c) { return c.version <= *version; }),
             recs.end());
  recs.insert(recs.begin(), std::move(current));
  resync_floor_ = *version;
  spdlog::warn("watch resync: {} watched key(s) re-read at version {}", keys.size(), *version);
}

void Engine::OnFeedCommit(storage::CommitGroup group) {
  if (group.resync) {
    ResyncWatchers(&group);
  } else if (resync_floor_ > 0) {  // records the resync snapshot already held
    auto& recs = group.records;
    recs.erase(
        std::remove_if(recs.begin(), recs.end(),
                       [&](const storage::CommitRecord& c) { return c.version <= resync_floor_; }),
        recs.end());
  }
  if (group.records.empty()) return;
  int64_t v = committed_version_.load();
  const int64_t last = group.records.back().version;
  while (v < last && !committed_version_.compare_exchange_weak(v, last)) {
  }
  Publish(group);
  WakeWriter();  // a task (the expiry sweep) may want to run earlier now
}

void Engine::WakeWriter() {
  {
    MutexLock lock(write_mu_);
    wake_ = true;
  }
  write_cv_.NotifyOne();
}

void Engine::QueryStats(std::function<void(Result<storage::StorageStats>)> done) {
  auto shared =
      std::make_shared<std::function<void(Result<storage::StorageStats>)>>(std::move(done));
  ReadJob job;
  job.custom = [shared](storage::Reader& r) { (*shared)(r.Stats()); };
  Status refused = EnqueueRead(std::move(job), /*bounded=*/true);
  if (!refused.ok()) (*shared)(refused);
}

void Engine::SnapshotScan(std::string start, std::string end, size_t page_entries,
                          ScanCallback on_page) {
  auto shared = std::make_shared<ScanCallback>(std::move(on_page));
  if (scans_stop_.load(std::memory_order_acquire)) {
    (*shared)(Unavailable("The database is being closed; try again later."));
    return;
  }
  size_t running = scans_running_.load();
  do {
    if (running >= options_.max_snapshot_scans) {
      (*shared)(Unavailable("Another export of this database is running (at most " +
                            std::to_string(options_.max_snapshot_scans) +
                            " at once); try again when it has finished."));
      return;
    }
  } while (!scans_running_.compare_exchange_weak(running, running + 1));
  const auto page = static_cast<int32_t>(
      std::clamp<size_t>(page_entries, 1, std::numeric_limits<int32_t>::max()));
  ReadJob job;
  job.custom = [this, shared, start = std::move(start), end = std::move(end),
                page](storage::Reader& r) { RunScan(r, start, end, page, *shared); };
  Status refused = EnqueueRead(std::move(job), /*bounded=*/true);
  if (!refused.ok()) {
    scans_running_.fetch_sub(1);
    (*shared)(refused);
  }
}

void Engine::RunScan(storage::Reader& reader, const std::string& start, const std::string& end,
                     int32_t page, const ScanCallback& on_page) {
  // The snapshot and the scan's slot are given up before the final call (the last page or an
  // error), so a consumer that saw the end may start the next scan at once.
  bool open = false;
  auto release = [&] {
    if (open) reader.End();
    open = false;
    scans_running_.fetch_sub(1);
  };
  auto fail = [&](const Status& s) {
    release();
    on_page(s);
  };
  counters_.storage_reads.fetch_add(1, std::memory_order_relaxed);
  if (Status s = reader.Begin(); !s.ok()) {
    spdlog::error("snapshot scan failed: {}", s.ToString());
    return fail(s);
  }
  open = true;
  Result<int64_t> version = reader.DataVersion();
  if (!version.ok()) return fail(version.status());
  const int64_t now = Now();  // one expiry horizon for the whole snapshot
  std::string from = start;
  for (;;) {
    if (scans_stop_.load(std::memory_order_acquire)) {
      return fail(Unavailable("The database was closed while it was being read."));
    }
    ScanPage p;
    p.version = *version;
    if (from < end) {
      Status s = reader.Scan(ReadRange{from, end, page, false}, now, &p.entries);
      if (!s.ok()) {
        spdlog::error("snapshot scan failed: {}", s.ToString());
        return fail(s);
      }
    }
    p.last = p.entries.size() < static_cast<size_t>(page);
    if (p.last) {
      release();
      on_page(std::move(p));
      return;
    }
    from = p.entries.back().key;
    from.push_back('\0');  // the smallest key after it
    if (!on_page(std::move(p))) break;
  }
  release();
}

Status Engine::EnqueueRead(ReadJob job, bool bounded) {
  {
    MutexLock lock(read_mu_);
    if (read_stop_) return Unavailable("The server is shutting down, try again later.");
    if (bounded && read_queue_.size() >= options_.max_queued_reads) {
      counters_.reads_refused.fetch_add(1, std::memory_order_relaxed);
      return Unavailable("The server is overloaded, try again later.");
    }
    read_queue_.push_back(std::move(job));
  }
  read_cv_.NotifyOne();
  return Status::Ok();
}

void Engine::SnapshotRead(std::vector<ReadRange> ranges, ReadCallback done, ReadMode mode) {
  Status s = ValidateSnapshotRead(ranges, options_.limits);
  if (!s.ok()) {
    done(s);
    return;
  }
  if (mode == ReadMode::kDefault) {
    ReadResult hit;
    if (TryCachedRead(&ranges, &hit)) {
      counters_.cache_hits.fetch_add(1, std::memory_order_relaxed);
      done(std::move(hit));
      return;
    }
  }
  // `done` is moved into the job only if it is queued; a refusal answers through it here,
  // outside the lock (the callback may call back into the engine).
  auto shared = std::make_shared<ReadCallback>(std::move(done));
  ReadJob job;
  job.ranges = std::move(ranges);
  job.done = [shared](Result<ReadResult> r) { (*shared)(std::move(r)); };
  Status refused = EnqueueRead(std::move(job), /*bounded=*/mode == ReadMode::kDefault);
  if (!refused.ok()) (*shared)(refused);
}

bool Engine::TryCachedRead(std::vector<ReadRange>* in, ReadResult* out) {
  std::vector<ReadRange>& ranges = *in;
  if (!cache_.enabled() || !AllPointReads(ranges)) return false;
  const uint64_t writes_ended = cache_.writes_ended();
  const int64_t version = committed_version_.load();
  const int64_t now = Now();
  out->ranges.assign(ranges.size(), {});
  storage::StoredRow row;
  for (size_t i = 0; i < ranges.size(); ++i) {
    switch (cache_.Get(ranges[i].start, now, &row)) {
      case ReadCache::Lookup::kMiss:
        return false;
      case ReadCache::Lookup::kAbsent:
        break;
      case ReadCache::Lookup::kPresent:  // the key is taken from `ranges` below, once all hit
        out->ranges[i].push_back(Entry{std::string(), std::move(row.value), row.encoding,
                                       row.version, row.expire_at_ms});
        break;
    }
  }
  // Several keys form one snapshot only if no write ended between their lookups.
  if (ranges.size() > 1 && cache_.writes_ended() != writes_ended) return false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!out->ranges[i].empty()) out->ranges[i].front().key = std::move(ranges[i].start);
  }
  out->version = version;
  return true;
}

Result<ReadResult> Engine::ReadPoints(storage::Reader* reader, const std::vector<ReadRange>& ranges,
                                      int64_t now_ms) {
  std::vector<uint64_t> tickets(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) tickets[i] = cache_.FillTicket(ranges[i].start);
  KVC_RETURN_IF_ERROR(reader->Begin());  // after the tickets: see ReadCache
  ReadResult out;
  out.ranges.resize(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    Result<std::optional<StoredRow>> row = reader->Get(ranges[i].start);
    if (!row.ok()) {
      reader->End();
      return row.status();
    }
    cache_.Fill(ranges[i].start, tickets[i], *row);
    if (*row && storage::IsLive((*row)->expire_at_ms, now_ms)) {
      StoredRow& r = **row;
      out.ranges[i].push_back(
          Entry{ranges[i].start, std::move(r.value), r.encoding, r.version, r.expire_at_ms});
    }
  }
  return EndRead(reader, std::move(out));
}

bool Engine::IsSinglePoint(const ReadJob& job) {
  return !job.custom && job.ranges.size() == 1 && AllPointReads(job.ranges);
}

void Engine::RunPointBatch(storage::Reader* reader, std::vector<ReadJob>& batch) {
  std::vector<std::string> keys;
  keys.reserve(batch.size());
  for (const ReadJob& j : batch) keys.push_back(j.ranges[0].start);
  // With a cache, every key takes its fill ticket before the snapshot begins (see ReadCache).
  std::vector<uint64_t> tickets;
  if (cache_.enabled()) {
    tickets.reserve(keys.size());
    for (const std::string& k : keys) tickets.push_back(cache_.FillTicket(k));
    counters_.cache_misses.fetch_add(keys.size(), std::memory_order_relaxed);
  }
  std::vector<std::optional<StoredRow>> rows;
  counters_.storage_reads.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = Now();
  Result<int64_t> version = reader->GetAlone(keys, &rows);
  const bool strong = reader->snapshot_is_strong();
  if (!version.ok()) {
    spdlog::error("snapshot read failed: {}", version.status().ToString());
    // A backend that reconnects by itself (PostgreSQL), e.g. after a failover: try again.
    const Status s = !FailStop() && version.status().code() == StatusCode::kIoError
                         ? Unavailable("The database is temporarily unreachable, try again later.")
                         : version.status();
    for (ReadJob& j : batch) j.done(s);
    return;
  }
  if (!tickets.empty() && rows.size() == keys.size()) {
    for (size_t i = 0; i < keys.size(); ++i) cache_.Fill(keys[i], tickets[i], rows[i]);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    ReadResult out;
    out.version = *version;
    out.strong = strong;
    out.ranges.resize(1);
    if (i < rows.size() && rows[i] && storage::IsLive(rows[i]->expire_at_ms, now)) {
      StoredRow& r = *rows[i];
      out.ranges[0].push_back(
          Entry{keys[i], std::move(r.value), r.encoding, r.version, r.expire_at_ms});
    }
    batch[i].done(std::move(out));
  }
}

void Engine::ReaderLoop(storage::Reader* reader) {
  t_loop_owner = this;
  std::vector<ReadJob> batch;
  while (true) {
    ReadJob job;
    {
      MutexLock lock(read_mu_);
      while (!read_stop_ && read_queue_.empty()) read_cv_.Wait(read_mu_);
      if (read_queue_.empty()) return;  // stopping and drained
      job = std::move(read_queue_.front());
      read_queue_.pop_front();
      // Single-key reads waiting together (cache misses, or every point read without a cache)
      // are answered from one snapshot in one storage call: each was pending when that
      // snapshot was taken.
      if (IsSinglePoint(job)) {
        while (batch.size() + 1 < options_.max_read_batch && !read_queue_.empty() &&
               IsSinglePoint(read_queue_.front())) {
          batch.push_back(std::move(read_queue_.front()));
          read_queue_.pop_front();
        }
      }
    }
    if (job.custom) {
      job.custom(*reader);
      continue;
    }
    if (!batch.empty()) {
      batch.insert(batch.begin(), std::move(job));
      RunPointBatch(reader, batch);
      batch.clear();
      continue;
    }
    const int64_t now = Now();
    auto run = [&]() -> Result<ReadResult> {
      if (job.ranges.size() == 1) {  // the common case, in one call (one statement on PostgreSQL)
        ReadResult out;
        out.ranges.resize(1);
        KVC_ASSIGN_OR_RETURN(out.version, reader->ScanAlone(job.ranges[0], now, &out.ranges[0]));
        out.strong = reader->snapshot_is_strong();
        return out;
      }
      KVC_RETURN_IF_ERROR(reader->Begin());
      ReadResult out;
      out.ranges.resize(job.ranges.size());
      for (size_t i = 0; i < job.ranges.size(); ++i) {
        Status s = reader->Scan(job.ranges[i], now, &out.ranges[i]);
        if (!s.ok()) {
          reader->End();
          return s;
        }
      }
      return EndRead(reader, std::move(out));
    };
    counters_.storage_reads.fetch_add(1, std::memory_order_relaxed);
    const bool points = cache_.enabled() && AllPointReads(job.ranges);
    if (points) counters_.cache_misses.fetch_add(1, std::memory_order_relaxed);
    Result<ReadResult> r = points ? ReadPoints(reader, job.ranges, now) : run();
    if (!r.ok() && r.status().code() != StatusCode::kInvalidArgument) {
      spdlog::error("snapshot read failed: {}", r.status().ToString());
      // A backend that reconnects by itself (PostgreSQL), e.g. after a failover: try again.
      if (!FailStop() && r.status().code() == StatusCode::kIoError) {
        r = Unavailable("The database is temporarily unreachable, try again later.");
      }
    }
    job.done(std::move(r));
  }
}

void Engine::Write(AtomicWrite write, WriteCallback done) {
  Status s = ValidateAtomicWrite(write, options_.limits, Now());
  if (!s.ok()) {
    done(s);
    return;
  }
  const size_t bytes = caps_.transaction_limits.max_bytes > 0 ? AtomicWriteBytes(write) : 0;
  Status refused;
  {
    MutexLock lock(write_mu_);
    if (write_stop_) {
      refused = Unavailable("The server is shutting down, try again later.");
    } else if (write_queue_.size() >= options_.max_queued_writes) {
      counters_.writes_refused.fetch_add(1, std::memory_order_relaxed);
      refused = Unavailable("The server is overloaded, try again later.");
    } else {
      write_queue_.push_back(WriteJob{std::move(write), std::move(done)});
      write_queue_.back().bytes = bytes;
    }
  }
  if (!refused.ok()) {
    done(refused);  // NOLINT(bugprone-use-after-move): moved only when `refused` is OK
    return;
  }
  write_cv_.NotifyOne();
}

void Engine::WriterLoop() {
  t_loop_owner = this;
  std::vector<WriteJob> batch;
  while (true) {
    {
      MutexLock lock(write_mu_);
      while (!write_stop_ && write_queue_.empty() && !wake_) {
        // After a storage failure no task runs, so their schedules must not wake us (busy loop).
        int64_t due = -1;
        if (!failed_) {
          for (const auto& t : tasks_) {
            const int64_t at = t->NextRunMs();
            if (at >= 0 && (due < 0 || at < due)) due = at;
          }
        }
        const int64_t now = Now();
        if (due >= 0 && due <= now) break;
        // Sleep on the real clock; WakeWriter makes a moved test clock count at once.
        const int64_t wait = due < 0 ? options_.max_sweep_interval_ms : due - now;
        write_cv_.WaitFor(write_mu_, std::chrono::milliseconds(std::max<int64_t>(wait, 1)));
        if (due < 0) break;  // re-read the schedules now and then
      }
      wake_ = false;
      if (write_stop_ && write_queue_.empty()) break;
      batch.clear();
      TakeQueuedWrites(&batch);
    }
    if (!batch.empty()) {
      CommitBatch(batch);
      batch.clear();  // release the callbacks (and whatever they hold) now
    }
    RunDueTasks();
  }
}

void Engine::RunDueTasks() {
  if (failed_) return;
  TaskContext ctx(this);
  for (const auto& t : tasks_) {
    const int64_t now = Now();
    const int64_t at = t->NextRunMs();
    if (at >= 0 && at <= now && !failed_) t->Run(ctx, now);
  }
}

void Engine::MarkFailed(const char* what, const Status& s) {
  spdlog::critical("{} failed, refusing writes until restart: {}", what, s.ToString());
  failed_ = true;
  counters_.commit_failures.fetch_add(1, std::memory_order_relaxed);
}

void Engine::TakeQueuedWrites(std::vector<WriteJob>* batch) {
  const size_t max_bytes = caps_.transaction_limits.max_bytes;
  size_t bytes = 0;
  for (const WriteJob& j : *batch) bytes += j.bytes;
  while (batch->size() < max_group_writes_ && !write_queue_.empty()) {
    const size_t next = write_queue_.front().bytes;
    if (max_bytes > 0 && !batch->empty() && bytes + next > max_bytes) break;
    bytes += next;
    batch->push_back(std::move(write_queue_.front()));
    write_queue_.pop_front();
  }
}

void Engine::CommitBatch(std::vector<WriteJob>& batch) {
  if (failed_) {
    for (WriteJob& j : batch) {
      j.done(
          Unavailable("The database is unavailable after a storage failure; restart the server."));
    }
    return;
  }
  const auto started = std::chrono::steady_clock::now();
  for (size_t attempt = 0;; ++attempt) {
    const Status conflict = TryCommitGroup(batch, started);
    if (conflict.ok()) break;
    // An optimistic backend refused the group; nothing of it applied.
    counters_.commit_conflicts.fetch_add(1, std::memory_order_relaxed);
    if (attempt >= options_.max_commit_retries) {
      spdlog::warn("group commit of {} write(s) conflicted {} times; answering 503: {}",
                   batch.size(), attempt + 1, conflict.ToString());
      for (WriteJob& j : batch) {
        if (j.result.ok()) {
          j.result = Unavailable("The write conflicted with other writers, try again later.");
        }
      }
      break;
    }
    counters_.commit_retries.fetch_add(1, std::memory_order_relaxed);
    for (WriteJob& j : batch) {  // run every write again: its checks may fail now
      j.result = Internal("not run");
      j.changes.clear();
      j.enqueues.clear();
    }
  }
  if (!FailStop()) {
    // A backend that reconnects by itself (PostgreSQL) and lost its connection mid-batch: the
    // write was not applied and may be sent again.
    for (WriteJob& j : batch) {
      if (!j.result.ok() && j.result.status().code() == StatusCode::kIoError) {
        j.result = Unavailable("The write could not be committed, try again later.");
      }
    }
  }
  for (WriteJob& j : batch) j.done(std::move(j.result));
}

Status Engine::TryCommitGroup(std::vector<WriteJob>& batch,
                              std::chrono::steady_clock::time_point started) {
  auto set_all = [&](const Status& s) {
    for (WriteJob& j : batch) j.result = s;
  };
  Result<int64_t> base = writer_->Begin();
  auto begin_failed = [&] {
    spdlog::error("begin write transaction failed: {}", base.status().ToString());
    set_all(Unavailable("The server is temporarily unavailable, try again later."));
    return Status::Ok();
  };
  if (!base.ok()) return begin_failed();
  if (!caps_.exclusive_writer) {
    // Writes that arrived while we waited for the shared lock (another node's transaction) join
    // this transaction: the more nodes contend, the larger each one's group commit.
    MutexLock lock(write_mu_);
    TakeQueuedWrites(&batch);
  }
  const int64_t now = Now();
  int64_t version = *base;
  Result<GroupApplied> applied = ApplyGroup(batch, now, /*guard_every_write=*/false, &version);
  if (applied.ok() && *applied == GroupApplied::kRunAgainGuarded) {
    // A write without a savepoint erred part-way, so nothing of this transaction may commit.
    // Run the group again with a savepoint around every write: a write that errs again is then
    // undone alone, as it always was.
    writer_->Rollback();
    for (WriteJob& j : batch) {
      j.result = Internal("not run");
      j.changes.clear();
      j.enqueues.clear();
    }
    base = writer_->Begin();
    if (!base.ok()) return begin_failed();
    version = *base;
    applied = ApplyGroup(batch, now, /*guard_every_write=*/true, &version);
  }
  if (!applied.ok()) {
    set_all(applied.status());
    return Status::Ok();
  }
  if (*applied == GroupApplied::kNone) {
    writer_->Rollback();
    return Status::Ok();
  }
  std::vector<storage::CommitRecord> records;
  for (WriteJob& j : batch) {
    if (j.result.ok() && j.result->ok) {
      records.push_back(
          storage::CommitRecord{j.result->version, std::move(j.changes), std::move(j.enqueues)});
    }
  }
  Status s = CommitAndPublish(storage::CommitOrigin::kWrite, *base, version, std::move(records),
                              started, now);
  if (IsConflict(s)) return s;
  if (!s.ok()) {
    for (WriteJob& j : batch) {
      if (j.result.ok() && j.result->ok) {
        // on_commit_error: fail-stop keeps refusing until restart; a reconnecting backend
        // tries again with the next group.
        j.result =
            Unavailable(FailStop() ? "The write could not be made durable; restart the server."
                                   : "The write could not be committed, try again later.");
      }
    }
  }
  return Status::Ok();
}

namespace {

// Whether a write can fail after it changed something for a reason other than storage: a sum,
// min or max over a stored value of another type.
bool MayFailPartWay(const AtomicWrite& w) {
  for (const Mutation& m : w.mutations) {
    if (m.type == MutationType::kSum || m.type == MutationType::kMin ||
        m.type == MutationType::kMax) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<Engine::GroupApplied> Engine::ApplyGroup(std::vector<WriteJob>& batch, int64_t now_ms,
                                                bool guard_every_write, int64_t* version) {
  bool any_applied = false;
  for (WriteJob& job : batch) {
    const bool guarded = guard_every_write || MayFailPartWay(job.write);
    if (guarded) {
      Status sp = writer_->Savepoint();
      if (!sp.ok()) {
        job.result = sp;
        continue;
      }
    }
    const int64_t v_before_job = *version;
    job.result = ApplyWrite(job, now_ms, version);
    if (job.result.ok() && job.result->ok) {
      Status rel = guarded ? writer_->ReleaseSavepoint() : Status::Ok();
      if (rel.ok()) {
        any_applied = true;
        continue;
      }
      job.result = rel;
    }
    // Check failure or error: undo everything this write did.
    *version = v_before_job;
    job.changes.clear();
    job.enqueues.clear();
    if (!guarded) {
      if (!job.result.ok()) return GroupApplied::kRunAgainGuarded;
      continue;  // failed checks: ApplyWrite changed nothing
    }
    Status rb = writer_->RollbackToSavepoint();
    if (!rb.ok()) {
      writer_->Rollback();
      MarkFailed("rollback to savepoint", rb);
      return Unavailable("The database is unavailable after a storage failure.");
    }
  }
  return any_applied ? GroupApplied::kSome : GroupApplied::kNone;
}

Result<CommitResult> Engine::ApplyWrite(WriteJob& job, int64_t now_ms, int64_t* version_io) {
  const AtomicWrite& w = job.write;
  CommitResult result;
  for (size_t i = 0; i < w.checks.size(); ++i) {
    const Check& c = w.checks[i];
    KVC_ASSIGN_OR_RETURN(std::optional<StoredRow> row, writer_->Get(c.key));
    const bool live = row && storage::IsLive(row->expire_at_ms, now_ms);
    bool pass;
    if (c.versionstamp.empty()) {
      pass = !live;
    } else {
      pass = live && codec::VersionToVersionstamp(row->version) ==
                         *codec::VersionstampFromBytes(c.versionstamp);
    }
    if (!pass) result.failed_checks.push_back(static_cast<uint32_t>(i));
  }
  if (!result.failed_checks.empty()) {
    result.ok = false;
    return result;
  }
  *version_io += static_cast<int64_t>(rng_() % 9) + 1;
  const int64_t version = *version_io;
  job.changes.reserve(w.mutations.size());
  for (const Mutation& m : w.mutations) {
    const int64_t expiry = m.expire_at_ms > 0 ? m.expire_at_ms : -1;
    switch (m.type) {
      case MutationType::kSet:
      case MutationType::kSetSuffixVersionstampedKey: {
        std::string key = m.key;
        if (m.type == MutationType::kSetSuffixVersionstampedKey) {
          key += codec::VersionstampSuffix(codec::VersionToVersionstamp(version));
        }
        StoredRow row{m.value.data, m.value.encoding, version, expiry};
        KVC_RETURN_IF_ERROR(writer_->Put(key, row));
        job.changes.push_back(storage::KeyChange{std::move(key), std::move(row)});
        break;
      }
      case MutationType::kDelete:
        KVC_RETURN_IF_ERROR(writer_->Delete(m.key));
        job.changes.push_back(storage::KeyChange{m.key, std::nullopt});
        break;
      case MutationType::kSum:
      case MutationType::kMin:
      case MutationType::kMax: {
        KVC_ASSIGN_OR_RETURN(std::optional<StoredRow> existing, writer_->Get(m.key));
        if (existing && !storage::IsLive(existing->expire_at_ms, now_ms)) existing.reset();
        KVC_ASSIGN_OR_RETURN(StoredRow row, ApplyNumericMutation(m, existing, version));
        KVC_RETURN_IF_ERROR(writer_->Put(m.key, row));
        job.changes.push_back(storage::KeyChange{m.key, std::move(row)});
        break;
      }
    }
  }
  for (const Enqueue& e : w.enqueues) {
    storage::QueueRow q;
    q.ts = e.deadline_ms;
    q.id = NextMessageId(now_ms);
    q.payload = e.payload;
    q.backoff_schedule = e.backoff_schedule.empty() && !e.backoff_given ? kDefaultBackoffSchedule
                                                                        : e.backoff_schedule;
    q.keys_if_undelivered = e.keys_if_undelivered;
    KVC_RETURN_IF_ERROR(queue_->AddQueueMessage(q));
    job.enqueues.push_back(std::move(q));
  }
  result.ok = true;
  result.version = version;
  return result;
}

std::string Engine::NextMessageId(int64_t now_ms) {
  // Time-ordered ids, so messages due in the same millisecond are delivered in enqueue order
  // (the queue hands out due messages by (ts, id)); strictly increasing even if the clock
  // steps back or 4096 arrive in one millisecond.
  if (now_ms > id_ms_) {
    id_ms_ = now_ms;
    id_seq_ = 0;
  } else if (++id_seq_ > 0xfff) {
    ++id_ms_;
    id_seq_ = 0;
  }
  return NewUuidV7(id_ms_, static_cast<uint16_t>(id_seq_));
}

Status Engine::LogCommits(int64_t base, const std::vector<storage::CommitRecord>& records,
                          int64_t now_ms) {
  if (!LogsCommits()) return Status::Ok();
  int64_t prev = base;
  for (const storage::CommitRecord& r : records) {
    storage::ChangeLogRow row;
    row.version = r.version;
    row.prev_version = prev;
    row.time_ms = now_ms;
    row.bytes = storage::EncodeLoggedCommit(r, prev, now_ms);
    KVC_RETURN_IF_ERROR(log_->AppendChangeLog(row));
    prev = r.version;
  }
  const int64_t prune = log_prune_through_.load(std::memory_order_acquire);
  if (prune > log_pruned_through_) {
    KVC_RETURN_IF_ERROR(log_->PruneChangeLog(prune));
    log_pruned_through_ = prune;
  }
  return Status::Ok();
}

void Engine::PruneChangeLogThrough(int64_t version) {
  int64_t v = log_prune_through_.load();
  while (v < version && !log_prune_through_.compare_exchange_weak(v, version)) {
  }
}

void Engine::WithReader(std::function<void(storage::Reader*, const Status&)> fn) {
  auto shared =
      std::make_shared<std::function<void(storage::Reader*, const Status&)>>(std::move(fn));
  ReadJob job;
  job.custom = [shared](storage::Reader& r) { (*shared)(&r, Status::Ok()); };
  Status refused = EnqueueRead(std::move(job), /*bounded=*/false);
  if (!refused.ok()) (*shared)(nullptr, refused);
}

Status Engine::Transact(storage::CommitOrigin origin, const WriterTaskContext::StateBody& body) {
  if (failed_) {
    return Unavailable("The database is unavailable after a storage failure; restart the server.");
  }
  // A task's transaction that an optimistic backend refused for a conflict is not run again
  // here (its body may have acted on what it read): the task sees Unavailable and runs again
  // on its next schedule.
  auto answer = [this](Status s) {
    if (!IsConflict(s)) return s;
    return Unavailable("The storage refused the transaction for a conflict; try again later.");
  };
  const auto started = std::chrono::steady_clock::now();
  KVC_ASSIGN_OR_RETURN(int64_t base, writer_->Begin());
  const int64_t version = base + 1;
  Result<WriterTaskContext::StateWrite> w = body(*writer_, version);
  if (!w.ok() || (w->changes.empty() && !w->wrote)) {
    writer_->Rollback();
    return w.status();
  }
  if (w->changes.empty()) {
    // State outside the key space only: durable, but no new version and nothing to publish.
    Status s = writer_->Commit();  // rolls back itself on failure
    if (!s.ok() && !IsConflict(s) && FailStop()) MarkFailed("commit", s);
    return answer(s);
  }
  std::vector<storage::CommitRecord> records;
  records.push_back(storage::CommitRecord{version, std::move(w->changes)});
  return answer(CommitAndPublish(origin, base, version, std::move(records), started, Now()));
}

Status Engine::CommitAndPublish(storage::CommitOrigin origin, int64_t base, int64_t version,
                                std::vector<storage::CommitRecord> records,
                                std::chrono::steady_clock::time_point started, int64_t now_ms) {
  Status logged = LogCommits(base, records, now_ms);
  if (!logged.ok()) {
    writer_->Rollback();
    if (FailStop()) MarkFailed("change log", logged);
    return logged;
  }
  // Cached rows of the written keys go stale at the commit: mark them pending until it is over,
  // then cache the committed rows (the last change of a key is its row).
  std::vector<std::string> keys;
  std::vector<const std::optional<storage::StoredRow>*> rows;
  if (cache_.enabled()) {
    for (const storage::CommitRecord& r : records) {
      for (const storage::KeyChange& c : r.changes) {
        keys.push_back(c.key);
        rows.push_back(&c.row);
      }
    }
  }
  cache_.BeginWrite(keys);
  Status s = writer_->SetDataVersion(version);
  int64_t commit_us = 0;
  if (s.ok()) {
    const auto commit_start = std::chrono::steady_clock::now();
    s = writer_->Commit();  // rolls back itself on failure
    commit_us = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::steady_clock::now() - commit_start)
                    .count();
  } else {
    writer_->Rollback();
  }
  cache_.EndWrite(keys, s.ok() ? &rows : nullptr);
  if (IsConflict(s)) return s;  // nothing applied; the caller may run it again
  if (!s.ok()) {
    // The transaction is gone; nothing of it is visible. A fail-stop backend (SQLite) cannot
    // know whether a failed fsync left data in the OS cache, so refuse further writes until
    // restart. A reconnecting backend (PostgreSQL) keeps its own durability: its writer
    // reconnects and the next batch retries.
    if (FailStop()) {
      MarkFailed("commit", s);
    } else {
      spdlog::error("commit failed: {}", s.ToString());
    }
    return s;
  }
  int64_t v = committed_version_.load();
  while (v < version && !committed_version_.compare_exchange_weak(v, version)) {
  }
  if (!FeedPublishes()) {  // otherwise the change feed publishes it
    storage::CommitGroup group;
    group.origin = origin;
    group.time_ms = now_ms;
    group.commit_us = commit_us;
    group.transaction_us = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - started)
                               .count();
    group.records = std::move(records);
    Publish(group);
  }
  return Status::Ok();
}

}  // namespace kvc::engine
