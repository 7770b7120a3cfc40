// The benchmark driver: metadata exchange, connections, preload, the timed window with its
// actors (request loops, watchers, the watch writer), the sum check, and the report.
//
// Every actor runs on the io_context of its connection; one thread runs each io_context, so an
// actor and its connection need no locks. Each thread has its own ThreadStats. The driver
// (the calling thread) only posts work, waits on Countdowns, and reads the stats after the
// threads have stopped.
#include "loadgen/bench.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>
#include <condition_variable>
#include <future>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "codec/client_codec.h"
#include "codec/key_codec.h"
#include "codec/metadata_json.h"
#include "codec/versionstamp.h"
#include "common/bytes.h"

namespace kvc::loadgen {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

constexpr char kMetadataBody[] = R"({"supportedVersions":[1,2,3]})";
constexpr char kUserAgent[] = "kvconnect-bench/0.1";
constexpr int64_t kListSize = 100;
// How long the I/O threads may take to wind down on their own before they are stopped.
constexpr std::chrono::milliseconds kStopGrace{2000};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

Clock::time_point FromNs(int64_t ns) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

int64_t SecondsToNs(double s) { return static_cast<int64_t>(s * 1e9); }

// Counts down from n; waiters wake when it reaches zero. Thread-safe.
class Countdown {
 public:
  explicit Countdown(int64_t n) : n_(n) {}

  void Done() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--n_ <= 0) cv_.notify_all();
  }

  // Returns true if the count reached zero by `deadline`.
  bool WaitUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [this] { return n_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t n_;  // guarded by mu_
};

// One io_context per thread, each run by its own thread until Stop().
// Thread-safety: context() from any thread; Stop() from the owner.
class IoPool {
 public:
  explicit IoPool(int threads) : exited_(threads) {
    for (int i = 0; i < threads; ++i) {
      contexts_.push_back(std::make_unique<asio::io_context>(1));
      guards_.emplace_back(contexts_.back()->get_executor());
    }
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] {
        contexts_[static_cast<size_t>(i)]->run();
        exited_.Done();
      });
    }
  }

  ~IoPool() { Stop(); }

  size_t size() const { return contexts_.size(); }
  asio::io_context& context(size_t i) { return *contexts_[i % contexts_.size()]; }

  // Lets the contexts run out of work for up to `grace`, then stops them and joins the threads.
  void Stop(std::chrono::milliseconds grace = kStopGrace) {
    if (threads_.empty()) return;
    guards_.clear();
    exited_.WaitUntil(Clock::now() + grace);
    for (auto& c : contexts_) c->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::unique_ptr<asio::io_context>> contexts_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  Countdown exited_;
};

// The measurements of one I/O thread (see the file comment).
struct ThreadStats {
  std::vector<uint64_t> latency_ns;  // counted operations (or, for watch, frames)
  uint64_t ops = 0;
  uint64_t conflicts = 0;
  uint64_t misses = 0;
  uint64_t sums_ok = 0;       // whole run
  uint64_t sums_unknown = 0;  // whole run
  uint64_t frames = 0;
  uint64_t writes = 0;
  int watchers_open = 0;
  int64_t last_done_ns = 0;
  ErrorCounts errors;
};

// What every actor needs to know about the run. Written by the driver before any actor starts,
// except the atomics.
struct Plan {
  BenchOptions options;
  std::shared_ptr<const Headers> headers;  // data-path headers
  std::string read_path;
  std::string write_path;
  std::string watch_path;
  std::vector<std::string> keys;  // ["bench","kv",i]
  std::string keys_end;           // end of the ["bench","kv"] prefix range
  std::vector<std::string> hot_keys;
  std::string counter_key;
  std::vector<std::string> watch_keys;
  std::string value;            // V8 string of value_size characters
  bool expect_present = false;  // this run preloaded `keys`: a miss is an error
  // The window in NowNs() time; nothing is counted until the driver sets it.
  std::atomic<int64_t> window_start_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> window_end_ns{std::numeric_limits<int64_t>::max()};
  // The driver is cutting connections off: failures from now on are "timeout"s.
  std::atomic<bool> stopping{false};

  int64_t window_start() const { return window_start_ns.load(std::memory_order_relaxed); }
  int64_t window_end() const { return window_end_ns.load(std::memory_order_relaxed); }
  bool is_stopping() const { return stopping.load(std::memory_order_relaxed); }

  Request MakeRequest(const std::string& path, std::string body) const {
    return Request{path, headers, {}, std::move(body)};
  }
};

std::string ReadOneBody(const std::string& key) {
  return codec::EncodeSnapshotReadRequest({ReadRange{key, key + '\0', 1, false}});
}

std::string SetBody(const std::string& key, const std::string& v8_value) {
  AtomicWrite w;
  w.mutations.push_back(Mutation{key, MutationType::kSet, KvValue{v8_value, ValueEncoding::kV8}});
  return codec::EncodeAtomicWriteRequest(w);
}

// Returns the body of a 200 answer, or records why there is none.
std::optional<std::string> TakeBody(Result<Response>& r, const Plan& plan, ThreadStats* stats,
                                    std::string_view call) {
  if (!r.ok()) {
    if (plan.is_stopping()) {
      stats->errors.Add("timeout",
                        std::string(call) + ": cut off after the window: " + r.status().message());
    } else if (r.status().code() == StatusCode::kPayloadTooLarge) {
      stats->errors.Add("response_too_large", std::string(call) + ": " + r.status().message());
    } else {
      stats->errors.Add("transport", std::string(call) + ": " + r.status().message());
    }
    return std::nullopt;
  }
  if (r->status != 200) {
    const std::string code = std::to_string(r->status);
    stats->errors.Add("http_" + code, std::string(call) + ": HTTP " + code + ": " + r->body);
    return std::nullopt;
  }
  return std::move(r->body);
}

