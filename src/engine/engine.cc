#include "engine/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/mutation.h"

namespace kvc::engine {

using storage::StoredRow;

namespace {

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

}  // namespace

Engine::Engine(std::unique_ptr<storage::Backend> backend, const EngineOptions& options)
    : options_(options), backend_(std::move(backend)), cache_(options.read_cache_bytes) {
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
  database_id_ = backend_->database_id();
  KVC_ASSIGN_OR_RETURN(version_, backend_->LoadDataVersion());
  committed_version_ = version_;
  KVC_ASSIGN_OR_RETURN(writer_, backend_->OpenWriter());
  {
    KVC_ASSIGN_OR_RETURN(std::optional<int64_t> earliest, writer_->EarliestExpiry());
    next_expiry_ms_ = earliest.value_or(-1);
  }
  const int n = std::max(1, options_.reader_threads);
  for (int i = 0; i < n; ++i) {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Reader> r, backend_->OpenReader());
    readers_.push_back(std::move(r));
  }
  for (auto& r : readers_) {
    storage::Reader* raw = r.get();
    reader_threads_.emplace_back([this, raw] { ReaderLoop(raw); });
  }
  writer_thread_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

Engine::~Engine() { Shutdown(); }

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    write_stop_ = true;
  }
  write_cv_.notify_all();
  if (writer_thread_.joinable()) writer_thread_.join();
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    read_stop_ = true;
  }
  read_cv_.notify_all();
  for (auto& t : reader_threads_) {
    if (t.joinable()) t.join();
  }
  readers_.clear();
  writer_.reset();
}

int64_t Engine::committed_version() const { return committed_version_.load(); }

std::unique_ptr<WatchHub::Subscription> Engine::Subscribe(std::vector<std::string> keys,
                                                          WatchHub::Callback on_change) {
  return hub_.Subscribe(std::move(keys), std::move(on_change));
}

void Engine::SnapshotRead(std::vector<ReadRange> ranges, ReadCallback done, Completion completion) {
  Status s = ValidateSnapshotRead(ranges, options_.limits);
  if (!s.ok()) {
    done(s);
    return;
  }
  if (completion == Completion::kMayBeInline) {
    ReadResult hit;
    if (TryCachedRead(ranges, &hit)) {
      done(std::move(hit));
      return;
    }
  }
  Status refused;
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    if (read_stop_) {
      refused = Unavailable("The server is shutting down, try again later.");
    } else if (read_queue_.size() >= options_.max_queued_reads) {
      refused = Unavailable("The server is overloaded, try again later.");
    } else {
      read_queue_.push_back(ReadJob{std::move(ranges), std::move(done)});
    }
  }
  if (!refused.ok()) {
    // Outside the lock: the callback may call back into the engine. `done` was moved only if
    // the job was queued, that is if `refused` is OK.
    done(refused);  // NOLINT(bugprone-use-after-move)
    return;
  }
  read_cv_.notify_one();
}

bool Engine::TryCachedRead(const std::vector<ReadRange>& ranges, ReadResult* out) {
  if (!cache_.enabled() || !AllPointReads(ranges)) return false;
  const uint64_t writes_ended = cache_.writes_ended();
  const int64_t version = committed_version_.load();
  const int64_t now = NowUnixMs();
  out->ranges.assign(ranges.size(), {});
  storage::StoredRow row;
  for (size_t i = 0; i < ranges.size(); ++i) {
    switch (cache_.Get(ranges[i].start, now, &row)) {
      case ReadCache::Lookup::kMiss:
        return false;
      case ReadCache::Lookup::kAbsent:
        break;
      case ReadCache::Lookup::kPresent:
        out->ranges[i].push_back(
            Entry{ranges[i].start, std::move(row.value), row.encoding, row.version});
        break;
    }
  }
  // Several keys form one snapshot only if no write ended between their lookups.
  if (ranges.size() > 1 && cache_.writes_ended() != writes_ended) return false;
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
      out.ranges[i].push_back(Entry{ranges[i].start, std::move(r.value), r.encoding, r.version});
    }
  }
  auto v = reader->DataVersion();
  reader->End();
  if (!v.ok()) return v.status();
  out.version = *v;
  return out;
}

void Engine::ReaderLoop(storage::Reader* reader) {
  while (true) {
    ReadJob job;
    {
      std::unique_lock<std::mutex> lock(read_mu_);
      read_cv_.wait(lock, [&] { return read_stop_ || !read_queue_.empty(); });
      if (read_queue_.empty()) return;  // stopping and drained
      job = std::move(read_queue_.front());
      read_queue_.pop_front();
    }
    const int64_t now = NowUnixMs();
    auto run = [&]() -> Result<ReadResult> {
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
      auto v = reader->DataVersion();
      reader->End();
      if (!v.ok()) return v.status();
      out.version = *v;
      return out;
    };
    Result<ReadResult> r =
        cache_.enabled() && AllPointReads(job.ranges) ? ReadPoints(reader, job.ranges, now) : run();
    if (!r.ok() && r.status().code() == StatusCode::kInternal) {
      spdlog::error("snapshot read failed: {}", r.status().message());
    }
    job.done(std::move(r));
  }
}

