// Unit tests of common/mutex.h: MutexLock's relocking, TryLock, and CondVar waits that time out
// or are woken, leaving the mutex held either way.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace kvc {
namespace {

using std::chrono::milliseconds;

// True if `mu` is free: takes it and lets it go again.
bool Free(Mutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}

// True if another thread finds `mu` free.
bool FreeElsewhere(Mutex& mu) {
  bool free = false;
  std::thread other([&] { free = Free(mu); });
  other.join();
  return free;
}

class Flag {
 public:
  void Set() {
    MutexLock lock(mu_);
    set_ = true;
    cv_.NotifyAll();
  }
  // Waits up to `timeout`; returns whether the flag was set.
  bool WaitFor(milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(mu_);
    while (!set_) {
      if (!cv_.WaitUntil(mu_, deadline)) return set_;
    }
    return true;
  }
  // True if the mutex is free (a wait leaves it held, and MutexLock then releases it).
  bool Free() { return kvc::Free(mu_); }

 private:
  Mutex mu_;
  CondVar cv_;
  bool set_ KVC_GUARDED_BY(mu_) = false;
};

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  {
    MutexLock lock(mu);
    EXPECT_FALSE(FreeElsewhere(mu));
  }
  EXPECT_TRUE(Free(mu));
}

TEST(MutexTest, MutexLockCanDropAndRetakeTheLock) {
  Mutex mu;
  MutexLock lock(mu);
  lock.Unlock();
  EXPECT_TRUE(FreeElsewhere(mu));
  lock.Lock();
  EXPECT_FALSE(FreeElsewhere(mu));
}

TEST(MutexTest, MutexLockAfterUnlockDoesNotUnlockAgain) {
  Mutex mu;
  {
    MutexLock lock(mu);
    lock.Unlock();
  }
  EXPECT_TRUE(Free(mu));
}

TEST(CondVarTest, WaitTimesOutAndKeepsTheMutex) {
  Flag flag;
  EXPECT_FALSE(flag.WaitFor(milliseconds(20)));
  EXPECT_TRUE(flag.Free());
}

TEST(CondVarTest, NotifyWakesAWaiter) {
  Flag flag;
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(10));
    flag.Set();
  });
  EXPECT_TRUE(flag.WaitFor(milliseconds(10000)));
  setter.join();
  EXPECT_TRUE(flag.Free());
}

TEST(CondVarTest, WaitForReportsTimeout) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  bool timed_out = false;  // a spurious wakeup returns true: try again
  for (int i = 0; i < 100 && !timed_out; ++i) timed_out = !cv.WaitFor(mu, milliseconds(5));
  EXPECT_TRUE(timed_out);
}

}  // namespace
}  // namespace kvc
