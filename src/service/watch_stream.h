// WatchStream: one `watch` response. Subscribes to the keys in the engine's WatchHub, reads
// them in one snapshot, and sends a length-prefixed WatchOutput frame first with every key and
// then whenever a watched key changed (set, delete, sum, expiry). Notifications that arrive
// while a read is in flight are coalesced into one more read.
//
// Ownership: held by the session (as StreamSource) and by in-flight engine callbacks; the
// subscription's callback holds a reference too, broken by Cancel().
// Thread-safety: all methods are thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "service/http_types.h"

namespace kvc::service {

class WatchStream : public StreamSource, public std::enable_shared_from_this<WatchStream> {
 public:
  WatchStream(std::shared_ptr<engine::Engine> engine, std::vector<std::string> keys);
  ~WatchStream() override;

  void Start(std::shared_ptr<StreamSink> sink) override;
  void Cancel() override;

 private:
  void OnChange(int64_t version);
  // REQUIRES: reading_ was set under mu_; mu_ not held (the engine may call back inline).
  void StartRead();
  void OnRead(Result<engine::ReadResult> result);
  // Sends a frame if anything changed. Returns true if another read must start.
  bool HandleRead(Result<engine::ReadResult> result);

  const std::shared_ptr<engine::Engine> engine_;  // destroyed after subscription_
  const std::vector<std::string> keys_;

  std::mutex mu_;
  std::shared_ptr<StreamSink> sink_;                              // guarded by mu_
  std::unique_ptr<engine::WatchHub::Subscription> subscription_;  // guarded by mu_
  bool cancelled_ = false;                                        // guarded by mu_
  bool reading_ = false;                                          // guarded by mu_
  bool pending_ = false;                                          // guarded by mu_
  bool sent_first_ = false;                                       // guarded by mu_
  int64_t seen_version_ = -1;                                     // guarded by mu_
  std::vector<std::optional<int64_t>> last_versions_;             // guarded by mu_
};

}  // namespace kvc::service
