#include "engine/read_cache.h"

#include <functional>
#include <vector>

#include "common/mutex.h"

namespace kvc::engine {
namespace {

constexpr size_t kShards = 64;  // power of two
// Doorkeeper slots per shard: remembers fingerprints of keys recently refused admission.
constexpr size_t kDoorSlots = 4096;
// Per-entry bookkeeping (map node, hash bucket, list links), charged on top of key and value.
constexpr size_t kEntryOverhead = 128;

}  // namespace

struct ReadCache::Shard {
  // Named here, not in the anonymous namespace: the map member's type must not have internal
  // linkage (g++ -Wsubobject-linkage, which a unity build turns on for every file).
  // A lookup key with its string hash computed once: Get and Fill hash a key for the shard
  // choice already, and hashing a Deno key again for the map cost as much.
  struct HashedKey {
    std::string_view key;
    size_t hash;  // std::hash<std::string_view> of key
  };
  struct StringHash {
    using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    size_t operator()(const HashedKey& k) const { return k.hash; }
  };
  struct KeyEqual {
    using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
    bool operator()(const HashedKey& a, std::string_view b) const { return a.key == b; }
    bool operator()(std::string_view a, const HashedKey& b) const { return a == b.key; }
  };

  struct Node {
    const std::string* key = nullptr;  // the map's own key
    bool cached = false;               // holds a lookup answer (row or "no row")
    bool hit = false;                  // read since it was last put at the front (second chance)
    std::optional<storage::StoredRow> row;
    uint32_t pending = 0;  // writes between BeginWrite and EndWrite
    size_t charge = 0;
    Node* prev = nullptr;  // LRU links; only cached nodes are linked
    Node* next = nullptr;
  };

  mutable Mutex mu;
  std::unordered_map<std::string, Node, StringHash, KeyEqual> map KVC_GUARDED_BY(mu);
  Node* head KVC_GUARDED_BY(mu) = nullptr;  // most recently stored or given a second chance
  Node* tail KVC_GUARDED_BY(mu) = nullptr;
  uint64_t writes_ended KVC_GUARDED_BY(mu) = 0;  // EndWrite calls that touched this shard
  size_t bytes KVC_GUARDED_BY(mu) = 0;
  size_t capacity = 0;  // set by the ReadCache constructor, read-only after it
  // Admission once full: a key is admitted only if it missed recently already, so a stream of
  // keys read once (a scan of a database far larger than the cache) does not churn the cache
  // and pay for an insert and an eviction on every miss.
  std::vector<uint32_t> door KVC_GUARDED_BY(mu) = std::vector<uint32_t>(kDoorSlots, 0);

