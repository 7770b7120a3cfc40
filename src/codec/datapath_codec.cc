#include "codec/datapath_codec.h"

#include <cstdint>
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

namespace {

// One field as FastWireReader::Next reads it.
struct FastField {
  uint8_t tag = 0;         // field number << 3 | wire type
  std::string_view bytes;  // a length-delimited field's bytes
  uint64_t value = 0;      // a varint field's value
};

// Reads the protobuf wire format of the messages as clients write them, without building the
// library's message objects. It gives up (returns false) on anything else: a tag it does not
// expect (unknown fields, other wire types, tags written in more bytes than needed), a varint
// past 64 bits, a length past the end. The caller then parses with the protobuf library, so
// every answer is the library's: this reader only takes the common shape faster.
class FastWireReader {
 public:
  explicit FastWireReader(std::string_view in) : in_(in) {}
  bool done() const { return pos_ == in_.size(); }
  // A tag that fits in one byte (fields 1 to 15).
  bool Tag(uint8_t* tag) {
    if (pos_ == in_.size() || (static_cast<uint8_t>(in_[pos_]) & 0x80) != 0) return false;
    *tag = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  // A varint in its shortest form (as every encoder writes it) of at most 64 bits.
  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int i = 0; i < 10 && pos_ < in_.size(); ++i) {
      const auto b = static_cast<uint8_t>(in_[pos_++]);
      if (i == 9 && b > 1) return false;  // bits past 64
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        if (i > 0 && b == 0) return false;  // a longer form than needed
        *out = v;
        return true;
      }
    }
    return false;
  }
  // The next field, if its tag fits in one byte and it is a varint or length-delimited.
  bool Next(FastField* f) {
    if (!Tag(&f->tag)) return false;
    switch (f->tag & 7) {
      case 0:
        return Varint(&f->value);
      case 2:
        return Bytes(&f->bytes);
      default:
        return false;
    }
  }
  bool Bytes(std::string_view* out) {
    uint64_t n = 0;
    if (!Varint(&n) || n > INT32_MAX || n > in_.size() - pos_) return false;
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// Calls on_field for each field of `bytes` while it returns true; false if it did not, or if a
// field is not one FastWireReader reads.
template <typename OnField>
bool ForEachField(std::string_view bytes, OnField on_field) {
  FastWireReader in(bytes);
  FastField f;
  while (!in.done()) {
    if (!in.Next(&f) || !on_field(f)) return false;
  }
  return true;
}

// One-byte tags: field number << 3 | wire type (0 varint, 2 length-delimited).
constexpr uint8_t kTagLen1 = 0x0a;
constexpr uint8_t kTagLen2 = 0x12;
constexpr uint8_t kTagVarint2 = 0x10;
constexpr uint8_t kTagVarint3 = 0x18;
constexpr uint8_t kTagVarint4 = 0x20;
constexpr uint8_t kTagLen5 = 0x2a;
constexpr uint8_t kTagLen6 = 0x32;
constexpr uint8_t kTagVarint7 = 0x38;

// int32 and enum fields keep the low 32 bits of their varint, as the library reads them.
int32_t WireInt32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// A field given more than once: the last one counts (a message field merges, see FastReadValue).
bool FastReadRange(std::string_view bytes, ReadRange* r) {
  r->limit = 0;  // the wire's default, as the library reads an absent limit
  return ForEachField(bytes, [r](const FastField& f) {
    switch (f.tag) {
      case kTagLen1:
        r->start.assign(f.bytes);
        return true;
      case kTagLen2:
        r->end.assign(f.bytes);
        return true;
      case kTagVarint3:
        r->limit = WireInt32(f.value);
        return true;
      case kTagVarint4:
        r->reverse = f.value != 0;
        return true;
      default:
        return false;
    }
  });
}

}  // namespace

bool DecodeSnapshotReadFast(std::string_view body, std::vector<ReadRange>* out) {
  out->clear();
  return ForEachField(body, [out](const FastField& f) {
    return f.tag == kTagLen1 && FastReadRange(f.bytes, &out->emplace_back());
  });
}

Result<std::vector<ReadRange>> DecodeSnapshotRead(std::string_view body) {
  std::vector<ReadRange> fast;
  if (DecodeSnapshotReadFast(body, &fast)) return fast;
  return DecodeSnapshotReadWithLibrary(body);
}

Result<std::vector<ReadRange>> DecodeSnapshotReadWithLibrary(std::string_view body) {
  pb::SnapshotRead msg;
  if (!ParseMessage(body, &msg)) return Invalid("could not decode a SnapshotRead message");
  std::vector<ReadRange> out;
  out.reserve(static_cast<size_t>(msg.ranges_size()));
  for (const auto& r : msg.ranges()) {
    out.push_back(ReadRange{r.start(), r.end(), r.limit(), r.reverse()});
  }
  return out;
}

