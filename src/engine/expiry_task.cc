#include "engine/expiry_task.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kvc::engine {

void ExpiryTask::RunNoLaterThan(int64_t ms) {
  int64_t cur = next_run_ms_.load(std::memory_order_acquire);
  while ((cur < 0 || ms < cur) &&
         !next_run_ms_.compare_exchange_weak(cur, ms, std::memory_order_acq_rel)) {
  }
}

void ExpiryTask::OnCommit(const storage::CommitGroup& group) {
  for (const storage::CommitRecord& r : group.records) {
    for (const storage::KeyChange& c : r.changes) {
      if (c.row && c.row->expire_at_ms >= 0) {
        RunNoLaterThan(c.row->expire_at_ms);
        int64_t seen = seen_min_ms_.load(std::memory_order_acquire);
        while ((seen < 0 || c.row->expire_at_ms < seen) &&
               !seen_min_ms_.compare_exchange_weak(seen, c.row->expire_at_ms)) {
        }
      }
    }
  }
}

void ExpiryTask::Run(WriterTaskContext& ctx, int64_t now_ms) {
  // The sweep's transaction sees every expiry committed before it; what commits after it is
  // collected in seen_min_ms_ and applied after the new schedule is stored.
  seen_min_ms_.store(-1, std::memory_order_release);
  std::optional<int64_t> earliest;
  size_t removed = 0;
  Status s =
      ctx.Transact(storage::CommitOrigin::kExpiry,
                   [&](storage::Writer& w, int64_t) -> Result<std::vector<storage::KeyChange>> {
                     KVC_ASSIGN_OR_RETURN(std::vector<std::string> keys, w.DeleteExpired(now_ms));
                     KVC_ASSIGN_OR_RETURN(earliest, w.EarliestExpiry());
                     std::vector<storage::KeyChange> changes;
                     changes.reserve(keys.size());
                     for (std::string& k : keys)
                       changes.push_back(storage::KeyChange{std::move(k), {}});
                     removed = changes.size();
                     return changes;
                   });
  int64_t next = now_ms + max_interval_ms_;
  if (!s.ok()) {
    spdlog::warn("expiry sweep failed: {}", s.message());
    next = now_ms + 1000;  // retry later instead of spinning
  } else {
    if (removed > 0) {
      swept_keys_.fetch_add(static_cast<int64_t>(removed), std::memory_order_relaxed);
      spdlog::debug("expiry sweep removed {} keys", removed);
    }
    if (earliest) next = std::min(next, std::max(*earliest, now_ms + 1));
  }
  next_run_ms_.store(next, std::memory_order_release);
  const int64_t seen = seen_min_ms_.exchange(-1, std::memory_order_acq_rel);
  if (seen >= 0) RunNoLaterThan(seen);
}

}  // namespace kvc::engine
