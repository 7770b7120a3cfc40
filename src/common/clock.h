// Wall-clock helpers. Thread-safety: thread-safe.
#pragma once

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

// RFC 3339 UTC with millisecond fraction and a trailing Z, e.g. 2026-11-22T10:00:00.123Z.
std::string FormatRfc3339Utc(int64_t unix_ms);

}  // namespace kvc
