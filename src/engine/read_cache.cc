#include "engine/read_cache.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace kvc::engine {
namespace {

constexpr size_t kShards = 64;  // power of two
// Doorkeeper slots per shard: remembers fingerprints of keys recently refused admission.
constexpr size_t kDoorSlots = 4096;
// Per-entry bookkeeping (the node, its index slot, the buffer's header), charged on top of key
// and value.
constexpr size_t kEntryOverhead = 128;

}  // namespace

struct ReadCache::Shard {
  // One key's entry. Its key and the cached row's value share one buffer, so a hit reads the
  // node and one buffer (a std::unordered_map of std::string to a node with its own value
  // string touched a bucket, the node before, the node, the key's bytes and the value's).
  struct Node {
    std::string bytes;  // the key, then the cached row's value (if cached with a row)
    uint64_t hash = 0;  // std::hash<std::string_view> of the key: its home slot in the index
    uint32_t key_size = 0;
    uint32_t pending = 0;  // writes between BeginWrite and EndWrite
    bool cached = false;   // holds a lookup answer (a row or "no row")
    bool has_row = false;  // the answer is a row (the fields below), not "no row"
    bool hit = false;      // read since it was last put at the front (second chance)
    ValueEncoding encoding = ValueEncoding::kBytes;
    int64_t version = 0;
    int64_t expire_at_ms = -1;
    size_t charge = 0;
    Node* prev = nullptr;  // LRU links; only cached nodes are linked
    Node* next = nullptr;

    std::string_view key() const { return std::string_view(bytes).substr(0, key_size); }
    std::string_view value() const { return std::string_view(bytes).substr(key_size); }
  };

  // The shard's nodes by key: open addressing with linear probing over a power-of-two array of
  // (hash, node) slots, which own the nodes, erased by shifting the following run back (no
  // tombstones). A lookup compares full hashes in the slot array and reads only the node it
  // finds. Kept at most 70% full; it grows and never shrinks (its size is bounded by the
  // entries the shard's capacity holds, plus keys with writes under way).
  class Index {
   public:
    size_t size() const { return size_; }

    Node* Find(uint64_t hash, std::string_view key) const {
      if (slots_.empty()) return nullptr;
      const size_t mask = slots_.size() - 1;
      for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (!s.node) return nullptr;
        if (s.hash == hash && s.node->key() == key) return s.node.get();
      }
    }

    // A new node for `key`. REQUIRES: Find(hash, key) is null.
    Node* Add(uint64_t hash, std::string_view key) {
      if ((size_ + 1) * 10 > slots_.size() * 7) Grow();
      auto n = std::make_unique<Node>();
      n->bytes.assign(key);
      n->key_size = static_cast<uint32_t>(key.size());
      n->hash = hash;
      Node* added = n.get();
      Place(Slot{hash, std::move(n)});
      ++size_;
      return added;
    }

