#include "common/clock.h"

#include <cstdio>
#include <ctime>

namespace kvc {

namespace {
class SystemClockImpl : public Clock {
 public:
  int64_t NowMs() const override { return NowUnixMs(); }
};
}  // namespace

const Clock* SystemClock() {
  static const SystemClockImpl* const kClock = new SystemClockImpl();
  return kClock;
}

std::string FormatRfc3339Utc(int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  int ms = static_cast<int>(unix_ms % 1000);
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

}  // namespace kvc
