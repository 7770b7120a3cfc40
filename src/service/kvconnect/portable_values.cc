#include "service/kvconnect/portable_values.h"

#include <optional>
#include <string>
#include <utility>

#include "codec/datapath_codec.h"

namespace kvc::service {

void PortableValues::ConvertFormat16(std::string* value) const {
  if (!codec::IsV8Format16(*value)) return;
  codec::V8PortableOutcome outcome = codec::V8PortableOutcome::kUnchanged;
  std::optional<std::string> portable = codec::PortableV8(*value, &outcome);
  if (outcome != codec::V8PortableOutcome::kUnchanged && observer_ != nullptr) {
    observer_->CountPortableV8(/*on_write=*/false, outcome);
  }
  if (portable) *value = std::move(*portable);
}

void PortableValues::OnWrite(AtomicWrite* write, const engine::Limits& limits,
                             int64_t now_ms) const {
  using codec::V8PortableOutcome;
  struct Converted {
    std::string* value;
    std::string sent;  // the value as the client sent it
    V8PortableOutcome outcome;
  };
  std::vector<Converted> converted;
  bool grew = false;
  auto convert = [&](std::string* value) {
    V8PortableOutcome outcome = V8PortableOutcome::kUnchanged;
    std::optional<std::string> portable = codec::PortableV8(*value, &outcome);
    if (!portable) {
      if (outcome != V8PortableOutcome::kUnchanged && observer_ != nullptr) {
        observer_->CountPortableV8(/*on_write=*/true, outcome);
      }
      return;
    }
    grew = grew || portable->size() > value->size();
    converted.push_back(Converted{value, std::move(*value), outcome});
    *value = std::move(*portable);
  };
  for (Mutation& m : write->mutations) {
    const bool is_set =
        m.type == MutationType::kSet || m.type == MutationType::kSetSuffixVersionstampedKey;
    if (is_set && m.value.encoding == ValueEncoding::kV8) convert(&m.value.data);
  }
  for (Enqueue& e : write->enqueues) convert(&e.payload);
  // A grown value may break the value or total size limit the write as sent keeps.
  if (grew && !engine::ValidateAtomicWrite(*write, limits, now_ms).ok()) {
    for (Converted& c : converted) {
      if (c.sent.size() >= c.value->size()) continue;
      *c.value = std::move(c.sent);
      c.outcome = V8PortableOutcome::kKept;
    }
  }
  if (observer_ == nullptr) return;
  for (const Converted& c : converted) observer_->CountPortableV8(/*on_write=*/true, c.outcome);
}

void PortableValues::OnRead(std::vector<std::vector<Entry>>* ranges) const {
  for (std::vector<Entry>& range : *ranges) {
    for (Entry& e : range) {
      if (e.encoding == ValueEncoding::kV8) ConvertFormat16(&e.value);
    }
  }
}

WatchStream::FrameEncoder PortableValues::WatchFrameEncoder() const {
  return [self = *this](const std::vector<std::optional<Entry>>& keys) {
    auto needs = [](const std::optional<Entry>& e) {
      return e && e->encoding == ValueEncoding::kV8 && codec::IsV8Format16(e->value);
    };
    bool any = false;
    for (const auto& e : keys) any = any || needs(e);
    if (!any) return codec::EncodeWatchFrame(keys);
    std::vector<std::optional<Entry>> converted = keys;
    for (auto& e : converted) {
      if (needs(e)) self.ConvertFormat16(&e->value);
    }
    return codec::EncodeWatchFrame(converted);
  };
}

}  // namespace kvc::service
