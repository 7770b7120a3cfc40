// WorkerThread: a component's background thread and the request that ends it, for a loop that
// sleeps on the component's own CondVar between rounds.
//
//   void Loop() {
//     MutexLock lock(mu_);
//     while (!worker_.stop_requested()) {
//       ...                                 // work; drop the lock for anything slow
//       cv_.WaitFor(mu_, interval);
//     }
//   }
//   void Stop() {
//     if (!worker_.Stop(mu_, cv_)) return;  // a Stop came first
//     ...                                   // the thread has ended
//   }
//
// Stop sets the request, then takes and releases `mu` before it notifies `cv`. A loop that read
// the request as unset while holding `mu` is therefore inside its wait by the time of the
// notification, which cannot fall between the loop's check and its wait.
//
// Ownership: owns the std::thread. Destroying it requires the thread joined (Stop) or never
// started.
// Thread-safety: stop_requested() from any thread, the loop's included. Start once, then Stop
// from any thread but the worker's; only the first Stop does anything.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <utility>

#include "common/mutex.h"
#include "common/thread_name.h"

namespace kvc {

class WorkerThread {
 public:
  WorkerThread() = default;
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Runs `loop` on a new thread named `name` (common/thread_name.h lists the names).
  template <typename Loop>
  void Start(std::string name, Loop&& loop) {
    thread_ = std::thread([name = std::move(name), loop = std::forward<Loop>(loop)]() mutable {
      NameThisThread(name);
      loop();
    });
  }

  bool stop_requested() const { return stop_.load(std::memory_order_acquire); }

  // Requests the stop, wakes the loop waiting on `cv` under `mu` and joins the thread. Returns
  // false, doing nothing, if a Stop came before.
  bool Stop(Mutex& mu, CondVar& cv) KVC_EXCLUDES(mu) {
    if (stop_.exchange(true, std::memory_order_acq_rel)) return false;
    { MutexLock lock(mu); }
    cv.NotifyAll();
    if (thread_.joinable()) thread_.join();
    return true;
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kvc
