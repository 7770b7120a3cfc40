// What the actors of one benchmark run share (see bench.cc for how a run is driven): the Plan
// of the run, the per-thread ThreadStats, the clock, Countdown, the request bodies and the
// checks of the answers, and the keys and values the workloads use.
//
// Threading model of a run: every actor (workloads.h, setup.h) runs on the io_context of its
// connection; one thread runs each io_context, so an actor and its connection need no locks.
// Each thread has its own ThreadStats. The driver (the calling thread) only posts work, waits
// on Countdowns, and reads the stats after the threads have stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/connection.h"
#include "codec/client_codec.h"
#include "common/mutex.h"
#include "common/status.h"
#include "loadgen/bench.h"
#include "loadgen/stats.h"
#include "storage/kv_types.h"

namespace kvc::loadgen {

using Clock = std::chrono::steady_clock;

// Keys a list operation reads.
inline constexpr int64_t kListSize = 100;

// Clock::now() in nanoseconds since the clock's epoch.
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// The inverse of NowNs().
inline Clock::time_point FromNs(int64_t ns) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

inline int64_t SecondsToNs(double s) { return static_cast<int64_t>(s * 1e9); }

// Counts down from n; waiters wake when it reaches zero. Thread-safe.
class Countdown {
 public:
  explicit Countdown(int64_t n) : n_(n) {}

  void Done() {
    MutexLock lock(mu_);
    if (--n_ <= 0) cv_.NotifyAll();
  }

  // Returns true if the count reached zero by `deadline`.
  bool WaitUntil(Clock::time_point deadline) {
    MutexLock lock(mu_);
    while (n_ > 0) {
      if (!cv_.WaitUntil(mu_, deadline)) return n_ <= 0;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int64_t n_ KVC_GUARDED_BY(mu_);
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
  std::shared_ptr<const client::Headers> headers;  // data-path headers
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

  client::Request MakeRequest(const std::string& path, std::string body) const {
    return client::Request{.path = path, .headers = headers, .body = std::move(body)};
  }
};

// Request bodies: a snapshot_read of one key, an atomic_write setting one key.
std::string ReadOneBody(const std::string& key);
std::string SetBody(const std::string& key, const std::string& v8_value);

// Returns the body of a 200 answer, or records in `stats` why there is none.
std::optional<std::string> TakeBody(Result<client::Response>& r, const Plan& plan,
                                    ThreadStats* stats, std::string_view call);

// Decodes a snapshot_read answer that must have `ranges` ranges and status SR_SUCCESS, or
// records in `stats` why it does not.
std::optional<std::vector<std::vector<Entry>>> DecodeRead(const std::string& body, size_t ranges,
                                                          ThreadStats* stats);

// Decodes an atomic_write answer whose status must be AW_SUCCESS or AW_CHECK_FAILURE, or
// records in `stats` why it does not.
std::optional<codec::AtomicWriteResult> DecodeWrite(const std::string& body, ThreadStats* stats);

// The key ["bench", group, i].
std::string BenchKey(std::string_view group, int64_t i);

// Deterministic printable filler of `n` characters.
std::string Filler(size_t n, uint64_t seed);

// SplitMix64: spreads one seed into independent per-actor seeds.
uint64_t MixSeed(uint64_t seed, uint64_t i);

}  // namespace kvc::loadgen
