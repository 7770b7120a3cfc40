#include "codec/client_codec.h"

#include <utility>

#include "codec/utf8.h"
#include "codec/v8_wire.h"
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
  if (!msg.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return Undecodable("a SnapshotReadOutput message");
  }
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
  if (!msg.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return Undecodable("an AtomicWriteOutput message");
  }
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
  if (!msg.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return Undecodable("a WatchOutput message");
  }
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
  std::vector<uint32_t> code_points;
  code_points.reserve(utf8.size());
  bool one_byte = true;
  for (size_t pos = 0; pos < utf8.size();) {
    const uint32_t cp = NextCodePoint(utf8, &pos).value_or(kReplacementChar);
    if (cp > 0xFF) one_byte = false;
    code_points.push_back(cp);
  }
  std::string out;
  AppendV8Header(&out);
  if (one_byte) {
    out.push_back(static_cast<char>(v8tag::kOneByteString));
    AppendVarint32(static_cast<uint32_t>(code_points.size()), &out);
    for (uint32_t cp : code_points) out.push_back(static_cast<char>(cp));
    return out;
  }
  std::vector<uint16_t> units;
  units.reserve(code_points.size());
  for (uint32_t cp : code_points) {
    if (cp < 0x10000) {
      units.push_back(static_cast<uint16_t>(cp));
    } else {
      cp -= 0x10000;
      units.push_back(static_cast<uint16_t>(0xD800 + (cp >> 10)));
      units.push_back(static_cast<uint16_t>(0xDC00 + (cp & 0x3FF)));
    }
  }
  const auto byte_length = static_cast<uint32_t>(units.size() * 2);
  // V8 aligns two-byte character data to an even offset with one padding byte before the tag.
  if ((out.size() + 1 + Varint32Size(byte_length)) % 2 != 0) out.push_back('\0');
  out.push_back(static_cast<char>(v8tag::kTwoByteString));
  AppendVarint32(byte_length, &out);
  for (uint16_t u : units) {
    out.push_back(static_cast<char>(u & 0xFF));
    out.push_back(static_cast<char>(u >> 8));
  }
  return out;
}

Result<std::string> ParseV8String(std::string_view data) {
  V8Reader reader(data);
  uint8_t tag;
  if (!reader.ReadHeader() || !reader.ReadTag(&tag)) return InvalidArgument(kInvalidValue);
  uint32_t length = 0;
  std::string_view bytes;
  std::string out;
  switch (tag) {
    case v8tag::kOneByteString:
      if (!reader.ReadVarint32(&length) || !reader.ReadBytes(length, &bytes)) {
        return InvalidArgument(kInvalidValue);
      }
      out.reserve(bytes.size());
      for (char c : bytes) AppendUtf8(static_cast<uint8_t>(c), &out);
      break;
    case v8tag::kTwoByteString: {
      if (!reader.ReadVarint32(&length) || length % 2 != 0 || !reader.ReadBytes(length, &bytes)) {
        return InvalidArgument(kInvalidValue);
      }
      const auto unit = [&](size_t i) {
        return static_cast<uint32_t>(static_cast<uint8_t>(bytes[2 * i])) |
               static_cast<uint32_t>(static_cast<uint8_t>(bytes[2 * i + 1])) << 8;
      };
      const size_t units = bytes.size() / 2;
      for (size_t i = 0; i < units; ++i) {
        uint32_t cp = unit(i);
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < units && unit(i + 1) >= 0xDC00 &&
            unit(i + 1) <= 0xDFFF) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (unit(i + 1) - 0xDC00);
          ++i;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
          cp = kReplacementChar;  // a lone surrogate has no UTF-8 form
        }
        AppendUtf8(cp, &out);
      }
      break;
    }
    case v8tag::kUtf8String:
      if (!reader.ReadVarint32(&length) || !reader.ReadBytes(length, &bytes)) {
        return InvalidArgument(kInvalidValue);
      }
      out.assign(bytes);
      break;
    default:
      return InvalidArgument(kUnsupportedType);
  }
  if (!reader.done()) return InvalidArgument(kInvalidValue);
  return out;
}

}  // namespace kvc::codec
