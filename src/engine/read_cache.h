// ReadCache: a bounded in-memory cache of point reads (key -> stored row, or "no row"), kept
// coherent with the engine's single writer so that a hit is always the latest committed state.
//
// Why: a point read that hits needs no reader thread, so it is answered on the caller's (I/O)
// thread without the two thread hand-offs a SQLite read costs, and never blocks.
//
// Coherence protocol (the engine is the only writer of its database):
// - The writer calls BeginWrite(keys) after applying a group's writes and before the storage
//   commit makes them visible, and EndWrite(keys, rows) after the commit returned (success or
//   not), before acknowledging anything. Between the two, each key has a "pending" mark and no
//   value. After a commit that succeeded, EndWrite stores each key's committed row as its
//   cached answer (write-through, admitted like a fill), so a read after a write hits.
// - A fill takes a ticket (FillTicket) before its storage snapshot begins and offers the row
//   read from that snapshot with Fill(). Fill stores it only if no write to the key's shard
//   ended since the ticket and none is pending on the key, so a row older than the latest
//   committed state is never stored.
// - So at any moment a cached value equals the latest committed row of its key. A lookup of
//   several keys is one consistent snapshot if writes_ended() did not move across it: EndWrite
//   counts itself before it stores any row or lets any fill of its keys in, and BeginWrite
//   dropped the keys' older rows, so lookups that saw a row of a commit and a row from before
//   it always see the count move.
// A cached row past its expiry is reported as "no row", like storage does.
//
// Memory: entries are charged key + value + a fixed overhead against `capacity_bytes`, and
// against the budget shared with other caches if one is given (cache_budget.h: the cache may
// hold what the budget's sharing rule allows it, up to its capacity), split evenly over the
// shards. A shard finds a key through an open-addressing index of full hashes;
// a node keeps the key and the cached value in one buffer, so a hit touches the index slot, the
// node and that buffer (read_cache.cc). Each shard evicts the oldest entries with a second chance
// (CLOCK): an entry read since it was stored goes back to the front once instead, so a hit marks
// its own entry and touches no other (a move to the front on every hit did). Once a shard is full,
// a new key is admitted only on its second miss within a short memory (a doorkeeper of
// fingerprints), so reads spread over far more keys than fit do not churn the cache. Thread-safety:
// all methods are thread-safe (one mutex per shard).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/cache_budget.h"
#include "storage/backend.h"

namespace kvc::engine {

class ReadCache {
 public:
  // capacity_bytes == 0 (or a budget of 0 bytes) disables the cache: lookups miss and fills are
  // dropped. `budget` (optional) is shared with other caches; the cache is one of its members
  // while it lives, if enabled.
  explicit ReadCache(size_t capacity_bytes, std::shared_ptr<CacheBudget> budget = nullptr);
  ~ReadCache();
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;

  bool enabled() const { return enabled_; }

  enum class Lookup { kMiss, kAbsent, kPresent };
  // kPresent fills *row; kAbsent means the key has no live row.
  Lookup Get(std::string_view key, int64_t now_ms, storage::StoredRow* row);

  // See the class comment. REQUIRES: the ticket is taken before the snapshot the row comes from.
  uint64_t FillTicket(std::string_view key);
  // Stores `row` (nullopt: the key has no row) for `key` if the ticket is still valid.
  void Fill(std::string_view key, uint64_t ticket, const std::optional<storage::StoredRow>& row);

  // Writer side. Every BeginWrite(keys) is followed by exactly one EndWrite with the same keys;
  // windows end in commit order. Duplicate keys are allowed.
  void BeginWrite(const std::vector<std::string>& keys);
  // `rows`: null when the commit failed (the keys are left uncached); otherwise (*rows)[i] is
  // the row keys[i] was committed with (nullopt: deleted or expired). When a key's last pending
  // write ends, the row given with it becomes its cached answer if the shard admits it.
  void EndWrite(const std::vector<std::string>& keys,
                const std::vector<const std::optional<storage::StoredRow>*>* rows = nullptr);
  // Prewarm (the engine, after open): fills the cache from scans of the database without
  // evicting anything. WarmTickets() is taken before the snapshot the rows come from (one ticket
  // per shard, as FillTicket). Warm() stores each row that is live at `now_ms`, whose shard had no
  // write end since its ticket, whose key has no node (no cached answer and no pending write),
  // and that fits in its shard's room. Returns the entries stored; sets *full once half of the
  // shards had a row that did not fit (keys spread evenly, so the cache is about full and the
  // caller stops).
  std::vector<uint64_t> WarmTickets() const;
  size_t Warm(const std::vector<uint64_t>& tickets, const std::vector<storage::KeyedRow>& rows,
              int64_t now_ms, bool* full);

  // Counts EndWrite calls (each counted as it starts).
  uint64_t writes_ended() const { return writes_ended_.load(std::memory_order_acquire); }

  // If the cache holds more than it may now (its share of the budget shrank as other caches
  // grew), evicts in every shard what it holds beyond its part. Without a budget, or within its
  // limit, there is nothing to give back.
  void Trim();

  // For tests and metrics.
  size_t entry_count() const;
  size_t charged_bytes() const { return charged_.load(std::memory_order_relaxed); }
  // What the cache may hold now: its capacity, or less as the budget's sharing rule allows.
  size_t limit_bytes() const;

 private:
  struct Shard;
  // The shard of `key`; *hash gets the key's string hash, which its map lookups reuse.
  Shard& ShardFor(std::string_view key, size_t* hash) const;
  // The index of that shard.
  static size_t ShardIndex(std::string_view key, size_t* hash);

  // The most shard `s` may hold now: its part of limit_bytes().
  size_t ShardLimit(const Shard& s) const;
  // Keeps charged_ and the budget's count in step with the shards' bytes.
  void Account(size_t add, size_t sub);

  const size_t capacity_bytes_;
  const std::shared_ptr<CacheBudget> budget_;  // null: none
  const bool enabled_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<size_t> charged_{0};  // the shards' bytes, summed
  std::atomic<uint64_t> writes_ended_{0};
  std::atomic<size_t> warm_full_shards_{0};  // shards where Warm found no room
};

}  // namespace kvc::engine
