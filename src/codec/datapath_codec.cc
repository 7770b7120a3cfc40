#include "codec/datapath_codec.h"

#include <utility>

#include "codec/proto_parse.h"
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

std::string EncodeSnapshotReadOutput(const std::vector<std::vector<Entry>>& ranges, bool strong) {
  pb::SnapshotReadOutput out;
  for (const auto& r : ranges) {
    auto* ro = out.add_ranges();
    for (const Entry& e : r) FillEntry(e, ro->add_values());
  }
  out.set_read_disabled(false);
  out.set_read_is_strongly_consistent(strong);
  out.set_status(pb::SR_SUCCESS);
  return out.SerializeAsString();
}

std::string EncodeAtomicWriteOutput(const CommitResult& result) {
  pb::AtomicWriteOutput out;
  if (result.ok) {
    out.set_status(pb::AW_SUCCESS);
    Versionstamp vs = VersionToVersionstamp(result.version);
    out.set_versionstamp(reinterpret_cast<const char*>(vs.data()), vs.size());
  } else {
    out.set_status(pb::AW_CHECK_FAILURE);
    for (uint32_t i : result.failed_checks) out.add_failed_checks(i);
  }
  return out.SerializeAsString();
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
