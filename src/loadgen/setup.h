// What a benchmark run needs around its timed window (see plan.h for the threading model): the
// pool of I/O threads, blocking calls from the driver's thread onto a connection, the reading
// of the sum counter, and the preload of the keys the workloads read.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/connection.h"
#include "common/mutex.h"
#include "common/status.h"
#include "loadgen/bench.h"
#include "loadgen/plan.h"

namespace kvc::loadgen {

// How long the I/O threads may take to wind down on their own before they are stopped.
inline constexpr std::chrono::milliseconds kStopGrace{2000};

// One io_context per thread, each run by its own thread until Stop().
// Thread-safety: context() from any thread; Stop() from the owner.
class IoPool {
 public:
  explicit IoPool(int threads);
  ~IoPool() { Stop(); }

  size_t size() const { return contexts_.size(); }
  boost::asio::io_context& context(size_t i) { return *contexts_[i % contexts_.size()]; }

  // Lets the contexts run out of work for up to `grace`, then stops them and joins the threads.
  void Stop(std::chrono::milliseconds grace = kStopGrace);

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  Countdown exited_;
};

// Runs conn->Connect() on `io` and waits for it.
Status ConnectBlocking(boost::asio::io_context& io, const std::shared_ptr<client::Connection>& conn,
                       std::chrono::milliseconds timeout);

// Runs conn->Send(request) on `io` and waits up to `timeout` for the answer.
Result<client::Response> CallBlocking(boost::asio::io_context& io,
                                      const std::shared_ptr<client::Connection>& conn,
                                      client::Request request, std::chrono::milliseconds timeout);

// Reads the KvU64 counter at plan.counter_key: 0 if absent. Errors: the call's, or
// InvalidArgument if the key holds something else.
Result<uint64_t> ReadCounter(boost::asio::io_context& io,
                             const std::shared_ptr<client::Connection>& conn, const Plan& plan);

// Atomic writes setting every key of `keys` to `value`, each within the per-write limits.
std::vector<std::string> PreloadBatches(const std::vector<std::string>& keys,
                                        const std::string& value, const BenchOptions& o);

// First failure of the preload, shared by its lanes. Thread-safe.
class PreloadState {
 public:
  void Fail(Status s) {
    MutexLock lock(mu_);
    if (first_.ok()) first_ = std::move(s);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  Status first() {
    MutexLock lock(mu_);
    return first_;
  }

 private:
  Mutex mu_;
  Status first_ KVC_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

// One lane of the preload: sends the next unsent batch of atomic writes over its connection,
// one at a time, until none is left or any lane failed; then counts `done` down.
// Ownership and thread-safety: as for the actors of workloads.h.
class PreloadLane {
 public:
  PreloadLane(const Plan* plan, std::shared_ptr<client::Connection> conn,
              const std::vector<std::string>* batches, std::atomic<size_t>* next,
              PreloadState* state, Countdown* done)
      : plan_(plan),
        conn_(std::move(conn)),
        batches_(batches),
        next_(next),
        state_(state),
        done_(done) {}

  void SendNext();

 private:
  const Plan* plan_;
  std::shared_ptr<client::Connection> conn_;
  const std::vector<std::string>* batches_;
  std::atomic<size_t>* next_;
  PreloadState* state_;
  Countdown* done_;
};

}  // namespace kvc::loadgen
