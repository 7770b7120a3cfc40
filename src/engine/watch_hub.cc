#include "engine/watch_hub.h"

#include <algorithm>
#include <unordered_set>

namespace kvc::engine {

WatchHub::Subscription::~Subscription() { hub_->Remove(this); }

std::unique_ptr<WatchHub::Subscription> WatchHub::Subscribe(std::vector<std::string> keys,
                                                            Callback cb) {
  std::unique_ptr<Subscription> s(new Subscription(this, std::move(keys), std::move(cb)));
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& k : s->keys_) {
    auto& v = by_key_[k];
    if (std::find(v.begin(), v.end(), s.get()) == v.end()) v.push_back(s.get());
  }
  ++count_;
  return s;
}

void WatchHub::Remove(Subscription* s) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& k : s->keys_) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), s), v.end());
    if (v.empty()) by_key_.erase(it);
  }
  --count_;
}

void WatchHub::Notify(const std::vector<std::string>& keys, int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_key_.empty()) return;
  std::unordered_set<Subscription*> seen;
  for (const std::string& k : keys) {
    auto it = by_key_.find(k);
    if (it == by_key_.end()) continue;
    for (Subscription* s : it->second) {
      if (seen.insert(s).second) s->cb_(version);
    }
  }
}

size_t WatchHub::subscription_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace kvc::engine