    // Removes and deletes `n`. REQUIRES: n is in this index.
    void Erase(Node* n) {
      const size_t mask = slots_.size() - 1;
      size_t hole = n->hash & mask;
      while (slots_[hole].node.get() != n) hole = (hole + 1) & mask;
      slots_[hole].node.reset();
      // Moves back every later entry of the run that may live in the hole: one whose home slot
      // is not cyclically within (hole, j].
      for (size_t j = (hole + 1) & mask; slots_[j].node; j = (j + 1) & mask) {
        const size_t home = slots_[j].hash & mask;
        const bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays) continue;
        slots_[hole] = std::move(slots_[j]);
        hole = j;
      }
      slots_[hole] = Slot{};
      --size_;
    }

   private:
    struct Slot {
      uint64_t hash = 0;
      std::unique_ptr<Node> node;  // null: empty
    };

    void Place(Slot slot) {
      const size_t mask = slots_.size() - 1;
      size_t i = slot.hash & mask;
      while (slots_[i].node) i = (i + 1) & mask;
      slots_[i] = std::move(slot);
    }

    void Grow() {
      std::vector<Slot> old =
          std::exchange(slots_, std::vector<Slot>(std::max<size_t>(16, slots_.size() * 2)));
      for (Slot& s : old) {
        if (s.node) Place(std::move(s));
      }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
  };

  mutable Mutex mu;
  Index index KVC_GUARDED_BY(mu);
  Node* head KVC_GUARDED_BY(mu) = nullptr;  // most recently stored or given a second chance
  Node* tail KVC_GUARDED_BY(mu) = nullptr;
  uint64_t writes_ended KVC_GUARDED_BY(mu) = 0;  // EndWrite calls that touched this shard
  bool warm_full KVC_GUARDED_BY(mu) = false;     // a prewarm row found no room here
  size_t bytes KVC_GUARDED_BY(mu) = 0;
  size_t capacity = 0;         // set by the ReadCache constructor, read-only after it
  ReadCache* owner = nullptr;  // likewise
  // Admission once full: a key is admitted only if it missed recently already, so a stream of
  // keys read once (a scan of a database far larger than the cache) does not churn the cache
  // and pay for an insert and an eviction on every miss.
  std::vector<uint32_t> door KVC_GUARDED_BY(mu) = std::vector<uint32_t>(kDoorSlots, 0);

  // True if a new entry of `charge` bytes for the key with hash `h` should be stored, the shard
  // holding at most `limit` bytes.
  bool Admit(uint64_t h, size_t charge, size_t limit) KVC_REQUIRES(mu) {
    if (bytes + charge <= limit) return true;          // room left: no eviction needed
    uint32_t fp = static_cast<uint32_t>(h >> 32) | 1;  // never 0 (the empty slot)
    uint32_t& slot = door[(h >> 12) % kDoorSlots];
    if (slot == fp) {
      slot = 0;
      return true;
    }
    slot = fp;
    return false;
  }

  // The node of `key`, made if it has none.
  Node* FindOrAdd(uint64_t hash, std::string_view key) KVC_REQUIRES(mu) {
    Node* n = index.Find(hash, key);
    return n ? n : index.Add(hash, key);
  }

  void Unlink(Node* n) KVC_REQUIRES(mu) {
    (n->prev ? n->prev->next : head) = n->next;
    (n->next ? n->next->prev : tail) = n->prev;
    n->prev = n->next = nullptr;
  }
  void PushFront(Node* n) KVC_REQUIRES(mu) {
    n->prev = nullptr;
    n->next = head;
    if (head) head->prev = n;
    head = n;
    if (!tail) tail = n;
  }
  // Drops the cached answer of `n`, if any; the node stays in the index.
  void Drop(Node* n) KVC_REQUIRES(mu) {
    if (!n->cached) return;
    Unlink(n);
    bytes -= n->charge;
    owner->Account(0, n->charge);
    n->cached = false;
    n->has_row = false;
    n->hit = false;
    n->bytes.resize(n->key_size);
    n->charge = 0;
  }
  // Drops the cached answer of `n`; erases the node unless a write is pending on it.
  void Uncache(Node* n) KVC_REQUIRES(mu) {
    Drop(n);
    if (n->pending == 0) index.Erase(n);
  }
  // Makes `row` (null: "no row") the cached answer of `n`, charged `charge` bytes, and evicts
  // other entries down to `limit` bytes. REQUIRES: charge <= limit (so `n`, at the front, stays).
  void Store(Node* n, const storage::StoredRow* row, size_t charge, size_t limit) KVC_REQUIRES(mu) {
    Drop(n);
    n->cached = true;
    n->has_row = row != nullptr;
    if (row) {
      n->bytes.append(row->value);
      n->encoding = row->encoding;
      n->version = row->version;
      n->expire_at_ms = row->expire_at_ms;
    }
    n->charge = charge;
    bytes += charge;
    owner->Account(charge, 0);
    PushFront(n);
    EvictTo(limit);
  }
  // Second chance (CLOCK): an entry read since it was put at the front goes back to the front
  // once instead of being evicted, so a hit only marks its own entry (moving it to the front on
  // every hit touched its neighbours and the head: three more cache misses per cached read).
  void EvictTo(size_t limit) KVC_REQUIRES(mu) {
    while (bytes > limit && tail) {
      Node* n = tail;
      if (n->hit && n != head) {
        n->hit = false;
        Unlink(n);
        PushFront(n);
        continue;
      }
      Uncache(n);
    }
  }
};

