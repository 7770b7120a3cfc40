#include "codec/client_codec.h"

#include <utility>

#include "codec/proto_parse.h"
#include "codec/utf8.h"
#include "codec/v8/v8_wire.h"
#include "codec/versionstamp.h"
#include "datapath.pb.h"

namespace kvc::codec {
namespace pb = com::deno::kv::datapath;

namespace {

constexpr char kUnsupportedType[] = "unsupported value type";
constexpr char kInvalidValue[] = "invalid v8 value";

Status Undecodable(const char* what) {
  return InvalidArgument(std::string("Response protobuf is invalid: could not decode ") + what +
                         ".");
}

Result<Entry> ToEntry(const pb::KvEntry& e) {
  Entry out;
  out.key = e.key();
  out.value = e.value();
  if (!IsKnownEncoding(e.encoding())) {
    return InvalidArgument("Unknown value encoding " + std::to_string(e.encoding()) + ".");
  }
  out.encoding = static_cast<ValueEncoding>(e.encoding());
  if (out.encoding == ValueEncoding::kLe64 && out.value.size() != 8) {
    return InvalidArgument("A KvU64 value in the response is not 8 bytes.");
  }
  Result<Versionstamp> stamp = VersionstampFromBytes(e.versionstamp());
  if (!stamp.ok()) {
    return InvalidArgument("An entry's versionstamp in the response is not 10 bytes.");
  }
  out.version = VersionstampToVersion(*stamp);
  return out;
}

}  // namespace

std::string EncodeSnapshotReadRequest(const std::vector<ReadRange>& ranges) {
  pb::SnapshotRead msg;
  for (const ReadRange& r : ranges) {
    pb::ReadRange* out = msg.add_ranges();
    out->set_start(r.start);
    out->set_end(r.end);
    out->set_limit(r.limit);
    out->set_reverse(r.reverse);
  }
  return msg.SerializeAsString();
}

std::string EncodeAtomicWriteRequest(const AtomicWrite& write) {
  pb::AtomicWrite msg;
  for (const Check& c : write.checks) {
    pb::Check* out = msg.add_checks();
    out->set_key(c.key);
    out->set_versionstamp(c.versionstamp);
  }
  for (const Mutation& m : write.mutations) {
    pb::Mutation* out = msg.add_mutations();
    out->set_key(m.key);
    out->set_mutation_type(static_cast<pb::MutationType>(m.type));
    if (m.type != MutationType::kDelete) {
      out->mutable_value()->set_data(m.value.data);
      out->mutable_value()->set_encoding(static_cast<pb::ValueEncoding>(m.value.encoding));
    }
    out->set_expire_at_ms(m.expire_at_ms);
    out->set_sum_min(m.sum_min);
    out->set_sum_max(m.sum_max);
    out->set_sum_clamp(m.sum_clamp);
  }
  for (const Enqueue& e : write.enqueues) {
    pb::Enqueue* out = msg.add_enqueues();
    out->set_payload(e.payload);
    out->set_deadline_ms(e.deadline_ms);
    for (const std::string& k : e.keys_if_undelivered) out->add_keys_if_undelivered(k);
    for (uint32_t b : e.backoff_schedule) out->add_backoff_schedule(b);
  }
  return msg.SerializeAsString();
}

std::string EncodeWatchRequest(const std::vector<std::string>& keys) {
  pb::Watch msg;
  for (const std::string& k : keys) msg.add_keys()->set_key(k);
  return msg.SerializeAsString();
}

Result<SnapshotReadResult> DecodeSnapshotReadOutput(std::string_view body) {
  pb::SnapshotReadOutput msg;
  if (!ParseMessage(body, &msg)) return Undecodable("a SnapshotReadOutput message");
  SnapshotReadResult out;
  out.status = static_cast<ReadStatus>(msg.status());
  out.read_disabled = msg.read_disabled();
  out.read_is_strongly_consistent = msg.read_is_strongly_consistent();
  out.ranges.reserve(static_cast<size_t>(msg.ranges_size()));
  for (const auto& range : msg.ranges()) {
    std::vector<Entry>& entries = out.ranges.emplace_back();
    entries.reserve(static_cast<size_t>(range.values_size()));
    for (const auto& e : range.values()) {
      KVC_ASSIGN_OR_RETURN(Entry entry, ToEntry(e));
      entries.push_back(std::move(entry));
    }
  }
  return out;
}

Result<AtomicWriteResult> DecodeAtomicWriteOutput(std::string_view body) {
  pb::AtomicWriteOutput msg;
  if (!ParseMessage(body, &msg)) return Undecodable("an AtomicWriteOutput message");
  AtomicWriteResult out;
  out.status = static_cast<WriteStatus>(msg.status());
  if (out.status == WriteStatus::kSuccess) {
    Result<Versionstamp> stamp = VersionstampFromBytes(msg.versionstamp());
    if (!stamp.ok()) {
      return InvalidArgument("The commit versionstamp in the response is not 10 bytes.");
    }
    out.version = VersionstampToVersion(*stamp);
  }
  out.failed_checks.assign(msg.failed_checks().begin(), msg.failed_checks().end());
  return out;
}

Result<WatchResult> DecodeWatchOutput(std::string_view payload) {
  pb::WatchOutput msg;
  if (!ParseMessage(payload, &msg)) return Undecodable("a WatchOutput message");
  WatchResult out;
  out.status = static_cast<ReadStatus>(msg.status());
  out.keys.reserve(static_cast<size_t>(msg.keys_size()));
  for (const auto& k : msg.keys()) {
    WatchKeyResult& key = out.keys.emplace_back();
    key.changed = k.changed();
    if (k.has_entry_if_changed()) {
      KVC_ASSIGN_OR_RETURN(key.entry, ToEntry(k.entry_if_changed()));
    }
  }
  return out;
}

void WatchFrameSplitter::Append(std::string_view bytes) {
  if (pos_ > 0) {  // drop the frames already returned, once per chunk rather than per frame
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(bytes);
}

Result<std::optional<std::string_view>> WatchFrameSplitter::Next() {
  constexpr size_t kPrefix = 4;
  if (buffer_.size() - pos_ < kPrefix) return std::optional<std::string_view>();
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + pos_);
  const uint32_t length =
      uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  if (length > max_frame_bytes_) {
    return InvalidArgument("a watch frame of " + std::to_string(length) +
                           " bytes exceeds the limit of " + std::to_string(max_frame_bytes_));
  }
  if (buffer_.size() - pos_ - kPrefix < length) return std::optional<std::string_view>();
  const std::string_view payload = std::string_view(buffer_).substr(pos_ + kPrefix, length);
  pos_ += kPrefix + length;
  return std::optional<std::string_view>(payload);
}

std::string EncodeV8String(std::string_view utf8) {
  std::string out;
  AppendV8Header(&out);
  AppendV8String(Utf8ToUtf16(utf8), /*prefer_two_byte=*/false, &out);
  return out;
}

Result<std::string> ParseV8String(std::string_view data) {
  V8Reader reader(data);
  uint8_t tag;
  if (!reader.ReadHeader() || !reader.ReadTag(&tag)) return InvalidArgument(kInvalidValue);
  if (tag != v8tag::kOneByteString && tag != v8tag::kTwoByteString && tag != v8tag::kUtf8String) {
    return InvalidArgument(kUnsupportedType);
  }
  std::u16string units;
  if (!ReadV8StringPayload(tag, &reader, &units) || !reader.done()) {
    return InvalidArgument(kInvalidValue);
  }
  return Utf16ToUtf8(units);
}

}  // namespace kvc::codec
