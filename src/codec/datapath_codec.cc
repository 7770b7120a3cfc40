#include "codec/datapath_codec.h"

#include <utility>

#include "codec/proto_parse.h"
#include "codec/v8/v8_wire.h"
#include "codec/versionstamp.h"
#include "datapath.pb.h"

namespace kvc::codec {
namespace pb = com::deno::kv::datapath;

namespace {

Status Invalid(const char* message) {
  return InvalidArgument(std::string("Request protobuf is invalid: ") + message + ".");
}

Result<ValueEncoding> ToEncoding(int e) {
  if (!IsKnownEncoding(e)) {
    return InvalidArgument("The value encoding " + std::to_string(e) + " is unknown.");
  }
  return static_cast<ValueEncoding>(e);
}

// The mutation kinds this server applies, as the wire names them.
constexpr std::pair<pb::MutationType, MutationType> kMutationTypes[] = {
    {pb::M_SET, MutationType::kSet},
    {pb::M_DELETE, MutationType::kDelete},
    {pb::M_SUM, MutationType::kSum},
    {pb::M_MAX, MutationType::kMax},
    {pb::M_MIN, MutationType::kMin},
    {pb::M_SET_SUFFIX_VERSIONSTAMPED_KEY, MutationType::kSetSuffixVersionstampedKey},
};

Result<MutationType> ToMutationType(pb::MutationType t) {
  for (const auto& [wire, type] : kMutationTypes) {
    if (wire == t) return type;
  }
  return InvalidArgument("Invalid mutation kind or arguments.");
}

void FillEntry(const Entry& e, pb::KvEntry* out) {
  out->set_key(e.key);
  out->set_value(e.value);
  out->set_encoding(static_cast<pb::ValueEncoding>(e.encoding));
  Versionstamp vs = VersionToVersionstamp(e.version);
  out->set_versionstamp(reinterpret_cast<const char*>(vs.data()), vs.size());
}

}  // namespace

Result<std::vector<ReadRange>> DecodeSnapshotRead(std::string_view body) {
  pb::SnapshotRead msg;
  if (!ParseMessage(body, &msg)) return Invalid("could not decode a SnapshotRead message");
  std::vector<ReadRange> out;
  out.reserve(static_cast<size_t>(msg.ranges_size()));
  for (const auto& r : msg.ranges()) {
    out.push_back(ReadRange{r.start(), r.end(), r.limit(), r.reverse()});
  }
  return out;
}

Result<AtomicWrite> DecodeAtomicWrite(std::string_view body) {
  pb::AtomicWrite msg;
  if (!ParseMessage(body, &msg)) return Invalid("could not decode an AtomicWrite message");
  AtomicWrite w;
  w.checks.reserve(static_cast<size_t>(msg.checks_size()));
  for (const auto& c : msg.checks()) w.checks.push_back(Check{c.key(), c.versionstamp()});
  w.mutations.reserve(static_cast<size_t>(msg.mutations_size()));
  for (const auto& m : msg.mutations()) {
    Mutation out;
    out.key = m.key();
    out.expire_at_ms = m.expire_at_ms();
    out.sum_min = m.sum_min();
    out.sum_max = m.sum_max();
    out.sum_clamp = m.sum_clamp();
    KVC_ASSIGN_OR_RETURN(out.type, ToMutationType(m.mutation_type()));
    if (out.type != MutationType::kDelete) {
      if (!m.has_value()) return InvalidArgument("Invalid mutation kind or arguments.");
      KVC_ASSIGN_OR_RETURN(out.value.encoding, ToEncoding(m.value().encoding()));
      out.value.data = m.value().data();
      if (out.value.encoding == ValueEncoding::kLe64 && out.value.data.size() != 8) {
        return InvalidArgument("A KvU64 value must be exactly 8 bytes.");
      }
    }
    w.mutations.push_back(std::move(out));
  }
  w.enqueues.reserve(static_cast<size_t>(msg.enqueues_size()));
  for (const auto& e : msg.enqueues()) {
    Enqueue out;
    out.payload = e.payload();
    out.deadline_ms = e.deadline_ms();
    out.keys_if_undelivered.assign(e.keys_if_undelivered().begin(), e.keys_if_undelivered().end());
    out.backoff_schedule.assign(e.backoff_schedule().begin(), e.backoff_schedule().end());
    w.enqueues.push_back(std::move(out));
  }
  return w;
}

Result<std::vector<std::string>> DecodeWatch(std::string_view body) {
  pb::Watch msg;
  if (!ParseMessage(body, &msg)) return Invalid("could not decode a Watch message");
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(msg.keys_size()));
  for (const auto& k : msg.keys()) keys.push_back(k.key());
  return keys;
}