// Decodes a snapshot_read answer that must have `ranges` ranges and status SR_SUCCESS.
std::optional<std::vector<std::vector<Entry>>> DecodeRead(const std::string& body, size_t ranges,
                                                          ThreadStats* stats) {
  auto r = codec::DecodeSnapshotReadOutput(body);
  if (!r.ok()) {
    stats->errors.Add("decode", "snapshot_read: " + r.status().message());
    return std::nullopt;
  }
  if (r->status != codec::ReadStatus::kSuccess) {
    stats->errors.Add("read_status", "snapshot_read: status " +
                                         std::to_string(static_cast<int>(r->status)) +
                                         " instead of SR_SUCCESS");
    return std::nullopt;
  }
  if (r->ranges.size() != ranges) {
    stats->errors.Add("decode", "snapshot_read: " + std::to_string(r->ranges.size()) +
                                    " ranges in the answer, " + std::to_string(ranges) +
                                    " requested");
    return std::nullopt;
  }
  return std::move(r->ranges);
}

// Decodes an atomic_write answer whose status must be AW_SUCCESS or AW_CHECK_FAILURE.
std::optional<codec::AtomicWriteResult> DecodeWrite(const std::string& body, ThreadStats* stats) {
  auto r = codec::DecodeAtomicWriteOutput(body);
  if (!r.ok()) {
    stats->errors.Add("decode", "atomic_write: " + r.status().message());
    return std::nullopt;
  }
  if (r->status != codec::WriteStatus::kSuccess && r->status != codec::WriteStatus::kCheckFailure) {
    stats->errors.Add("write_status",
                      "atomic_write: status " + std::to_string(static_cast<int>(r->status)));
    return std::nullopt;
  }
  return std::move(r).value();
}

// One request loop: starts its next operation as soon as the last one ended, until the window
// ends or its connection fails. Lives on its connection's io_context.
// Ownership (the same for Watcher, WatchWriter and PreloadLane): shares the connection; the
// plan, the stats and the countdown belong to the BenchRun, which stops the I/O threads before
// it destroys them or the actor.
class Worker {
 public:
  Worker(const Plan* plan, std::shared_ptr<Connection> conn, ThreadStats* stats, uint64_t seed,
         Countdown* finished)
      : plan_(plan), conn_(std::move(conn)), stats_(stats), rng_(seed), finished_(finished) {}

  void Start() { Next(); }

 private:
  enum class Outcome { kSuccess, kConflict, kFailed };

  uint64_t Random(uint64_t n) { return rng_() % n; }

  void Next() {
    const int64_t now = NowNs();
    if (now >= plan_->window_end() || plan_->is_stopping() || !conn_->usable()) {
      finished_->Done();
      return;
    }
    start_ns_ = now;
    switch (plan_->options.workload) {
      case Workload::kGet:
        DoGet();
        break;
      case Workload::kSet:
        DoSet();
        break;
      case Workload::kCas:
        DoCas();
        break;
      case Workload::kList:
        DoList();
        break;
      case Workload::kSum:
        DoSum();
        break;
      case Workload::kMixed:
        if (Random(10) == 0) {
          DoSet();
        } else {
          DoGet();
        }
        break;
      case Workload::kWatch:  // run by Watcher and WatchWriter
        finished_->Done();
        break;
    }
  }

  void Finish(Outcome outcome) {
    const int64_t end = NowNs();
    if (start_ns_ >= plan_->window_start()) {
      if (outcome != Outcome::kFailed) {
        stats_->latency_ns.push_back(static_cast<uint64_t>(end - start_ns_));
        stats_->last_done_ns = std::max(stats_->last_done_ns, end);
      }
      if (outcome == Outcome::kSuccess) ++stats_->ops;
      if (outcome == Outcome::kConflict) ++stats_->conflicts;
    }
    Next();
  }

  void DoGet() {
    const std::string& key = plan_->keys[Random(plan_->keys.size())];
    conn_->Send(
        plan_->MakeRequest(plan_->read_path, ReadOneBody(key)), [this, &key](Result<Response> r) {
          auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
          if (!body) return Finish(Outcome::kFailed);
          auto ranges = DecodeRead(*body, 1, stats_);
          if (!ranges) return Finish(Outcome::kFailed);
          if ((*ranges)[0].empty()) {
            ++stats_->misses;
            if (plan_->expect_present) {
              stats_->errors.Add(
                  "not_found", "get: preloaded key " + codec::KeyToString(key) + " was not found");
              return Finish(Outcome::kFailed);
            }
          }
          Finish(Outcome::kSuccess);
        });
  }

  void DoSet() {
    const std::string& key = plan_->keys[Random(plan_->keys.size())];
    conn_->Send(plan_->MakeRequest(plan_->write_path, SetBody(key, plan_->value)),
                [this](Result<Response> r) {
                  auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                  if (!body) return Finish(Outcome::kFailed);
                  auto result = DecodeWrite(*body, stats_);
                  if (!result) return Finish(Outcome::kFailed);
                  if (result->status != codec::WriteStatus::kSuccess) {
                    stats_->errors.Add("write_status",
                                       "set: a write without checks failed a check");
                    return Finish(Outcome::kFailed);
                  }
                  Finish(Outcome::kSuccess);
                });
  }

