// CacheBudget: one memory budget that the read caches of a server's databases share, so the
// cache can be sized to the machine (`serve --read-cache-total`, 25% of its memory by default)
// without every database taking that much.
//
// Sharing rule: a member cache may charge up to the larger of its fair share (the budget divided
// by the member caches) and what the other members leave of the budget (the budget less their
// charged bytes); its own capacity (EngineOptions::read_cache_bytes) bounds it too. So one busy
// database among idle or small ones gets nearly the whole budget, and when all of them fill up,
// each keeps its share. A cache that holds more than it may now (others grew into their shares)
// gives the excess back as it stores its next entries, and at once on ReadCache::Trim (the
// directory calls it every poll). In between the members together hold at most about twice the
// budget: what over-share caches kept (at most the budget) plus every fair share.
//
// Ownership: shared (std::shared_ptr) by the engines' read caches and whoever made it.
// Thread-safety: thread-safe (atomics). Members join and leave as their caches are made and
// destroyed, and report every charge; the figures are approximate while charges race.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace kvc::engine {

class CacheBudget {
 public:
  // bytes == 0: member caches are off.
  explicit CacheBudget(size_t bytes) : bytes_(bytes) {}
  CacheBudget(const CacheBudget&) = delete;
  CacheBudget& operator=(const CacheBudget&) = delete;

  size_t bytes() const { return bytes_; }
  // Bytes the members are charged together.
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t members() const { return members_.load(std::memory_order_relaxed); }

  // The most a member charged `own` bytes may be charged now (the sharing rule above).
  size_t AllowedFor(size_t own) const {
    const size_t members = std::max<size_t>(1, this->members());
    const size_t used = this->used();
    const size_t others = used > own ? used - own : 0;
    const size_t left = bytes_ > others ? bytes_ - others : 0;
    return std::max(bytes_ / members, left);
  }

  // For ReadCache: membership and charges.
  void Join() { members_.fetch_add(1, std::memory_order_relaxed); }
  void Leave() { members_.fetch_sub(1, std::memory_order_relaxed); }
  void Charge(size_t add) { used_.fetch_add(add, std::memory_order_relaxed); }
  void Release(size_t sub) { used_.fetch_sub(sub, std::memory_order_relaxed); }

 private:
  const size_t bytes_;
  std::atomic<size_t> used_{0};
  std::atomic<size_t> members_{0};
};

// The budget `spec` names: a number of bytes ("4294967296"), or a percentage of
// `memory_bytes` ("25%", 1 to 100, whole or with decimals). Errors: InvalidArgument saying which
// forms are accepted.
Result<size_t> ParseCacheBudget(std::string_view spec, uint64_t memory_bytes);

}  // namespace kvc::engine
