#include "service/work_pool.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

#include "common/thread_name.h"

namespace kvc::service {

WorkPool::WorkPool(WorkPoolOptions options, const char* name)
    : options_(std::move(options)), name_(name) {
  const size_t n = options_.threads == 0 ? 1 : options_.threads;
  for (size_t i = 0; i < n; ++i) {
    threads_.emplace_back([this] {
      NameThisThread("kvc-pool");
      Loop();
    });
  }
}

WorkPool::~WorkPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (std::thread& t : threads_) t.join();
}

Status WorkPool::Post(std::function<void()> work, bool bounded) {
  {
    MutexLock lock(mu_);
    if (stopping_) return Unavailable("The server is shutting down.");
    if (bounded && queue_.size() >= options_.max_queued) return Unavailable(options_.full_text);
    queue_.push_back(std::move(work));
  }
  cv_.NotifyOne();
  return Status::Ok();
}

void WorkPool::Loop() {
  MutexLock lock(mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    try {
      work();
    } catch (const std::exception& e) {
      spdlog::error("{}: {}", name_, e.what());
    }
    work = nullptr;  // release what it captured before waiting again
    lock.Lock();
  }
}

}  // namespace kvc::service