  // Check-and-set: read the key, then write it only if its versionstamp is unchanged.
  void DoCas() {
    const std::string& key = plan_->hot_keys[Random(plan_->hot_keys.size())];
    conn_->Send(plan_->MakeRequest(plan_->read_path, ReadOneBody(key)), [this,
                                                                         &key](Result<Response> r) {
      auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
      if (!body) return Finish(Outcome::kFailed);
      auto ranges = DecodeRead(*body, 1, stats_);
      if (!ranges) return Finish(Outcome::kFailed);
      AtomicWrite w;
      std::string stamp;  // empty: the key must not exist
      if (!(*ranges)[0].empty()) {
        stamp = codec::VersionstampToBytes(codec::VersionToVersionstamp((*ranges)[0][0].version));
      }
      w.checks.push_back(Check{key, std::move(stamp)});
      w.mutations.push_back(Mutation{
          key, MutationType::kSet,
          KvValue{codec::EncodeV8String("cas " + std::to_string(++counter_)), ValueEncoding::kV8}});
      conn_->Send(plan_->MakeRequest(plan_->write_path, codec::EncodeAtomicWriteRequest(w)),
                  [this](Result<Response> wr) {
                    auto wbody = TakeBody(wr, *plan_, stats_, "atomic_write");
                    if (!wbody) return Finish(Outcome::kFailed);
                    auto result = DecodeWrite(*wbody, stats_);
                    if (!result) return Finish(Outcome::kFailed);
                    Finish(result->status == codec::WriteStatus::kSuccess ? Outcome::kSuccess
                                                                          : Outcome::kConflict);
                  });
    });
  }

  void DoList() {
    const size_t start = Random(plan_->keys.size() - kListSize + 1);
    const ReadRange range{plan_->keys[start], plan_->keys_end, static_cast<int32_t>(kListSize),
                          false};
    conn_->Send(plan_->MakeRequest(plan_->read_path, codec::EncodeSnapshotReadRequest({range})),
                [this](Result<Response> r) {
                  auto body = TakeBody(r, *plan_, stats_, "snapshot_read");
                  if (!body) return Finish(Outcome::kFailed);
                  auto ranges = DecodeRead(*body, 1, stats_);
                  if (!ranges) return Finish(Outcome::kFailed);
                  const size_t n = (*ranges)[0].size();
                  if (n != static_cast<size_t>(kListSize)) {
                    ++stats_->misses;
                    if (plan_->expect_present) {
                      stats_->errors.Add("short_list",
                                         "list: " + std::to_string(n) + " entries instead of 100");
                      return Finish(Outcome::kFailed);
                    }
                  }
                  Finish(Outcome::kSuccess);
                });
  }

  void DoSum() {
    AtomicWrite w;
    w.mutations.push_back(Mutation{plan_->counter_key, MutationType::kSum,
                                   KvValue{EncodeLe64(1), ValueEncoding::kLe64}});
    conn_->Send(plan_->MakeRequest(plan_->write_path, codec::EncodeAtomicWriteRequest(w)),
                [this](Result<Response> r) {
                  // Without an answer the sum may or may not have been applied.
                  if (!r.ok()) ++stats_->sums_unknown;
                  auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                  if (!body) return Finish(Outcome::kFailed);
                  auto result = DecodeWrite(*body, stats_);
                  if (!result) {
                    ++stats_->sums_unknown;  // a 200 we cannot read may still be a success
                    return Finish(Outcome::kFailed);
                  }
                  if (result->status != codec::WriteStatus::kSuccess) {
                    stats_->errors.Add("write_status",
                                       "sum: a write without checks failed a check");
                    return Finish(Outcome::kFailed);
                  }
                  ++stats_->sums_ok;
                  Finish(Outcome::kSuccess);
                });
  }

  const Plan* plan_;
  std::shared_ptr<Connection> conn_;
  ThreadStats* stats_;
  std::mt19937_64 rng_;
  Countdown* finished_;
  int64_t start_ns_ = 0;
  uint64_t counter_ = 0;  // makes every cas value new
};

// One watch stream on one key. Counts each frame that reports a change made inside the window
// and its change-to-frame latency (the writer puts its submit time into the value).
class Watcher {
 public:
  Watcher(const Plan* plan, std::shared_ptr<Connection> conn, ThreadStats* stats,
          const std::string* key, Countdown* ready, Countdown* ended)
      : plan_(plan),
        conn_(std::move(conn)),
        stats_(stats),
        key_(key),
        ready_(ready),
        ended_(ended),
        frames_(plan->options.max_response_bytes) {}

  void Start() {
    StreamHandlers h;
    h.on_head = [this](int status, std::string_view) { status_ = status; };
    h.on_data = [this](std::string_view data) { OnData(data); };
    h.on_end = [this](Status s) { OnEnd(std::move(s)); };
    conn_->SendStreaming(plan_->MakeRequest(plan_->watch_path, codec::EncodeWatchRequest({*key_})),
                         std::move(h));
  }

  bool opened() const { return opened_; }
  bool failed() const { return failed_; }

 private:
  void OnData(std::string_view data) {
    if (failed_) return;
    if (status_ != 200) {  // an error answer: keep its text
      if (error_body_.size() < ErrorCounts::kMaxTextBytes) error_body_.append(data);
      return;
    }
    frames_.Append(data);
    while (true) {
      Result<std::optional<std::string_view>> frame = frames_.Next();
      if (!frame.ok()) return Fail("decode", "watch: " + frame.status().message());
      if (!frame->has_value()) return;
      if (!(*frame)->empty()) OnFrame(**frame);  // empty: a keep-alive
      if (failed_) return;
    }
  }

  void OnFrame(std::string_view payload) {
    const int64_t now = NowNs();
    auto frame = codec::DecodeWatchOutput(payload);
    if (!frame.ok()) return Fail("decode", "watch: " + frame.status().message());
    if (frame->status != codec::ReadStatus::kSuccess) {
      return Fail("read_status",
                  "watch: frame status " + std::to_string(static_cast<int>(frame->status)));
    }
    if (frame->keys.size() != 1) {
      return Fail("decode", "watch: a frame with " + std::to_string(frame->keys.size()) +
                                " keys for 1 watched key");
    }
    const codec::WatchKeyResult& k = frame->keys[0];
    if (!opened_) {
      if (!k.changed) return Fail("decode", "watch: the first frame marks the key unchanged");
      opened_ = true;
      ++stats_->watchers_open;
      version_ = k.entry ? k.entry->version : 0;
      ready_->Done();
      return;
    }
    if (!k.changed || !k.entry || k.entry->version == version_) return;  // nothing new
    version_ = k.entry->version;
    auto text = codec::ParseV8String(k.entry->value);
    int64_t sent_ns = 0;
    if (!text.ok() ||
        std::from_chars(text->data(), text->data() + text->size(), sent_ns).ec != std::errc()) {
      return Fail("decode", "watch: the watched value is not a timestamp written by this run");
    }
    if (sent_ns >= plan_->window_start() && sent_ns < plan_->window_end()) {
      ++stats_->frames;
      ++stats_->ops;
      stats_->latency_ns.push_back(static_cast<uint64_t>(std::max<int64_t>(now - sent_ns, 0)));
      stats_->last_done_ns = std::max(stats_->last_done_ns, now);
    }
  }

