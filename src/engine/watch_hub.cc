#include "engine/watch_hub.h"

#include <algorithm>
#include <unordered_set>

namespace kvc::engine {

WatchHub::Subscription::~Subscription() { hub_->Remove(this); }

std::unique_ptr<WatchHub::Subscription> WatchHub::Subscribe(std::vector<std::string> keys,
                                                            Callbacks cb) {
  std::unique_ptr<Subscription> s(new Subscription(this, std::move(keys), std::move(cb)));
  MutexLock lock(mu_);
  ++count_;
  if (closed_) {
    if (s->cb_.on_close) s->cb_.on_close();
    return s;
  }
  for (size_t i = 0; i < s->keys_.size(); ++i) by_key_[s->keys_[i]].emplace_back(s.get(), i);
  return s;
}

void WatchHub::Remove(Subscription* s) {
  MutexLock lock(mu_);
  --count_;
  if (closed_) return;  // retired: every subscription is unregistered already
  for (const std::string& k : s->keys_) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove_if(v.begin(), v.end(), [s](const auto& p) { return p.first == s; }),
            v.end());
    if (v.empty()) by_key_.erase(it);
  }
}

void WatchHub::OnCommit(const storage::CommitGroup& group) {
  MutexLock lock(mu_);
  if (by_key_.empty()) return;
  // Gathered per subscription so each gets one call per group, in version order.
  std::vector<Subscription*> order;
  std::unordered_map<Subscription*, std::vector<Change>> changes;
  for (const storage::CommitRecord& r : group.records) {
    for (const storage::KeyChange& c : r.changes) {
      auto it = by_key_.find(c.key);
      if (it == by_key_.end()) continue;
      for (const auto& [sub, index] : it->second) {
        auto [slot, inserted] = changes.try_emplace(sub);
        if (inserted) order.push_back(sub);
        slot->second.push_back(Change{index, r.version, c.row});
      }
    }
  }
  for (Subscription* s : order) {
    if (s->cb_.on_change) s->cb_.on_change(changes[s]);
  }
}

void WatchHub::OnRetire() {
  MutexLock lock(mu_);
  if (closed_) return;
  closed_ = true;
  // A subscription is listed once per key it watches; each is closed once.
  std::vector<Subscription*> all;
  std::unordered_set<Subscription*> seen;
  for (auto& [key, subs] : by_key_) {
    for (const auto& p : subs) {
      if (seen.insert(p.first).second) all.push_back(p.first);
    }
  }
  by_key_.clear();
  for (Subscription* s : all) {
    if (s->cb_.on_close) s->cb_.on_close();
  }
}

std::vector<std::string> WatchHub::WatchedKeys() const {
  MutexLock lock(mu_);
  std::vector<std::string> keys;
  keys.reserve(by_key_.size());
  for (const auto& entry : by_key_) keys.push_back(entry.first);
  return keys;
}

size_t WatchHub::subscription_count() const {
  MutexLock lock(mu_);
  return count_;
}

}  // namespace kvc::engine