void Engine::Write(AtomicWrite write, WriteCallback done) {
  Status s = ValidateAtomicWrite(write, options_.limits, NowUnixMs());
  if (!s.ok()) {
    done(s);
    return;
  }
  Status refused;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (write_stop_) {
      refused = Unavailable("The server is shutting down, try again later.");
    } else if (write_queue_.size() >= options_.max_queued_writes) {
      refused = Unavailable("The server is overloaded, try again later.");
    } else {
      write_queue_.push_back(WriteJob{std::move(write), std::move(done)});
    }
  }
  if (!refused.ok()) {
    done(refused);  // NOLINT(bugprone-use-after-move): moved only when `refused` is OK
    return;
  }
  write_cv_.notify_one();
}

void Engine::WriterLoop() {
  std::vector<WriteJob> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(write_mu_);
      while (!write_stop_ && write_queue_.empty()) {
        const int64_t now = NowUnixMs();
        int64_t wake = now + options_.max_sweep_interval_ms;
        // After a storage failure no sweep runs, so expiries must not wake us (busy loop).
        if (next_expiry_ms_ >= 0 && !failed_) wake = std::min(wake, next_expiry_ms_);
        if (wake <= now) break;
        write_cv_.wait_for(lock, std::chrono::milliseconds(wake - now));
      }
      if (write_stop_ && write_queue_.empty()) break;
      const size_t n = std::min(write_queue_.size(), options_.max_batch_writes);
      batch.clear();
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(write_queue_.front()));
        write_queue_.pop_front();
      }
    }
    if (!batch.empty()) {
      CommitBatch(batch);
      batch.clear();  // release the callbacks (and whatever they hold) now
    }
    const int64_t now = NowUnixMs();
    bool due;
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      due = next_expiry_ms_ >= 0 && next_expiry_ms_ <= now;
    }
    if (due && !failed_) Sweep(now);
  }
}

void Engine::CommitBatch(std::vector<WriteJob>& batch) {
  auto fail_all = [&](const Status& s) {
    for (WriteJob& j : batch) j.done(s);
  };
  if (failed_) {
    fail_all(
        Unavailable("The database is unavailable after a storage failure; restart the server."));
    return;
  }
  Status s = writer_->Begin();
  if (!s.ok()) {
    spdlog::error("begin write transaction failed: {}", s.message());
    fail_all(Unavailable("The server is temporarily unavailable, try again later."));
    return;
  }
  const int64_t now = NowUnixMs();
  const int64_t version_before = version_;
  int64_t min_expiry = -1;
  bool any_applied = false;
  for (WriteJob& job : batch) {
    Status sp = writer_->Savepoint();
    if (!sp.ok()) {
      job.result = sp;
      continue;
    }
    const int64_t v_before_job = version_;
    int64_t job_min_expiry = -1;
    job.result = ApplyWrite(job, now, &job_min_expiry);
    if (job.result.ok() && job.result->ok) {
      Status rel = writer_->ReleaseSavepoint();
      if (rel.ok()) {
        any_applied = true;
        if (job_min_expiry >= 0 && (min_expiry < 0 || job_min_expiry < min_expiry)) {
          min_expiry = job_min_expiry;
        }
        continue;
      }
      job.result = rel;
    }
    // Check failure or error: undo everything this write did.
    version_ = v_before_job;
    job.changed_keys.clear();
    Status rb = writer_->RollbackToSavepoint();
    if (!rb.ok()) {
      spdlog::error("rollback to savepoint failed: {}", rb.message());
      writer_->Rollback();
      version_ = version_before;
      failed_ = true;
      fail_all(Unavailable("The database is unavailable after a storage failure."));
      return;
    }
  }
  // Cached rows of the written keys go stale at the commit: mark them pending until it is over.
  for (WriteJob& j : batch) cache_.BeginWrite(j.changed_keys);
  if (any_applied) {
    s = writer_->SetDataVersion(version_);
    if (s.ok()) {
      s = writer_->Commit();  // rolls back itself on failure
    } else {
      writer_->Rollback();
    }
  } else {
    writer_->Rollback();
  }
  for (WriteJob& j : batch) cache_.EndWrite(j.changed_keys);
  if (!s.ok()) {
    // The transaction is gone; nothing of this batch is visible. We cannot know whether a
    // failed fsync left data in the OS cache, so refuse further writes until restart.
    spdlog::critical("commit failed, refusing writes until restart: {}", s.message());
    failed_ = true;
    version_ = version_before;
    for (WriteJob& j : batch) {
      if (j.result.ok() && j.result->ok) {
        j.result = Unavailable("The write could not be made durable; restart the server.");
      }
    }
  } else if (any_applied) {
    committed_version_ = version_;
    if (min_expiry >= 0) {
      std::lock_guard<std::mutex> lock(write_mu_);
      if (next_expiry_ms_ < 0 || min_expiry < next_expiry_ms_) next_expiry_ms_ = min_expiry;
    }
    for (WriteJob& j : batch) {
      if (j.result.ok() && j.result->ok && !j.changed_keys.empty()) {
        hub_.Notify(j.changed_keys, j.result->version);
      }
    }
  }
  for (WriteJob& j : batch) j.done(std::move(j.result));
}

