// ExpiryTask: deletes expired keys on the writer thread at the earliest expiry time, so their
// watchers are told (reads already hide expired rows at once). It learns of new expiries from
// the commit stream, and rereads the earliest expiry at least every `max_interval_ms` (another
// writer of the file may have set one).
//
// Thread-safety: see WriterTask; the next run time is atomic because OnCommit may run on a
// change-feed thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/commit_listener.h"
#include "engine/writer_task.h"

namespace kvc::engine {

class ExpiryTask : public WriterTask, public CommitListener {
 public:
  // Runs once at start to find the earliest expiry.
  ExpiryTask(int64_t now_ms, int64_t max_interval_ms)
      : max_interval_ms_(max_interval_ms), next_run_ms_(now_ms) {}

  const char* name() const override { return "expiry"; }
  int64_t NextRunMs() const override { return next_run_ms_.load(std::memory_order_acquire); }
  void Run(WriterTaskContext& ctx, int64_t now_ms) override;
  void OnCommit(const storage::CommitGroup& group) override;

  int64_t swept_keys() const { return swept_keys_.load(std::memory_order_relaxed); }

 private:
  // Moves the next run earlier to `ms` (never later).
  void RunNoLaterThan(int64_t ms);

  const int64_t max_interval_ms_;
  std::atomic<int64_t> next_run_ms_;
  std::atomic<int64_t> seen_min_ms_{-1};  // earliest expiry published during a Run
  std::atomic<int64_t> swept_keys_{0};
};

}  // namespace kvc::engine
