// Thread names (common/thread_name.h): NameThisThread names the calling thread as the kernel
// shows it (ps -L, top -H, /proc/<pid>/task/<tid>/comm, which the benchmarks read), cut at 15
// bytes; WorkerThread and WorkPool name the threads they start.
#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/worker_thread.h"
#include "service/work_pool.h"

namespace kvc {
namespace {

// The name /proc gives the calling thread (what ps, top and the benchmarks read).
std::string ProcCommOfThisThread() {
  std::ifstream in("/proc/thread-self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadName, NamesTheCallingThreadAsProcShowsIt) {
  std::string seen;
  std::string proc;
  std::thread t([&] {
    NameThisThread("kvc-test-one");
    seen = ThisThreadName();
    proc = ProcCommOfThisThread();
  });
  t.join();
  EXPECT_EQ(seen, "kvc-test-one");
  EXPECT_EQ(proc, "kvc-test-one");
}

TEST(ThreadName, ALongNameIsCutAtFifteenBytes) {
  std::string seen;
  std::thread t([&] {
    NameThisThread("kvc-a-name-longer-than-fifteen-bytes");
    seen = ThisThreadName();
  });
  t.join();
  EXPECT_EQ(seen, "kvc-a-name-long");
}

TEST(ThreadName, NamingOneThreadLeavesTheOthers) {
  const std::string before = ThisThreadName();
  std::thread t([] { NameThisThread("kvc-other"); });
  t.join();
  EXPECT_EQ(ThisThreadName(), before);
}

TEST(ThreadName, AWorkerThreadRunsItsLoopUnderItsName) {
  Mutex mu;
  CondVar cv;
  WorkerThread worker;
  std::string seen;
  bool ran = false;
  worker.Start("kvc-test-loop", [&] {
    MutexLock lock(mu);
    seen = ThisThreadName();
    ran = true;
    while (!worker.stop_requested()) cv.Wait(mu);
  });
  worker.Stop(mu, cv);
  EXPECT_TRUE(ran);
  EXPECT_EQ(seen, "kvc-test-loop");
}

TEST(ThreadName, WorkPoolThreadsAreNamed) {
  Mutex mu;
  std::string seen;
  {
    service::WorkPool pool(service::WorkPoolOptions{1, 10});
    ASSERT_TRUE(pool.Post([&] {
                      MutexLock lock(mu);
                      seen = ThisThreadName();
                    })
                    .ok());
  }  // the destructor runs what is queued
  MutexLock lock(mu);
  EXPECT_EQ(seen, "kvc-pool");
}

}  // namespace
}  // namespace kvc