  void Fail(std::string_view kind, std::string text) {
    failed_ = true;
    stats_->errors.Add(kind, text);
  }

  void OnEnd(Status s) {
    if (!opened_) ready_->Done();
    if (!failed_ && !plan_->is_stopping()) {
      failed_ = true;
      if (status_ != 0 && status_ != 200) {
        const std::string code = std::to_string(status_);
        stats_->errors.Add("http_" + code, "watch: HTTP " + code + ": " + error_body_);
      } else if (!s.ok()) {
        stats_->errors.Add("transport", "watch: " + s.message());
      } else {
        stats_->errors.Add("transport", "watch: the server ended the stream");
      }
    }
    ended_->Done();
  }

  const Plan* plan_;
  std::shared_ptr<Connection> conn_;
  ThreadStats* stats_;
  const std::string* key_;
  Countdown* ready_;
  Countdown* ended_;
  int status_ = 0;
  codec::WatchFrameSplitter frames_;
  std::string error_body_;
  bool opened_ = false;  // the first frame arrived
  bool failed_ = false;  // an error was recorded; later data is ignored
  int64_t version_ = 0;  // of the last entry seen
};

// Sets one watched key after another, every watch_interval_ms, with its submit time (NowNs) as
// the value, from the start of the warm-up to the end of the window.
class WatchWriter {
 public:
  WatchWriter(const Plan* plan, std::shared_ptr<Connection> conn, ThreadStats* stats,
              asio::io_context& io, int max_in_flight, Countdown* done)
      : plan_(plan),
        conn_(std::move(conn)),
        stats_(stats),
        timer_(io),
        max_in_flight_(max_in_flight),
        done_(done) {}

  void Start() {
    next_tick_ = Clock::now();
    Tick();
  }

 private:
  void Tick() {
    if (NowNs() >= plan_->window_end() || plan_->is_stopping() || !conn_->usable()) {
      ticking_ = false;
      MaybeDone();
      return;
    }
    if (in_flight_ < max_in_flight_) Write();
    next_tick_ += std::chrono::milliseconds(plan_->options.watch_interval_ms);
    next_tick_ = std::max(next_tick_, Clock::now());  // skip ticks we are late for
    timer_.expires_at(next_tick_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) {
        ticking_ = false;
        MaybeDone();
        return;
      }
      Tick();
    });
  }

  void Write() {
    const std::string& key = plan_->watch_keys[next_key_++ % plan_->watch_keys.size()];
    const std::string value = codec::EncodeV8String(std::to_string(NowNs()));
    ++in_flight_;
    conn_->Send(plan_->MakeRequest(plan_->write_path, SetBody(key, value)),
                [this](Result<Response> r) {
                  --in_flight_;
                  auto body = TakeBody(r, *plan_, stats_, "atomic_write");
                  if (body) {
                    auto result = DecodeWrite(*body, stats_);
                    if (result && result->status == codec::WriteStatus::kSuccess) {
                      ++stats_->writes;
                    } else if (result) {
                      stats_->errors.Add("write_status", "watch writer: a write failed a check");
                    }
                  }
                  MaybeDone();
                });
  }

  void MaybeDone() {
    if (!ticking_ && in_flight_ == 0 && !reported_) {
      reported_ = true;
      done_->Done();
    }
  }

  const Plan* plan_;
  std::shared_ptr<Connection> conn_;
  ThreadStats* stats_;
  asio::steady_timer timer_;
  int max_in_flight_;
  Countdown* done_;
  Clock::time_point next_tick_;
  size_t next_key_ = 0;
  int in_flight_ = 0;
  bool ticking_ = true;
  bool reported_ = false;
};

// First failure of the preload, shared by its lanes. Thread-safe.
class PreloadState {
 public:
  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) first_ = std::move(s);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  Status first() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  std::mutex mu_;
  Status first_;  // guarded by mu_
  std::atomic<bool> failed_{false};
};

// One lane of the preload: sends the next unsent batch of atomic writes over its connection,
// one at a time, until none is left or any lane failed.
class PreloadLane {
 public:
  PreloadLane(const Plan* plan, std::shared_ptr<Connection> conn,
              const std::vector<std::string>* batches, std::atomic<size_t>* next,
              PreloadState* state, Countdown* done)
      : plan_(plan),
        conn_(std::move(conn)),
        batches_(batches),
        next_(next),
        state_(state),
        done_(done) {}

  void SendNext() {
    const size_t i = next_->fetch_add(1, std::memory_order_relaxed);
    if (i >= batches_->size() || state_->failed()) {
      done_->Done();
      return;
    }
    conn_->Send(plan_->MakeRequest(plan_->write_path, (*batches_)[i]), [this](Result<Response> r) {
      if (!r.ok()) {
        state_->Fail(r.status());
      } else if (r->status != 200) {
        state_->Fail(Internal("HTTP " + std::to_string(r->status) + ": " + r->body));
      } else {
        auto w = codec::DecodeAtomicWriteOutput(r->body);
        if (!w.ok()) {
          state_->Fail(w.status());
        } else if (w->status != codec::WriteStatus::kSuccess) {
          state_->Fail(Internal("a preload write was not applied (status " +
                                std::to_string(static_cast<int>(w->status)) + ")"));
        }
      }
      SendNext();
    });
  }

