// WatchStream: one `watch` response. Subscribes to the keys in the engine's WatchHub, reads
// them once in one snapshot for the first frame (every key), and from then on applies the
// changes the commit stream hands it (set, delete, sum, expiry) without reading storage again,
// sending a frame with every key whenever a watched key's versionstamp changed. Changes of one
// commit group make at most one frame.
//
// Ordering: each key's state remembers the version it is known at; a change or the first
// snapshot replaces it only if newer, so a change published before the first read completes
// is neither lost nor overwritten by an older snapshot.
//
// The stream ends (the client reconnects and gets a fresh snapshot) when the engine is retired
// (database deleted or replaced, server stopping) or the first read fails.
//
// Ownership: held by the session (as StreamSource) and by the in-flight first read; the
// subscription's callbacks hold a reference too, broken by Cancel().
// Thread-safety: all methods are thread-safe. Lock order: the hub's lock, then mu_.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "engine/engine.h"
#include "service/http_types.h"

namespace kvc::service {

class WatchStream : public StreamSource, public std::enable_shared_from_this<WatchStream> {
 public:
  // Turns the state of every watched key (in request order; nullopt: absent) into the bytes of
  // one frame. Called with the stream's lock held; must be quick.
  using FrameEncoder = std::function<std::string(const std::vector<std::optional<Entry>>&)>;

  // `encoder`: nullptr for KV Connect watch frames (codec::EncodeWatchFrame).
  WatchStream(std::shared_ptr<engine::Engine> engine, std::vector<std::string> keys,
              FrameEncoder encoder = nullptr);
  ~WatchStream() override;

  void Start(std::shared_ptr<StreamSink> sink) override;
  void Cancel() override;

 private:
  struct KeyState {
    std::optional<storage::StoredRow> row;
    int64_t known_at = -1;  // the commit version this state is known at
  };

  void OnChanges(const std::vector<engine::WatchHub::Change>& changes) KVC_EXCLUDES(mu_);
  void OnClosed() KVC_EXCLUDES(mu_);
  void OnFirstRead(Result<engine::ReadResult> result) KVC_EXCLUDES(mu_);
  // Sends a frame if any key's versionstamp differs from the last frame's.
  void MaybeSendLocked() KVC_REQUIRES(mu_);

  const std::shared_ptr<engine::Engine> engine_;  // destroyed after subscription_
  const std::vector<std::string> keys_;
  const FrameEncoder encoder_;

  Mutex mu_;
  std::shared_ptr<StreamSink> sink_ KVC_GUARDED_BY(mu_);
  std::unique_ptr<engine::WatchHub::Subscription> subscription_ KVC_GUARDED_BY(mu_);
  bool cancelled_ KVC_GUARDED_BY(mu_) = false;
  bool sent_first_ KVC_GUARDED_BY(mu_) = false;
  std::vector<KeyState> state_ KVC_GUARDED_BY(mu_);
  std::vector<std::optional<int64_t>> sent_versions_ KVC_GUARDED_BY(mu_);
};

}  // namespace kvc::service
