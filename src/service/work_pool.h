// WorkPool: a few threads that run CPU work the I/O threads must not (parsing and validating
// request bodies), with a bounded queue so an overload answers 503 instead of piling up.
// Handlers post a closure that does the work and answers through its Responder (which may be
// called from any thread).
//
// Ownership: owns its threads; the destructor runs what is queued, then joins them.
// Thread-safety: Post() from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace kvc::service {

struct WorkPoolOptions {
  size_t threads = 2;
  // Work waiting for a thread beyond this is refused (Post answers Unavailable, so 503) ...
  size_t max_queued = 256;
  // ... with this text.
  std::string full_text = "Too many requests are waiting to be parsed; try again shortly.";
};

class WorkPool {
 public:
  // `name` is for log lines. REQUIRES: options.threads >= 1.
  explicit WorkPool(WorkPoolOptions options, const char* name = "work pool");
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `work` for a pool thread. Errors: Unavailable when the pool is stopping or, if
  // `bounded`, when the queue is full (then `work` does not run); unbounded posts are for the
  // later steps of work already admitted. A throw from `work` is logged and dropped: work that
  // answers a request catches its own errors.
  [[nodiscard]] Status Post(std::function<void()> work, bool bounded = true) KVC_EXCLUDES(mu_);

 private:
  void Loop() KVC_EXCLUDES(mu_);

  const WorkPoolOptions options_;
  const char* const name_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ KVC_GUARDED_BY(mu_);
  bool stopping_ KVC_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvc::service
