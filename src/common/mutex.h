// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang
// thread-safety annotations (common/thread_annotations.h), so that with -Wthread-safety the
// compiler checks that every KVC_GUARDED_BY member is used under its mutex.
//
//   class Counter {
//    public:
//     void Add() KVC_EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       ++n_;
//     }
//    private:
//     Mutex mu_;
//     int n_ KVC_GUARDED_BY(mu_) = 0;
//   };
//
// Waiting: write the condition as a loop around CondVar::Wait (or WaitUntil), with the mutex
// held, so the analysis sees the guarded reads in the enclosing function:
//   MutexLock lock(mu_);
//   while (queue_.empty() && !stop_) cv_.Wait(mu_);
//
// Ownership: none of these own anything beyond the std:: object they wrap; a MutexLock must not
// outlive its Mutex, and a Mutex must not be destroyed while held or waited on.
// Thread-safety: Mutex and CondVar are thread-safe; a MutexLock is used by one thread only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace kvc {

// A non-recursive exclusive lock. Prefer MutexLock to calling Lock/Unlock directly.
class KVC_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() KVC_ACQUIRE() { mu_.lock(); }
  void Unlock() KVC_RELEASE() { mu_.unlock(); }
  // Returns true, and holds the lock, if it was free.
  bool TryLock() KVC_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction. Unlock() and Lock() let a loop drop it for
// a stretch of work; the destructor releases it only if it is held then.
class KVC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) KVC_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() KVC_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // REQUIRES: held (every Unlock is followed by a Lock before the next Unlock).
  void Unlock() KVC_RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  // REQUIRES: not held.
  void Lock() KVC_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable used with a kvc::Mutex. Every wait may also return spuriously, so
// callers re-check their condition in a loop. The mutex is held again when a wait returns.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, waits for a notification and takes `mu` again.
  void Wait(Mutex& mu) KVC_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  // As Wait, but also returns once `timeout` has passed. Returns false on timeout.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) KVC_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout) == std::cv_status::no_timeout;
  }
  // As Wait, but also returns once `deadline` has passed. Returns false on timeout.
  template <typename ClockT, typename Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<ClockT, Duration>& deadline)
      KVC_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline) == std::cv_status::no_timeout;
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  // The std::unique_lock that std::condition_variable needs, over a mutex the caller already
  // holds; it leaves the mutex locked when it goes away, since the caller's lock owns it.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace kvc
