// WorkPool (service/work_pool.h): runs posted work on its threads, refuses work beyond its queue
// bound with Unavailable (503), and runs what is queued before its destructor returns.
#include "service/work_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/mutex.h"
#include "testutil/wait.h"

namespace kvc::service {
namespace {

TEST(WorkPool, RunsWorkOffTheCallersThread) {
  std::atomic<int> runs{0};
  std::atomic<bool> other_thread{false};
  const std::thread::id caller = std::this_thread::get_id();
  {
    WorkPool pool(WorkPoolOptions{2, 100});
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(pool.Post([&] {
                        if (std::this_thread::get_id() != caller) other_thread = true;
                        ++runs;
                      })
                      .ok());
    }
  }  // the destructor runs what is queued
  EXPECT_EQ(runs.load(), 50);
  EXPECT_TRUE(other_thread.load());
}

TEST(WorkPool, AFullQueueIsRefusedWithUnavailable) {
  Mutex mu;
  CondVar cv;
  bool release = false;
  bool started = false;
  std::atomic<int> runs{0};
  WorkPool pool(WorkPoolOptions{1, 2});
  ASSERT_TRUE(pool.Post([&] {
                    MutexLock lock(mu);
                    started = true;
                    cv.NotifyAll();
                    while (!release) cv.Wait(mu);
                  })
                  .ok());
  {
    MutexLock lock(mu);
    while (!started) cv.Wait(mu);  // the one thread is busy; the queue is empty
  }
  EXPECT_TRUE(pool.Post([&] { ++runs; }).ok());
  EXPECT_TRUE(pool.Post([&] { ++runs; }).ok());
  const Status full = pool.Post([&] { ++runs; });
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_EQ(full.message(), WorkPoolOptions{}.full_text);
  // A later step of admitted work is queued past the bound.
  EXPECT_TRUE(pool.Post([&] { runs += 10; }, /*bounded=*/false).ok());
  {
    MutexLock lock(mu);
    release = true;
    cv.NotifyAll();
  }
  EXPECT_TRUE(testutil::WaitFor([&] { return runs.load() >= 12; })) << "the three queued tasks";
  EXPECT_EQ(runs.load(), 12);
}

TEST(WorkPool, AThrowIsContained) {
  std::atomic<int> runs{0};
  {
    WorkPool pool(WorkPoolOptions{1, 10});
    ASSERT_TRUE(pool.Post([] { throw std::runtime_error("bug"); }).ok());
    ASSERT_TRUE(pool.Post([&] { ++runs; }).ok());
  }
  EXPECT_EQ(runs.load(), 1);
}

}  // namespace
}  // namespace kvc::service