// The two answers of every data-path request (a snapshot read's, an atomic write's) are written
// in the protobuf wire format by hand: one exact allocation, instead of a message tree, copies of
// every key and value into it and then the serialized string. The bytes equal the generated
// code's SerializeAsString (fields in number order, proto3 defaults left out, the repeated
// uint32 packed), which a unit test checks against it.
namespace {
namespace wire {

constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;
// REQUIRES: field < 16 (a one-byte tag).
constexpr char Tag(int field, int type) { return static_cast<char>((field << 3) | type); }

// Protobuf's varint is LEB128, as V8's (v8_wire.h).
size_t VarintSize(uint64_t v) { return Varint64Size(v); }
void PutVarint(std::string* out, uint64_t v) { AppendVarint64(v, out); }
// An enum or int32 field's value: a negative one is sign-extended to ten bytes, as protobuf does.
uint64_t EnumValue(int v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

// A bytes or message field of `n` bytes; a bytes field that is empty is left out (proto3).
size_t BytesFieldSize(size_t n) { return n == 0 ? 0 : 1 + VarintSize(n) + n; }
size_t MessageFieldSize(size_t n) { return 1 + VarintSize(n) + n; }
void PutBytesField(std::string* out, int field, std::string_view bytes) {
  if (bytes.empty()) return;
  out->push_back(Tag(field, kLengthDelimited));
  PutVarint(out, bytes.size());
  out->append(bytes);
}
void PutMessageHeader(std::string* out, int field, size_t n) {
  out->push_back(Tag(field, kLengthDelimited));
  PutVarint(out, n);
}
void PutVarintField(std::string* out, int field, uint64_t v) {
  if (v == 0) return;
  out->push_back(Tag(field, kVarint));
  PutVarint(out, v);
}
size_t VarintFieldSize(uint64_t v) { return v == 0 ? 0 : 1 + VarintSize(v); }

}  // namespace wire

std::string_view StampBytes(const Versionstamp& vs) {
  return {reinterpret_cast<const char*>(vs.data()), vs.size()};
}

// KvEntry: key = 1, value = 2, encoding = 3, versionstamp = 4.
size_t KvEntrySize(const Entry& e) {
  return wire::BytesFieldSize(e.key.size()) + wire::BytesFieldSize(e.value.size()) +
         wire::VarintFieldSize(wire::EnumValue(static_cast<int>(e.encoding))) +
         wire::BytesFieldSize(sizeof(Versionstamp));
}
void PutKvEntry(std::string* out, int field, const Entry& e) {
  wire::PutMessageHeader(out, field, KvEntrySize(e));
  wire::PutBytesField(out, 1, e.key);
  wire::PutBytesField(out, 2, e.value);
  wire::PutVarintField(out, 3, wire::EnumValue(static_cast<int>(e.encoding)));
  wire::PutBytesField(out, 4, StampBytes(VersionToVersionstamp(e.version)));
}
// ReadRangeOutput: values = 1.
size_t ReadRangeOutputSize(const std::vector<Entry>& range) {
  size_t n = 0;
  for (const Entry& e : range) n += wire::MessageFieldSize(KvEntrySize(e));
  return n;
}

}  // namespace

std::string EncodeSnapshotReadOutput(const std::vector<std::vector<Entry>>& ranges, bool strong) {
  // SnapshotReadOutput: ranges = 1, read_disabled = 2 (false: left out),
  // read_is_strongly_consistent = 4, status = 8.
  size_t total = wire::VarintFieldSize(strong ? 1 : 0) + wire::VarintFieldSize(pb::SR_SUCCESS);
  for (const auto& r : ranges) total += wire::MessageFieldSize(ReadRangeOutputSize(r));
  std::string out;
  out.reserve(total);
  for (const auto& r : ranges) {
    wire::PutMessageHeader(&out, 1, ReadRangeOutputSize(r));
    for (const Entry& e : r) PutKvEntry(&out, 1, e);
  }
  wire::PutVarintField(&out, 4, strong ? 1 : 0);
  wire::PutVarintField(&out, 8, pb::SR_SUCCESS);
  return out;
}

std::string EncodeAtomicWriteOutput(const CommitResult& result) {
  // AtomicWriteOutput: status = 1, versionstamp = 2, failed_checks = 4 (packed).
  std::string out;
  if (result.ok) {
    out.reserve(2 + wire::BytesFieldSize(sizeof(Versionstamp)));
    wire::PutVarintField(&out, 1, pb::AW_SUCCESS);
    wire::PutBytesField(&out, 2, StampBytes(VersionToVersionstamp(result.version)));
    return out;
  }
  size_t packed = 0;
  for (uint32_t i : result.failed_checks) packed += wire::VarintSize(i);
  out.reserve(2 + (packed == 0 ? 0 : wire::MessageFieldSize(packed)));
  wire::PutVarintField(&out, 1, pb::AW_CHECK_FAILURE);
  if (packed > 0) {
    wire::PutMessageHeader(&out, 4, packed);
    for (uint32_t i : result.failed_checks) wire::PutVarint(&out, i);
  }
  return out;
}

std::string EncodeWatchOutput(const std::vector<std::optional<Entry>>& keys) {
  pb::WatchOutput out;
  out.set_status(pb::SR_SUCCESS);
  for (const auto& k : keys) {
    auto* ko = out.add_keys();
    ko->set_changed(true);
    if (k) FillEntry(*k, ko->mutable_entry_if_changed());
  }
  return out.SerializeAsString();
}

std::string EncodeWatchFrame(const std::vector<std::optional<Entry>>& keys) {
  const std::string payload = EncodeWatchOutput(keys);
  std::string frame(4, '\0');
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (size_t i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return frame + payload;
}

}  // namespace kvc::codec
