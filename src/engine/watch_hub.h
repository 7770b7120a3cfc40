// WatchHub: change notification by key. The writer calls Notify() with the keys a commit
// touched; every subscription watching one of them gets its callback with the new version.
// Lookup is by key index (a hash map), never by scanning subscriptions or polling storage.
//
// Ownership: a Subscription unregisters itself on destruction; after its destructor returns the
// callback is never invoked again.
// Thread-safety: all methods are thread-safe. Callbacks run on the notifying thread while the
// hub's lock is held: they must be quick, must not block, and must not destroy subscriptions.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvc::engine {

class WatchHub {
 public:
  using Callback = std::function<void(int64_t version)>;

  class Subscription {
   public:
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    friend class WatchHub;
    Subscription(WatchHub* hub, std::vector<std::string> keys, Callback cb)
        : hub_(hub), keys_(std::move(keys)), cb_(std::move(cb)) {}
    WatchHub* hub_;
    std::vector<std::string> keys_;
    Callback cb_;
  };

  std::unique_ptr<Subscription> Subscribe(std::vector<std::string> keys, Callback cb);
  void Notify(const std::vector<std::string>& keys, int64_t version);
  size_t subscription_count() const;

 private:
  void Remove(Subscription* s);

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<Subscription*>> by_key_;  // guarded by mu_
  size_t count_ = 0;                                                    // guarded by mu_
};

}  // namespace kvc::engine