  // True if a new entry of `charge` bytes for the key with hash `h` should be stored.
  bool Admit(uint64_t h, size_t charge) KVC_REQUIRES(mu) {
    if (bytes + charge <= capacity) return true;       // room left: no eviction needed
    uint32_t fp = static_cast<uint32_t>(h >> 32) | 1;  // never 0 (the empty slot)
    uint32_t& slot = door[(h >> 12) % kDoorSlots];
    if (slot == fp) {
      slot = 0;
      return true;
    }
    slot = fp;
    return false;
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
  // Drops the cached answer of `n`, if any; the node stays in the map.
  void Drop(Node* n) KVC_REQUIRES(mu) {
    if (!n->cached) return;
    Unlink(n);
    bytes -= n->charge;
    n->cached = false;
    n->hit = false;
    n->row.reset();
    n->charge = 0;
  }
  // Drops the cached answer of `n`; erases the node unless a write is pending on it.
  void Uncache(Node* n) KVC_REQUIRES(mu) {
    Drop(n);
    if (n->pending == 0) map.erase(map.find(std::string_view(*n->key)));
  }
  // Second chance (CLOCK): an entry read since it was put at the front goes back to the front
  // once instead of being evicted, so a hit only marks its own entry (moving it to the front on
  // every hit touched its neighbours and the head: three more cache misses per cached read).
  void EvictToCapacity() KVC_REQUIRES(mu) {
    while (bytes > capacity && tail) {
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

ReadCache::ReadCache(size_t capacity_bytes)
    : capacity_bytes_(capacity_bytes), shards_(new Shard[kShards]) {
  for (size_t i = 0; i < kShards; ++i) shards_[i].capacity = capacity_bytes / kShards;
}

ReadCache::~ReadCache() = default;

namespace {
// Mixes the string hash so shard choice, doorkeeper slot and bucket use different bits.
uint64_t Mix(uint64_t h) {
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}
}  // namespace

ReadCache::Shard& ReadCache::ShardFor(std::string_view key, size_t* hash) const {
  *hash = std::hash<std::string_view>{}(key);
  return shards_[Mix(*hash) & (kShards - 1)];
}

ReadCache::Lookup ReadCache::Get(std::string_view key, int64_t now_ms, storage::StoredRow* row) {
  if (!enabled()) return Lookup::kMiss;
  size_t hash = 0;
  Shard& s = ShardFor(key, &hash);
  MutexLock lock(s.mu);
  auto it = s.map.find(Shard::HashedKey{key, hash});
  if (it == s.map.end() || !it->second.cached) return Lookup::kMiss;
  Shard::Node* n = &it->second;
  n->hit = true;
  if (!n->row || !storage::IsLive(n->row->expire_at_ms, now_ms)) return Lookup::kAbsent;
  *row = *n->row;
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
  const size_t charge = key.size() + (row ? row->value.size() : 0) + kEntryOverhead;
  size_t hash = 0;
  Shard& s = ShardFor(key, &hash);
  if (charge > s.capacity) return;
  MutexLock lock(s.mu);
  if (s.writes_ended != ticket) return;  // a write ended since the snapshot may have begun
  auto found = s.map.find(Shard::HashedKey{key, hash});
  if (found == s.map.end() && !s.Admit(Mix(hash), charge)) return;
  auto [it, inserted] = s.map.try_emplace(std::string(key));
  Shard::Node* n = &it->second;
  if (inserted) n->key = &it->first;
  if (n->pending > 0) return;  // a write is under way; its commit may not be in our snapshot
  s.Drop(n);
  n->cached = true;
  n->row = row;
  n->charge = charge;
  s.bytes += charge;
  s.PushFront(n);
  s.EvictToCapacity();
}

void ReadCache::BeginWrite(const std::vector<std::string>& keys) {
  if (!enabled() || keys.empty()) return;
  for (const std::string& key : keys) {
    size_t hash = 0;
    Shard& s = ShardFor(key, &hash);
    MutexLock lock(s.mu);
    auto [it, inserted] = s.map.try_emplace(key);
    Shard::Node* n = &it->second;
    if (inserted) n->key = &it->first;
    ++n->pending;
    s.Drop(n);
  }
}

void ReadCache::EndWrite(const std::vector<std::string>& keys) {
  if (!enabled() || keys.empty()) return;
  for (const std::string& key : keys) {
    size_t hash = 0;
    Shard& s = ShardFor(key, &hash);
    MutexLock lock(s.mu);
    ++s.writes_ended;
    auto it = s.map.find(Shard::HashedKey{key, hash});
    if (it == s.map.end()) continue;  // unreachable when paired with BeginWrite
    Shard::Node* n = &it->second;
    if (n->pending > 0) --n->pending;
    if (n->pending == 0 && !n->cached) s.map.erase(it);
  }
  writes_ended_.fetch_add(1, std::memory_order_acq_rel);
}

size_t ReadCache::entry_count() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& s = shards_[i];
    MutexLock lock(s.mu);
    n += s.map.size();
  }
  return n;
}

size_t ReadCache::charged_bytes() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& s = shards_[i];
    MutexLock lock(s.mu);
    n += s.bytes;
  }
  return n;
}

}  // namespace kvc::engine