Result<CommitResult> Engine::ApplyWrite(WriteJob& job, int64_t now_ms, int64_t* min_expiry) {
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
  version_ += static_cast<int64_t>(rng_() % 9) + 1;
  const int64_t version = version_;
  job.changed_keys.reserve(w.mutations.size());
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
        if (expiry >= 0 && (*min_expiry < 0 || expiry < *min_expiry)) *min_expiry = expiry;
        job.changed_keys.push_back(std::move(key));
        break;
      }
      case MutationType::kDelete:
        KVC_RETURN_IF_ERROR(writer_->Delete(m.key));
        job.changed_keys.push_back(m.key);
        break;
      case MutationType::kSum:
      case MutationType::kMin:
      case MutationType::kMax: {
        KVC_ASSIGN_OR_RETURN(std::optional<StoredRow> existing, writer_->Get(m.key));
        if (existing && !storage::IsLive(existing->expire_at_ms, now_ms)) existing.reset();
        KVC_ASSIGN_OR_RETURN(StoredRow row, ApplyNumericMutation(m, existing, version));
        KVC_RETURN_IF_ERROR(writer_->Put(m.key, row));
        job.changed_keys.push_back(m.key);
        break;
      }
    }
  }
  for (const Enqueue& e : w.enqueues) {
    storage::QueueRow q;
    q.ts = e.deadline_ms;
    q.id = NewUuidV4();
    q.payload = e.payload;
    std::string sched = "[";
    const std::vector<uint32_t> def = {100, 1000, 5000, 30000, 60000};
    const auto& schedule = e.backoff_schedule.empty() ? def : e.backoff_schedule;
    for (size_t i = 0; i < schedule.size(); ++i) {
      if (i) sched += ",";
      sched += std::to_string(schedule[i]);
    }
    q.backoff_schedule_json = sched + "]";
    std::string keys = "[";
    for (size_t i = 0; i < e.keys_if_undelivered.size(); ++i) {
      if (i) keys += ",";
      keys += "[";
      const std::string& k = e.keys_if_undelivered[i];
      for (size_t j = 0; j < k.size(); ++j) {
        if (j) keys += ",";
        keys += std::to_string(static_cast<unsigned char>(k[j]));
      }
      keys += "]";
    }
    q.keys_if_undelivered_json = keys + "]";
    KVC_RETURN_IF_ERROR(writer_->AddQueueMessage(q));
  }
  result.ok = true;
  result.version = version;
  return result;
}

void Engine::Sweep(int64_t now_ms) {
  Status s = writer_->Begin();
  if (!s.ok()) {
    spdlog::warn("expiry sweep could not begin: {}", s.message());
    std::lock_guard<std::mutex> lock(write_mu_);
    next_expiry_ms_ = now_ms + 1000;  // retry later instead of spinning
    return;
  }
  auto run = [&]() -> Result<std::vector<std::string>> {
    KVC_ASSIGN_OR_RETURN(std::vector<std::string> keys, writer_->DeleteExpired(now_ms));
    if (!keys.empty()) KVC_RETURN_IF_ERROR(writer_->SetDataVersion(version_ + 1));
    KVC_ASSIGN_OR_RETURN(std::optional<int64_t> earliest, writer_->EarliestExpiry());
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      next_expiry_ms_ = earliest.value_or(-1);
    }
    return keys;
  };
  auto keys = run();
  if (!keys.ok()) {
    writer_->Rollback();
    spdlog::warn("expiry sweep failed: {}", keys.status().message());
    std::lock_guard<std::mutex> lock(write_mu_);
    next_expiry_ms_ = now_ms + 1000;  // retry later instead of spinning
    return;
  }
  s = writer_->Commit();
  if (!s.ok()) {
    spdlog::critical("expiry sweep commit failed, refusing writes until restart: {}", s.message());
    failed_ = true;
    return;
  }
  if (!keys->empty()) {
    version_ += 1;
    committed_version_ = version_;
    hub_.Notify(*keys, version_);
    spdlog::debug("expiry sweep removed {} keys", keys->size());
  }
}

}  // namespace kvc::engine
