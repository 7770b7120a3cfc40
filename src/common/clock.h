// Wall-clock helpers and the injectable Clock the engine reads time from (so expiry tests move
// time forward instead of sleeping). Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace kvc {

// Milliseconds since the Unix epoch.
inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A source of Unix milliseconds. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// The system clock (NowUnixMs); a process-wide instance that is never destroyed.
const Clock* SystemClock();

// A clock that moves only when told to (tests).
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ms) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void Set(int64_t ms) { now_ms_.store(ms); }
  void Advance(int64_t ms) { now_ms_.fetch_add(ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

// RFC 3339 UTC with millisecond fraction and a trailing Z, e.g. 2026-11-22T10:00:00.123Z.
std::string FormatRfc3339Utc(int64_t unix_ms);

}  // namespace kvc