ReadCache::ReadCache(size_t capacity_bytes, std::shared_ptr<CacheBudget> budget)
    : capacity_bytes_(capacity_bytes),
      budget_(std::move(budget)),
      enabled_(capacity_bytes > 0 && (!budget_ || budget_->bytes() > 0)),
      shards_(new Shard[kShards]) {
  for (size_t i = 0; i < kShards; ++i) {
    shards_[i].capacity = capacity_bytes / kShards;
    shards_[i].owner = this;
  }
  if (enabled_ && budget_) budget_->Join();
}

ReadCache::~ReadCache() {
  if (!enabled_ || !budget_) return;
  budget_->Release(charged_.load(std::memory_order_relaxed));
  budget_->Leave();
}

void ReadCache::Account(size_t add, size_t sub) {
  if (add > 0) charged_.fetch_add(add, std::memory_order_relaxed);
  if (sub > 0) charged_.fetch_sub(sub, std::memory_order_relaxed);
  if (budget_) {
    if (add > 0) budget_->Charge(add);
    if (sub > 0) budget_->Release(sub);
  }
}

size_t ReadCache::limit_bytes() const {
  if (!enabled_) return 0;
  if (!budget_) return capacity_bytes_;
  return std::min(capacity_bytes_, budget_->AllowedFor(charged_bytes()));
}

size_t ReadCache::ShardLimit(const Shard& s) const {
  if (!budget_) return s.capacity;
  return std::min(s.capacity, budget_->AllowedFor(charged_bytes()) / kShards);
}

void ReadCache::Trim() {
  // The directory calls this every poll for every database: most calls find nothing to give back
  // and should not take 64 locks to learn it.
  if (!enabled_ || !budget_ || charged_bytes() <= limit_bytes()) return;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& s = shards_[i];
    const size_t limit = ShardLimit(s);
    MutexLock lock(s.mu);
    s.EvictTo(limit);
  }
}

namespace {
// Mixes the string hash so shard choice, doorkeeper slot and bucket use different bits.
uint64_t Mix(uint64_t h) {
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}
// What an entry of `key` answering `row` (null: "no row") is charged.
size_t Charge(std::string_view key, const storage::StoredRow* row) {
  return key.size() + (row ? row->value.size() : 0) + kEntryOverhead;
}
// The row an optional holds, or null.
const storage::StoredRow* RowOf(const std::optional<storage::StoredRow>& row) {
  return row ? &*row : nullptr;
}
}  // namespace

size_t ReadCache::ShardIndex(std::string_view key, size_t* hash) {
  *hash = std::hash<std::string_view>{}(key);
  return Mix(*hash) & (kShards - 1);
}

ReadCache::Shard& ReadCache::ShardFor(std::string_view key, size_t* hash) const {
  return shards_[ShardIndex(key, hash)];
}

ReadCache::Lookup ReadCache::Get(std::string_view key, int64_t now_ms, storage::StoredRow* row) {
  if (!enabled()) return Lookup::kMiss;
  size_t hash = 0;
  Shard& s = ShardFor(key, &hash);
  MutexLock lock(s.mu);
  Shard::Node* n = s.index.Find(hash, key);
  if (!n || !n->cached) return Lookup::kMiss;
  n->hit = true;
  if (!n->has_row || !storage::IsLive(n->expire_at_ms, now_ms)) return Lookup::kAbsent;
  const std::string_view value = n->value();
  row->value.assign(value.data(), value.size());
  row->encoding = n->encoding;
  row->version = n->version;
  row->expire_at_ms = n->expire_at_ms;
  return Lookup::kPresent;
}

uint64_t ReadCache::FillTicket(std::string_view key) {
  if (!enabled()) return 0;
  size_t hash = 0;
  Shard& s = ShardFor(key, &hash);
  MutexLock lock(s.mu);
  return s.writes_ended;
}