 private:
  const Plan* plan_;
  std::shared_ptr<Connection> conn_;
  const std::vector<std::string>* batches_;
  std::atomic<size_t>* next_;
  PreloadState* state_;
  Countdown* done_;
};

// Runs conn->Connect() on `io` and waits for it.
Status ConnectBlocking(asio::io_context& io, const std::shared_ptr<Connection>& conn,
                       std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  asio::post(io, [conn, promise] {
    conn->Connect([promise](Status s) { promise->set_value(std::move(s)); });
  });
  // The connection's own connect timeout fires first; this only guards against a stuck pool.
  if (future.wait_for(timeout * 2) != std::future_status::ready) {
    asio::post(io, [conn] { conn->Close(); });
    return Unavailable("connecting timed out");
  }
  return future.get();
}

// Runs conn->Send(request) on `io` and waits up to `timeout` for the answer.
Result<Response> CallBlocking(asio::io_context& io, const std::shared_ptr<Connection>& conn,
                              Request request, std::chrono::milliseconds timeout) {
  auto promise = std::make_shared<std::promise<Result<Response>>>();
  auto future = promise->get_future();
  asio::post(io, [conn, promise, request = std::move(request)]() mutable {
    conn->Send(std::move(request),
               [promise](Result<Response> r) { promise->set_value(std::move(r)); });
  });
  if (future.wait_for(timeout) != std::future_status::ready) {
    asio::post(io, [conn] { conn->Close(); });
    return Unavailable("no answer within " + std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

// Reads the KvU64 counter at plan.counter_key: 0 if absent. Errors: the call's, or
// InvalidArgument if the key holds something else.
Result<uint64_t> ReadCounter(asio::io_context& io, const std::shared_ptr<Connection>& conn,
                             const Plan& plan) {
  KVC_ASSIGN_OR_RETURN(
      Response r,
      CallBlocking(io, conn, plan.MakeRequest(plan.read_path, ReadOneBody(plan.counter_key)),
                   plan.options.timeout));
  if (r.status != 200) {
    return Internal("reading the sum counter: HTTP " + std::to_string(r.status) + ": " + r.body);
  }
  KVC_ASSIGN_OR_RETURN(codec::SnapshotReadResult read, codec::DecodeSnapshotReadOutput(r.body));
  if (read.ranges.size() != 1) return Internal("reading the sum counter: no range in the answer");
  if (read.ranges[0].empty()) return uint64_t{0};
  const Entry& e = read.ranges[0][0];
  if (e.encoding != ValueEncoding::kLe64) {
    return InvalidArgument("the sum counter " + codec::KeyToString(plan.counter_key) +
                           " holds a value that is not a KvU64");
  }
  return DecodeLe64(e.value);
}

std::string BenchKey(std::string_view group, int64_t i) {
  return codec::EncodeKey(
      {codec::KeyPart::String("bench"), codec::KeyPart::String(group), codec::KeyPart::Int(i)});
}

// Atomic writes setting every key of `keys` to `value`, each within the per-write limits.
std::vector<std::string> PreloadBatches(const std::vector<std::string>& keys,
                                        const std::string& value, const BenchOptions& o) {
  std::vector<std::string> batches;
  AtomicWrite w;
  size_t bytes = 0;
  for (const std::string& key : keys) {
    const size_t size = key.size() + value.size();
    if (!w.mutations.empty() &&
        (w.mutations.size() >= o.write_max_mutations || bytes + size > o.write_max_bytes)) {
      batches.push_back(codec::EncodeAtomicWriteRequest(w));
      w.mutations.clear();
      bytes = 0;
    }
    w.mutations.push_back(Mutation{key, MutationType::kSet, KvValue{value, ValueEncoding::kV8}});
    bytes += size;
  }
  if (!w.mutations.empty()) batches.push_back(codec::EncodeAtomicWriteRequest(w));
  return batches;
}

// Deterministic printable filler of `n` characters.
std::string Filler(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(n, ' ');
  for (char& c : s) c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

// SplitMix64: spreads one seed into independent per-actor seeds.
uint64_t MixSeed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One benchmark run: owns the I/O threads, the connections and every actor. The destructor
// stops the threads before any member they use is destroyed.
class BenchRun {
 public:
  BenchRun(const BenchOptions& options, Url metadata_url)
      : options_(options),
        metadata_url_(std::move(metadata_url)),
        http2_(options.http == HttpVersion::kHttp2),
        watch_(options.workload == Workload::kWatch),
        streams_(http2_ ? options.streams : 1),
        data_connections_(watch_ ? 1 : options.connections),
        watch_connections_(!watch_ ? 0
                                   : (http2_ ? std::min(options.connections, options.watchers)
                                             : options.watchers)),
        threads_(ThreadCount(options, data_connections_ + watch_connections_)),
        pool_(threads_),
        stats_(static_cast<size_t>(threads_)) {
    plan_.options = options;
  }

  ~BenchRun() {
    CloseAll();
    pool_.Stop();
  }

  Result<BenchReport> Run(BenchStage* stage) {
    *stage = BenchStage::kOptions;
    if (metadata_url_.tls()) KVC_RETURN_IF_ERROR(NeedTls());
    *stage = BenchStage::kMetadata;
    KVC_RETURN_IF_ERROR(ExchangeMetadata());
    *stage = BenchStage::kConnect;
    KVC_RETURN_IF_ERROR(OpenConnections());
    *stage = BenchStage::kPreload;
    KVC_RETURN_IF_ERROR(Preload());
    if (options_.workload == Workload::kSum) {
      KVC_ASSIGN_OR_RETURN(sum_start_, ReadCounter(io_of(0), connections_[0], plan_));
    }
    *stage = BenchStage::kRun;
    if (watch_) {
      KVC_RETURN_IF_ERROR(RunWatch());
    } else {
      RunRequests();
    }
    if (options_.workload == Workload::kSum) ReadFinalSum();
    CloseAll();
    pool_.Stop();
    return Report();
  }

 private:
  static int ThreadCount(const BenchOptions& o, int connections) {
    const int wanted =
        o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(wanted, 1, connections);
  }

  asio::io_context& io_of(size_t connection) { return pool_.context(connection); }
  ThreadStats* stats_of(size_t connection) { return &stats_[connection % stats_.size()]; }

  // Closes every connection on its own io_context.
  void CloseAll() {
    for (size_t i = 0; i < connections_.size(); ++i) {
      asio::post(io_of(i), [c = connections_[i]] { c->Close(); });
    }
    for (const auto& c : side_connections_) {
      asio::post(io_of(0), [c] { c->Close(); });
    }
  }

  Status NeedTls() {
    if (tls_) return Status::Ok();
    KVC_ASSIGN_OR_RETURN(tls_, MakeTlsContext(options_.http, options_.insecure, options_.ca_file));
    return Status::Ok();
  }

  ConnectionOptions ConnectionOptionsFor(const Url& origin) const {
    ConnectionOptions c;
    c.version = options_.http;
    c.origin = origin;
    c.connect_timeout = options_.timeout;
    c.max_response_bytes = options_.max_response_bytes;
    return c;
  }

  // POSTs the metadata request, checks the answer, and fills the plan's data-path parts.
  Status ExchangeMetadata() {
    const std::string where = "metadata exchange with " + metadata_url_.ToString();
    auto failed = [&](const Status& s) {
      return Status(s.code(), where + " failed: " + s.message());
    };
    Result<std::vector<std::string>> addresses =
        ResolveHost(metadata_url_.host, metadata_url_.port);
    if (!addresses.ok()) return failed(addresses.status());
    metadata_addresses_ = *addresses;
    auto conn = MakeConnection(io_of(0), ConnectionOptionsFor(metadata_url_), metadata_addresses_,
                               tls_.get());
    side_connections_.push_back(conn);
    if (Status s = ConnectBlocking(io_of(0), conn, options_.timeout); !s.ok()) return failed(s);
    Request request{metadata_url_.path,
                    nullptr,
                    {{"authorization", "Bearer " + options_.token},
                     {"content-type", "application/json"},
                     {"user-agent", kUserAgent}},
                    kMetadataBody};
    Result<Response> answer = CallBlocking(io_of(0), conn, std::move(request), options_.timeout);
    asio::post(io_of(0), [conn] { conn->Close(); });
    if (!answer.ok()) return failed(answer.status());
    if (answer->status != 200) {
      return Status(
          StatusCode::kUnauthenticated,
          where + " failed: HTTP " + std::to_string(answer->status) + ": " + answer->body);
    }
    Result<codec::MetadataResponse> metadata = codec::ParseMetadataResponse(answer->body);
    if (!metadata.ok()) return failed(metadata.status());
    const codec::Endpoint* strong = nullptr;
    for (const codec::Endpoint& e : metadata->endpoints) {
      if (e.consistency == "strong") {
        strong = &e;
        break;
      }
    }
    if (strong == nullptr) return failed(InvalidArgument("the answer names no strong endpoint"));
    Result<Url> endpoint = ResolveUrl(metadata_url_, strong->url);
    if (!endpoint.ok()) return failed(endpoint.status());
    endpoint_ = *endpoint;
    protocol_version_ = metadata->version;

    auto headers = std::make_shared<Headers>();
    headers->emplace_back("authorization", "Bearer " + metadata->token);
    if (metadata->version == 1) {
      headers->emplace_back("x-transaction-domain-id", metadata->database_id);
    } else {
      headers->emplace_back("x-denokv-database-id", metadata->database_id);
      headers->emplace_back("x-denokv-version", std::to_string(metadata->version));
    }
    headers->emplace_back("content-type", "application/x-protobuf");
    headers->emplace_back("user-agent", kUserAgent);
    plan_.headers = std::move(headers);
    // Data-call URL = endpoint URL + "/" + method (reference §1.5).
    plan_.read_path = endpoint_.path + "/snapshot_read";
    plan_.write_path = endpoint_.path + "/atomic_write";
    plan_.watch_path = endpoint_.path + "/watch";
    FillKeys();
    return Status::Ok();
  }

  void FillKeys() {
    plan_.value =
        codec::EncodeV8String(Filler(static_cast<size_t>(options_.value_size), options_.seed));
    switch (options_.workload) {
      case Workload::kGet:
      case Workload::kSet:
      case Workload::kList:
      case Workload::kMixed:
        plan_.keys.reserve(static_cast<size_t>(options_.keys));
        for (int64_t i = 0; i < options_.keys; ++i) plan_.keys.push_back(BenchKey("kv", i));
        plan_.keys_end =
            codec::EncodeKey({codec::KeyPart::String("bench"), codec::KeyPart::String("kv")}) +
            '\xff';
        break;
      case Workload::kCas:
        for (int i = 0; i < options_.hot_keys; ++i) plan_.hot_keys.push_back(BenchKey("hot", i));
        break;
      case Workload::kSum:
        plan_.counter_key =
            codec::EncodeKey({codec::KeyPart::String("bench"), codec::KeyPart::String("counter")});
        break;
      case Workload::kWatch:
        for (int i = 0; i < options_.watch_keys; ++i) {
          plan_.watch_keys.push_back(BenchKey("watch", i));
        }
        break;
    }
  }

  // Opens the data connections (for watch: the writer's, then the watchers'), all at once.
  Status OpenConnections() {
    if (endpoint_.tls()) KVC_RETURN_IF_ERROR(NeedTls());
    if (endpoint_.SameOrigin(metadata_url_)) {
      addresses_ = metadata_addresses_;
    } else {
      KVC_ASSIGN_OR_RETURN(addresses_, ResolveHost(endpoint_.host, endpoint_.port));
    }
    const int total = data_connections_ + watch_connections_;
    const ConnectionOptions copts = ConnectionOptionsFor(endpoint_);
    for (int i = 0; i < total; ++i) {
      connections_.push_back(
          MakeConnection(io_of(static_cast<size_t>(i)), copts, addresses_, tls_.get()));
    }
    // The watch writer's connection opens once the watchers are ready: an HTTP/1.1 server may
    // close a connection that stays silent that long.
    const size_t first = watch_ ? 1 : 0;
    connected_ = std::make_unique<Countdown>(total - static_cast<int>(first));
    for (size_t i = first; i < connections_.size(); ++i) {
      asio::post(io_of(i), [this, c = connections_[i]] {
        c->Connect([this](Status s) {
          if (!s.ok()) connect_failure_.Fail(std::move(s));
          connected_->Done();
        });
      });
    }
    // Each connection gives up after options_.timeout itself; this only guards the pool.
    if (!connected_->WaitUntil(Clock::now() + options_.timeout * 2)) {
      return Unavailable("connecting to " + endpoint_.Origin() + " timed out");
    }
    if (connect_failure_.failed()) {
      const Status s = connect_failure_.first();
      return Status(s.code(), "cannot open " + std::to_string(total) + " connection(s) to " +
                                  endpoint_.Origin() + ": " + s.message());
    }
    return Status::Ok();
  }

  // Writes the keys the workload reads before the window, in batches within the write limits.
  Status Preload() {
    const Workload w = options_.workload;
    const bool wanted =
        w == Workload::kGet || w == Workload::kList || w == Workload::kMixed || w == Workload::kCas;
    if (!options_.preload || !wanted) return Status::Ok();
    batches_ =
        PreloadBatches(w == Workload::kCas ? plan_.hot_keys : plan_.keys, plan_.value, options_);
    const size_t per_connection = http2_ ? static_cast<size_t>(std::min(streams_, 8)) : 1;
    const size_t lanes = connections_.size() * per_connection;
    preload_done_ = std::make_unique<Countdown>(static_cast<int64_t>(lanes));
    for (size_t i = 0; i < lanes; ++i) {
      const size_t conn = i / per_connection;
      lanes_.push_back(std::make_unique<PreloadLane>(&plan_, connections_[conn], &batches_,
                                                     &next_batch_, &preload_state_,
                                                     preload_done_.get()));
      asio::post(io_of(conn), [lane = lanes_.back().get()] { lane->SendNext(); });
    }
    // options_.timeout per 100 batches: generous for a slow disk, yet bounded.
    const auto deadline =
        Clock::now() + options_.timeout * static_cast<int64_t>(1 + batches_.size() / 100);
    if (!preload_done_->WaitUntil(deadline)) {
      return Unavailable("preloading " + std::to_string(batches_.size()) +
                         " atomic writes timed out");
    }
    if (preload_state_.failed()) {
      const Status s = preload_state_.first();
      return Status(s.code(), "preload failed: " + s.message());
    }
    plan_.expect_present = w != Workload::kCas;
    return Status::Ok();
  }

  // Sets the window: the warm-up starts now.
  void SetWindow() {
    const int64_t start = NowNs() + SecondsToNs(options_.warmup_s);
    plan_.window_end_ns.store(start + SecondsToNs(options_.duration_s));
    plan_.window_start_ns.store(start);
  }

  void RunRequests() {
    const size_t per_connection = static_cast<size_t>(streams_);
    const size_t n = connections_.size() * per_connection;
    finished_ = std::make_unique<Countdown>(static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const size_t conn = i / per_connection;
      workers_.push_back(std::make_unique<Worker>(&plan_, connections_[conn], stats_of(conn),
                                                  MixSeed(options_.seed, i), finished_.get()));
    }
    SetWindow();
    for (size_t i = 0; i < n; ++i) {
      asio::post(io_of(i / per_connection), [w = workers_[i].get()] { w->Start(); });
    }
    if (!finished_->WaitUntil(FromNs(plan_.window_end()) + options_.timeout)) {
      // Operations still pending this long after the window are cut off as "timeout" errors.
      plan_.stopping.store(true);
      CloseAll();
      finished_->WaitUntil(Clock::now() + options_.timeout);
    }
  }

  Status RunWatch() {
    const int n = options_.watchers;
    watch_ready_ = std::make_unique<Countdown>(n);
    watch_ended_ = std::make_unique<Countdown>(n);
    for (int j = 0; j < n; ++j) {
      const size_t conn = 1 + static_cast<size_t>(j % watch_connections_);
      const std::string* key = &plan_.watch_keys[static_cast<size_t>(j) % plan_.watch_keys.size()];
      watchers_.push_back(std::make_unique<Watcher>(&plan_, connections_[conn], stats_of(conn), key,
                                                    watch_ready_.get(), watch_ended_.get()));
      asio::post(io_of(conn), [w = watchers_.back().get()] { w->Start(); });
    }
    watch_ready_->WaitUntil(Clock::now() + options_.timeout);
    if (Status s = ConnectBlocking(io_of(0), connections_[0], options_.timeout); !s.ok()) {
      return Status(s.code(), "cannot open the watch writer's connection to " + endpoint_.Origin() +
                                  ": " + s.message());
    }
    writer_done_ = std::make_unique<Countdown>(1);
    writer_ = std::make_unique<WatchWriter>(&plan_, connections_[0], stats_of(0), io_of(0),
                                            streams_, writer_done_.get());
    SetWindow();
    asio::post(io_of(0), [w = writer_.get()] { w->Start(); });
    std::this_thread::sleep_until(FromNs(plan_.window_end()));
    writer_done_->WaitUntil(FromNs(plan_.window_end()) + options_.timeout);
    std::this_thread::sleep_for(options_.watch_drain);
    plan_.stopping.store(true);
    CloseAll();
    watch_ended_->WaitUntil(Clock::now() + options_.timeout);
    return Status::Ok();
  }

  // Reads the counter on a fresh connection (the others may have been cut off). Report()
  // compares it with the acknowledged sums once the threads have stopped.
  void ReadFinalSum() {
    auto conn = MakeConnection(io_of(0), ConnectionOptionsFor(endpoint_), addresses_, tls_.get());
    side_connections_.push_back(conn);
    Status s = ConnectBlocking(io_of(0), conn, options_.timeout);
    sum_final_ = s.ok() ? ReadCounter(io_of(0), conn, plan_) : Result<uint64_t>(s);
  }

  // REQUIRES: the pool has stopped.
  SumCheck CheckSum(ErrorCounts* errors) const {
    SumCheck check;
    check.start = sum_start_;
    for (const ThreadStats& t : stats_) {
      check.successes += t.sums_ok;
      check.unknown += t.sums_unknown;
    }
    if (!sum_final_.ok()) {
      errors->Add("sum_check",
                  "reading the counter after the run: " + sum_final_.status().message());
      return check;
    }
    check.final_read = true;
    check.final_value = *sum_final_;
    const uint64_t low = check.start + check.successes;
    check.ok = check.final_value >= low && check.final_value - low <= check.unknown;
    return check;
  }

  // REQUIRES: the pool has stopped.
  BenchReport Report() {
    BenchReport r;
    r.workload = std::string(WorkloadName(options_.workload));
    r.protocol = http2_ ? "h2" : "http/1.1";
    r.url = metadata_url_.ToString();
    r.endpoint = endpoint_.ToString();
    r.protocol_version = protocol_version_;
    r.connections = watch_ ? watch_connections_ : data_connections_;
    r.streams = !watch_  ? streams_
                : http2_ ? (options_.watchers + watch_connections_ - 1) / watch_connections_
                         : 1;
    r.threads = threads_;
    r.duration_s = options_.duration_s;
    r.warmup_s = options_.warmup_s;

    std::vector<uint64_t> latencies;
    int64_t last_done = 0;
    WatchSummary w;
    for (ThreadStats& t : stats_) {
      latencies.insert(latencies.end(), t.latency_ns.begin(), t.latency_ns.end());
      r.ops += t.ops;
      r.conflicts += t.conflicts;
      r.misses += t.misses;
      r.errors.Merge(t.errors);
      last_done = std::max(last_done, t.last_done_ns);
      w.watchers_open += t.watchers_open;
      w.frames += t.frames;
      w.writes += t.writes;
    }
    for (const auto& watcher : watchers_) {
      if (!watcher->opened() && !watcher->failed()) {
        r.errors.Add("watch_not_open", "watch: no first frame within the timeout");
      }
    }
    if (options_.workload == Workload::kSum) r.sum = CheckSum(&r.errors);
    r.latency = Summarize(&latencies);
    // The window runs from its start until the last operation started in it has ended.
    r.seconds = options_.duration_s;
    const int64_t window_start = plan_.window_start();
    if (!watch_ && r.ops > 0 && last_done > window_start) {
      r.seconds = std::max(r.seconds, static_cast<double>(last_done - window_start) / 1e9);
    }
    r.ops_per_s = static_cast<double>(r.ops) / r.seconds;
    if (watch_) {
      w.watchers = options_.watchers;
      w.latency = r.latency;
      r.watch = w;
    }
    return r;
  }

  const BenchOptions options_;
  const Url metadata_url_;
  const bool http2_;
  const bool watch_;
  const int streams_;
  const int data_connections_;
  const int watch_connections_;
  const int threads_;
  Url endpoint_;
  int protocol_version_ = 0;
  std::vector<std::string> metadata_addresses_;
  std::vector<std::string> addresses_;  // of the endpoint's host
  std::shared_ptr<asio::ssl::context> tls_;
  // Everything below is used by the I/O threads; the destructor stops them first.
  IoPool pool_;
  std::vector<ThreadStats> stats_;  // one per thread
  Plan plan_;
  // Connection i runs on io_of(i) (for watch: 0 is the writer's, then the watchers').
  std::vector<std::shared_ptr<Connection>> connections_;
  // The metadata exchange's and the final sum read's, on io_of(0).
  std::vector<std::shared_ptr<Connection>> side_connections_;
  std::unique_ptr<Countdown> connected_;
  PreloadState connect_failure_;
  std::vector<std::string> batches_;
  std::atomic<size_t> next_batch_{0};
  PreloadState preload_state_;
  std::unique_ptr<Countdown> preload_done_;
  std::vector<std::unique_ptr<PreloadLane>> lanes_;
  std::unique_ptr<Countdown> finished_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Countdown> watch_ready_;
  std::unique_ptr<Countdown> watch_ended_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::unique_ptr<Countdown> writer_done_;
  std::unique_ptr<WatchWriter> writer_;
  uint64_t sum_start_ = 0;
  Result<uint64_t> sum_final_ = Internal("the counter was not read");
};

}  // namespace

Result<BenchReport> RunBenchmark(const BenchOptions& options, BenchStage* failed_stage) {
  BenchStage ignored;
  BenchStage* stage = failed_stage != nullptr ? failed_stage : &ignored;
  *stage = BenchStage::kOptions;
  KVC_RETURN_IF_ERROR(ValidateOptions(options));
  KVC_ASSIGN_OR_RETURN(Url metadata_url, ParseUrl(options.url));
  if (!options.database.empty()) metadata_url.path = "/databases/" + options.database + "/connect";
  BenchRun run(options, std::move(metadata_url));
  return run.Run(stage);
}

}  // namespace kvc::loadgen
