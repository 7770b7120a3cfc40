// WatchHub: change notification by key, fed by the engine's commit records. For every commit
// group it finds the subscriptions watching a changed key (a hash map by key, never a scan of
// subscriptions) and hands each one the new state of its changed keys, so a watcher applies
// the changes it receives instead of re-reading storage.
//
// Ownership: a Subscription unregisters itself on destruction; after its destructor returns no
// callback of it runs again.
// Thread-safety: all methods are thread-safe. Callbacks run on the publishing thread while the
// hub's lock is held: they must be quick, must not block, and must not destroy subscriptions
// or subscribe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "engine/commit_listener.h"

namespace kvc::engine {

class WatchHub : public CommitListener {
 public:
  // One watched key's new state.
  struct Change {
    size_t key_index = 0;                   // position in the subscription's key list
    int64_t version = 0;                    // the commit version that produced this state
    std::optional<storage::StoredRow> row;  // nullopt: deleted
  };
  struct Callbacks {
    // The changes one commit group made to this subscription's keys, in version order.
    std::function<void(const std::vector<Change>&)> on_change;
    // No more changes will come (the engine is retired); called at most once.
    std::function<void()> on_close;
  };

  class Subscription {
   public:
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    friend class WatchHub;
    Subscription(WatchHub* hub, std::vector<std::string> keys, Callbacks cb)
        : hub_(hub), keys_(std::move(keys)), cb_(std::move(cb)) {}
    WatchHub* hub_;
    std::vector<std::string> keys_;
    Callbacks cb_;
  };

  // On a closed hub the subscription's on_close runs at once (inline).
  std::unique_ptr<Subscription> Subscribe(std::vector<std::string> keys, Callbacks cb);
  void OnCommit(const storage::CommitGroup& group) override;
  // Ends every subscription (on_close) and refuses new ones.
  void OnRetire() override;
  size_t subscription_count() const;
  // Every key some subscription watches (each once).
  std::vector<std::string> WatchedKeys() const;

 private:
  void Remove(Subscription* s) KVC_EXCLUDES(mu_);

  mutable Mutex mu_;
  // Key -> (subscription, index of the key in its list).
  std::unordered_map<std::string, std::vector<std::pair<Subscription*, size_t>>> by_key_
      KVC_GUARDED_BY(mu_);
  size_t count_ KVC_GUARDED_BY(mu_) = 0;
  // Set by OnRetire, which closes every subscription: once true, none is registered in by_key_
  // and every new one is closed at birth.
  bool closed_ KVC_GUARDED_BY(mu_) = false;
};

}  // namespace kvc::engine