void ReadCache::Fill(std::string_view key, uint64_t ticket,
                     const std::optional<storage::StoredRow>& row) {
  if (!enabled()) return;
  const size_t charge = Charge(key, RowOf(row));
  size_t hash = 0;
  Shard& s = ShardFor(key, &hash);
  const size_t limit = ShardLimit(s);
  if (charge > limit) return;
  MutexLock lock(s.mu);
  if (s.writes_ended != ticket) return;  // a write ended since the snapshot may have begun
  Shard::Node* n = s.index.Find(hash, key);
  if (!n) {
    if (!s.Admit(Mix(hash), charge, limit)) return;
    n = s.index.Add(hash, key);
  }
  if (n->pending > 0) return;  // a write is under way; its commit may not be in our snapshot
  s.Store(n, RowOf(row), charge, limit);
}

void ReadCache::BeginWrite(const std::vector<std::string>& keys) {
  if (!enabled() || keys.empty()) return;
  for (const std::string& key : keys) {
    size_t hash = 0;
    Shard& s = ShardFor(key, &hash);
    MutexLock lock(s.mu);
    Shard::Node* n = s.FindOrAdd(hash, key);
    ++n->pending;
    s.Drop(n);
  }
}

void ReadCache::EndWrite(const std::vector<std::string>& keys,
                         const std::vector<const std::optional<storage::StoredRow>*>* rows) {
  if (!enabled() || keys.empty()) return;
  // Counted first: no row of this write is stored, and no fill of its keys is let in (they
  // stay pending until below), before the count moves (see the class comment).
  writes_ended_.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    size_t hash = 0;
    Shard& s = ShardFor(key, &hash);
    const size_t limit = ShardLimit(s);
    MutexLock lock(s.mu);
    ++s.writes_ended;
    Shard::Node* n = s.index.Find(hash, key);
    if (!n) continue;  // unreachable when paired with BeginWrite
    if (n->pending > 0) --n->pending;
    if (n->pending > 0 || n->cached) continue;
    // The key's last pending write ended: its row is the latest committed state of the key,
    // and every fill begun before is refused (writes_ended moved).
    const std::optional<storage::StoredRow>* row = rows ? (*rows)[i] : nullptr;
    if (row) {
      const size_t charge = Charge(key, RowOf(*row));
      if (charge <= limit && s.Admit(Mix(hash), charge, limit)) {
        s.Store(n, RowOf(*row), charge, limit);
        continue;
      }
    }
    s.index.Erase(n);
  }
}

std::vector<uint64_t> ReadCache::WarmTickets() const {
  std::vector<uint64_t> tickets(kShards, 0);
  if (!enabled()) return tickets;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& s = shards_[i];
    MutexLock lock(s.mu);
    tickets[i] = s.writes_ended;
  }
  return tickets;
}

size_t ReadCache::Warm(const std::vector<uint64_t>& tickets,
                       const std::vector<storage::KeyedRow>& rows, int64_t now_ms, bool* full) {
  *full = false;
  if (!enabled()) return 0;
  size_t stored = 0;
  for (const storage::KeyedRow& r : rows) {
    if (!storage::IsLive(r.row.expire_at_ms, now_ms)) continue;
    const size_t charge = Charge(r.key, &r.row);
    size_t hash = 0;
    const size_t i = ShardIndex(r.key, &hash);
    Shard& s = shards_[i];
    const size_t limit = ShardLimit(s);
    MutexLock lock(s.mu);
    if (s.bytes + charge > limit) {
      // Skipped: other shards may have room yet. Once half of them had none, the rest are
      // nearly full too (keys spread evenly), so the caller stops.
      if (!s.warm_full) {
        s.warm_full = true;
        warm_full_shards_.fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    if (s.writes_ended != tickets[i]) continue;  // a write ended since the snapshot may have begun
    if (s.index.Find(hash, r.key) != nullptr) continue;  // cached already, or a write is pending
    s.Store(s.index.Add(hash, r.key), &r.row, charge, limit);
    ++stored;
  }
  *full = warm_full_shards_.load(std::memory_order_relaxed) >= kShards / 2;
  return stored;
}

size_t ReadCache::entry_count() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& s = shards_[i];
    MutexLock lock(s.mu);
    n += s.index.size();
  }
  return n;
}

}  // namespace kvc::engine
