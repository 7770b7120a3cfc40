#include "service/watch_stream.h"

#include "codec/datapath_codec.h"

namespace kvc::service {

WatchStream::WatchStream(std::shared_ptr<engine::Engine> engine, std::vector<std::string> keys)
    : engine_(std::move(engine)), keys_(std::move(keys)) {}

WatchStream::~WatchStream() = default;

void WatchStream::Start(std::shared_ptr<StreamSink> sink) {
  auto self = shared_from_this();
  // Subscribe before the first read so no change between the two is missed.
  auto sub = engine_->Subscribe(keys_, [self](int64_t version) { self->OnChange(version); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    sink_ = std::move(sink);
    if (cancelled_) return;  // `sub` is destroyed after the lock is released
    subscription_ = std::move(sub);
    reading_ = true;
  }
  StartRead();
}

void WatchStream::Cancel() {
  std::unique_ptr<engine::WatchHub::Subscription> sub;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    sink_.reset();
    sub = std::move(subscription_);
  }
  // Destroyed without holding mu_: the hub's lock is taken before ours in OnChange.
  sub.reset();
}

void WatchStream::OnChange(int64_t version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_ || version <= seen_version_) return;
    if (reading_) {
      pending_ = true;
      return;
    }
    reading_ = true;
  }
  StartRead();
}

void WatchStream::StartRead() {
  std::vector<ReadRange> ranges;
  ranges.reserve(keys_.size());
  for (const std::string& k : keys_) {
    ranges.push_back(ReadRange{k, k + std::string(1, '\0'), 1, false});
  }
  auto self = shared_from_this();
  // Never inline: StartRead runs on the writer's notification path, which must stay short.
  engine_->SnapshotRead(
      std::move(ranges), [self](Result<engine::ReadResult> r) { self->OnRead(std::move(r)); },
      engine::Engine::Completion::kNeverInline);
}

void WatchStream::OnRead(Result<engine::ReadResult> result) {
  if (HandleRead(std::move(result))) StartRead();
}

bool WatchStream::HandleRead(Result<engine::ReadResult> result) {
  std::lock_guard<std::mutex> lock(mu_);
  reading_ = false;
  if (cancelled_) return false;
  if (!result.ok()) {
    // A transient read failure ends the stream; the client reconnects and gets a snapshot.
    if (sink_) sink_->Close();
    return false;
  }
  seen_version_ = std::max(seen_version_, result->version);
  std::vector<std::optional<Entry>> entries(keys_.size());
  std::vector<std::optional<int64_t>> versions(keys_.size());
  for (size_t i = 0; i < keys_.size() && i < result->ranges.size(); ++i) {
    if (!result->ranges[i].empty()) {
      entries[i] = std::move(result->ranges[i][0]);
      versions[i] = entries[i]->version;
    }
  }
  if (!sent_first_ || versions != last_versions_) {
    sent_first_ = true;
    last_versions_ = std::move(versions);
    std::string payload = codec::EncodeWatchOutput(entries);
    std::string frame(4, '\0');
    const uint32_t n = static_cast<uint32_t>(payload.size());
    for (int i = 0; i < 4; ++i)
      frame[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    frame += payload;
    if (sink_) sink_->Send(std::move(frame));
  }
  if (pending_) {
    pending_ = false;
    reading_ = true;
    return true;  // the caller reads again, without holding mu_
  }
  return false;
}

}  // namespace kvc::service