namespace {

// The fields of one Mutation as the wire has them, before they are checked (FinishMutations).
struct WireMutation {
  Mutation m;  // key, value.data, expire_at_ms and the sum fields
  int32_t type = 0;
  bool has_value = false;
  int32_t encoding = 0;
};

// Checks kinds, encodings and KvU64 sizes in wire order (the first problem is the answer).
Status FinishMutations(std::vector<WireMutation>& wire, std::vector<Mutation>* out) {
  out->reserve(wire.size());
  for (WireMutation& w : wire) {
    KVC_ASSIGN_OR_RETURN(w.m.type, ToMutationType(static_cast<pb::MutationType>(w.type)));
    if (w.m.type == MutationType::kDelete) {
      w.m.value = KvValue{};
    } else {
      if (!w.has_value) return InvalidArgument("Invalid mutation kind or arguments.");
      KVC_ASSIGN_OR_RETURN(w.m.value.encoding, ToEncoding(w.encoding));
      if (w.m.value.encoding == ValueEncoding::kLe64 && w.m.value.data.size() != 8) {
        return InvalidArgument("A KvU64 value must be exactly 8 bytes.");
      }
    }
    out->push_back(std::move(w.m));
  }
  return Status::Ok();
}

bool FastReadCheck(std::string_view bytes, Check* c) {
  return ForEachField(bytes, [c](const FastField& f) {
    if (f.tag != kTagLen1 && f.tag != kTagLen2) return false;
    (f.tag == kTagLen1 ? c->key : c->versionstamp).assign(f.bytes);
    return true;
  });
}

// Reads into `w`, keeping what earlier occurrences set: a value field that appears more than
// once is merged, as the library merges a singular message field.
bool FastReadValue(std::string_view bytes, WireMutation* w) {
  w->has_value = true;
  return ForEachField(bytes, [w](const FastField& f) {
    if (f.tag == kTagLen1) {
      w->m.value.data.assign(f.bytes);
    } else if (f.tag == kTagVarint2) {
      w->encoding = WireInt32(f.value);
    } else {
      return false;
    }
    return true;
  });
}

bool FastReadMutation(std::string_view bytes, WireMutation* w) {
  return ForEachField(bytes, [w](const FastField& f) {
    switch (f.tag) {
      case kTagLen1:
        w->m.key.assign(f.bytes);
        return true;
      case kTagLen2:
        return FastReadValue(f.bytes, w);
      case kTagVarint3:
        w->type = WireInt32(f.value);
        return true;
      case kTagVarint4:
        w->m.expire_at_ms = static_cast<int64_t>(f.value);
        return true;
      case kTagLen5:
        w->m.sum_min.assign(f.bytes);
        return true;
      case kTagLen6:
        w->m.sum_max.assign(f.bytes);
        return true;
      case kTagVarint7:
        w->m.sum_clamp = f.value != 0;
        return true;
      default:
        return false;
    }
  });
}

}  // namespace

std::optional<Result<AtomicWrite>> DecodeAtomicWriteFast(std::string_view body) {
  AtomicWrite w;
  std::vector<WireMutation> wire;
  const bool read = ForEachField(body, [&w, &wire](const FastField& f) {
    if (f.tag == kTagLen1) return FastReadCheck(f.bytes, &w.checks.emplace_back());
    if (f.tag == kTagLen2) return FastReadMutation(f.bytes, &wire.emplace_back());
    return false;  // enqueues, unknown fields: the library's
  });
  if (!read) return std::nullopt;
  if (Status s = FinishMutations(wire, &w.mutations); !s.ok()) return Result<AtomicWrite>(s);
  return Result<AtomicWrite>(std::move(w));
}

Result<AtomicWrite> DecodeAtomicWrite(std::string_view body) {
  if (std::optional<Result<AtomicWrite>> fast = DecodeAtomicWriteFast(body)) {
    return std::move(*fast);
  }
  return DecodeAtomicWriteWithLibrary(body);
}

Result<AtomicWrite> DecodeAtomicWriteWithLibrary(std::string_view body) {
  pb::AtomicWrite msg;
  if (!ParseMessage(body, &msg)) return Invalid("could not decode an AtomicWrite message");
  AtomicWrite w;
  w.checks.reserve(static_cast<size_t>(msg.checks_size()));
  for (const auto& c : msg.checks()) w.checks.push_back(Check{c.key(), c.versionstamp()});
  std::vector<WireMutation> wire(static_cast<size_t>(msg.mutations_size()));
  for (int i = 0; i < msg.mutations_size(); ++i) {
    const pb::Mutation& m = msg.mutations(i);
    WireMutation& out = wire[static_cast<size_t>(i)];
    out.m.key = m.key();
    out.m.expire_at_ms = m.expire_at_ms();
    out.m.sum_min = m.sum_min();
    out.m.sum_max = m.sum_max();
    out.m.sum_clamp = m.sum_clamp();
    out.type = m.mutation_type();
    out.has_value = m.has_value();
    if (out.has_value) {
      out.encoding = m.value().encoding();
      out.m.value.data = m.value().data();
    }
  }
  KVC_RETURN_IF_ERROR(FinishMutations(wire, &w.mutations));
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
