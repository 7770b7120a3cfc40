// RateLimiter: a token bucket per key (an access-token id). A bucket holds up to `burst`
// requests and refills at `rate` per second; a request that finds it empty is refused.
//
// Thread-safety: thread-safe; buckets are spread over shards with a mutex each.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <unordered_map>

#include "common/mutex.h"

namespace kvc::service {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // True if a request under `key` may proceed now. rate <= 0 means unlimited. When it may not
  // and `retry_after` is set, stores there how long until the bucket holds one request again.
  bool Allow(const std::string& key, double rate, double burst, Clock::time_point now,
             Clock::duration* retry_after = nullptr) {
    if (rate <= 0) return true;
    if (burst < 1) burst = 1;
    Shard& shard = shards_[std::hash<std::string>{}(key) % shards_.size()];
    MutexLock lock(shard.mu);
    auto [it, inserted] = shard.buckets.try_emplace(key, Bucket{burst, now});
    Bucket& b = it->second;
    if (!inserted) {
      const double elapsed = std::chrono::duration<double>(now - b.last).count();
      if (elapsed > 0) {
        b.tokens = std::min(burst, b.tokens + elapsed * rate);
        b.last = now;
      }
    }
    if (b.tokens < 1) {
      if (retry_after) {
        *retry_after = std::chrono::ceil<Clock::duration>(
            std::chrono::duration<double>((1 - b.tokens) / rate));
      }
      return false;
    }
    b.tokens -= 1;
    return true;
  }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  struct Shard {
    Mutex mu;
    std::unordered_map<std::string, Bucket> buckets KVC_GUARDED_BY(mu);
  };
  std::array<Shard, 16> shards_;
};

}  // namespace kvc::service
