#include "service/kvconnect/watch_stream.h"

#include "codec/datapath_codec.h"

namespace kvc::service {

WatchStream::WatchStream(std::shared_ptr<engine::Engine> engine, std::vector<std::string> keys,
                         FrameEncoder encoder)
    : engine_(std::move(engine)),
      keys_(std::move(keys)),
      encoder_(encoder ? std::move(encoder) : FrameEncoder(&codec::EncodeWatchFrame)),
      state_(keys_.size()) {}

WatchStream::~WatchStream() = default;

void WatchStream::Start(std::shared_ptr<StreamSink> sink) {
  std::weak_ptr<WatchStream> weak = weak_from_this();
  {
    MutexLock lock(mu_);
    sink_ = std::move(sink);
    if (cancelled_) return;
  }
  // Subscribe before the first read so no change between the two is missed. The callbacks
  // run under the hub's lock; a closed hub calls on_close inline, before mu_ is taken here.
  engine::WatchHub::Callbacks cb;
  cb.on_change = [weak](const std::vector<engine::WatchHub::Change>& changes) {
    if (auto self = weak.lock()) self->OnChanges(changes);
  };
  cb.on_close = [weak] {
    if (auto self = weak.lock()) self->OnClosed();
  };
  auto sub = engine_->Subscribe(keys_, std::move(cb));
  {
    MutexLock lock(mu_);
    if (cancelled_) return;  // `sub` is destroyed after the lock is released
    subscription_ = std::move(sub);
  }
  std::vector<ReadRange> ranges;
  ranges.reserve(keys_.size());
  for (const std::string& k : keys_) {
    ranges.push_back(ReadRange{k, k + std::string(1, '\0'), 1, false});
  }
  auto self = shared_from_this();
  engine_->SnapshotRead(
      std::move(ranges), [self](Result<engine::ReadResult> r) { self->OnFirstRead(std::move(r)); },
      engine::Engine::ReadMode::kWatchSnapshot);
}

void WatchStream::Cancel() {
  std::unique_ptr<engine::WatchHub::Subscription> sub;
  {
    MutexLock lock(mu_);
    cancelled_ = true;
    sink_.reset();
    sub = std::move(subscription_);
  }
  // Destroyed without holding mu_: the hub's lock is taken before ours in the callbacks.
  sub.reset();
}

void WatchStream::OnChanges(const std::vector<engine::WatchHub::Change>& changes) {
  MutexLock lock(mu_);
  if (cancelled_) return;
  for (const engine::WatchHub::Change& c : changes) {
    KeyState& st = state_[c.key_index];
    if (c.version > st.known_at) {
      st.row = c.row;
      st.known_at = c.version;
    }
  }
  if (sent_first_) MaybeSendLocked();
}

void WatchStream::OnClosed() {
  MutexLock lock(mu_);
  if (sink_) sink_->Close();
  sink_.reset();
}

void WatchStream::OnFirstRead(Result<engine::ReadResult> result) {
  MutexLock lock(mu_);
  if (cancelled_) return;
  if (!result.ok()) {
    // The client reconnects and asks for a snapshot again.
    if (sink_) sink_->Close();
    sink_.reset();
    return;
  }
  for (size_t i = 0; i < keys_.size(); ++i) {
    KeyState& st = state_[i];
    if (st.known_at >= result->version) continue;  // a newer change arrived first
    st.known_at = result->version;
    st.row.reset();
    if (i < result->ranges.size() && !result->ranges[i].empty()) {
      Entry& e = result->ranges[i][0];
      st.row = storage::StoredRow{std::move(e.value), e.encoding, e.version, e.expire_at_ms};
    }
  }
  sent_first_ = true;
  sent_versions_.clear();  // the first frame always goes out
  MaybeSendLocked();
}

void WatchStream::MaybeSendLocked() {
  const int64_t now = engine_->now_ms();
  std::vector<std::optional<int64_t>> versions(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) {
    const auto& row = state_[i].row;
    if (row && storage::IsLive(row->expire_at_ms, now)) versions[i] = row->version;
  }
  if (!sent_versions_.empty() && versions == sent_versions_) return;
  std::vector<std::optional<Entry>> entries(keys_.size());
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!versions[i]) continue;
    const storage::StoredRow& row = *state_[i].row;
    entries[i] = Entry{keys_[i], row.value, row.encoding, row.version, row.expire_at_ms};
  }
  sent_versions_ = std::move(versions);
  if (sink_) sink_->Send(encoder_(entries));
}

}  // namespace kvc::service
