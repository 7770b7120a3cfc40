// The per-token rate limiter (service/rate_limiter.h): token buckets and the wait it reports.
#include "service/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kvc {
namespace {

TEST(RateLimiter, BucketRefillsAtTheRate) {
  service::RateLimiter rl;
  const auto t0 = service::RateLimiter::Clock::now();
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += rl.Allow("a", 10, 5, t0);
  EXPECT_EQ(allowed, 5);                  // the burst
  EXPECT_TRUE(rl.Allow("b", 10, 5, t0));  // buckets are per key
  // 0.5 s later: 5 more.
  allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += rl.Allow("a", 10, 5, t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(allowed, 5);
  EXPECT_TRUE(rl.Allow("a", 0, 0, t0));  // rate 0: unlimited
}

TEST(RateLimiter, RefusalsSayWhenToRetry) {
  service::RateLimiter rl;
  const auto t0 = service::RateLimiter::Clock::now();
  service::RateLimiter::Clock::duration wait{};
  EXPECT_TRUE(rl.Allow("a", 4, 1, t0, &wait));
  EXPECT_FALSE(rl.Allow("a", 4, 1, t0, &wait));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(), 250);
  // 100 ms later, 0.4 of a request has refilled: 150 ms to go.
  EXPECT_FALSE(rl.Allow("a", 4, 1, t0 + std::chrono::milliseconds(100), &wait));
  using DoubleMs = std::chrono::duration<double, std::milli>;
  EXPECT_NEAR(std::chrono::duration_cast<DoubleMs>(wait).count(), 150, 0.01);
  EXPECT_TRUE(rl.Allow("a", 4, 1, t0 + std::chrono::milliseconds(300), &wait));
}

}  // namespace
}  // namespace kvc
