// Feeds untrusted bytes to every data-path decoder, the request validation that follows, and
// the sum/min/max semantics over arbitrary stored values; the hand-written snapshot-read and
// atomic-write readers are checked against the protobuf library's reading of the same bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "codec/datapath_codec.h"
#include "engine/limits.h"
#include "engine/mutation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  kvc::engine::Limits limits;
  if (auto r = kvc::codec::DecodeSnapshotRead(in); r.ok()) {
    (void)kvc::engine::ValidateSnapshotRead(*r, limits);
  }
  // The hand reader of snapshot reads either gives up or reads what the protobuf library reads.
  std::vector<kvc::ReadRange> fast;
  if (kvc::codec::DecodeSnapshotReadFast(in, &fast)) {
    auto lib = kvc::codec::DecodeSnapshotReadWithLibrary(in);
    if (!lib.ok() || lib->size() != fast.size()) __builtin_trap();
    for (size_t i = 0; i < fast.size(); ++i) {
      const kvc::ReadRange& a = fast[i];
      const kvc::ReadRange& b = (*lib)[i];
      if (a.start != b.start || a.end != b.end || a.limit != b.limit || a.reverse != b.reverse) {
        __builtin_trap();
      }
    }
  }
  // Likewise the hand reader of atomic writes: the same write or the same error.
  if (auto fast = kvc::codec::DecodeAtomicWriteFast(in)) {
    auto lib = kvc::codec::DecodeAtomicWriteWithLibrary(in);
    if (fast->ok() != lib.ok()) __builtin_trap();
    if (!lib.ok() && fast->status().ToString() != lib.status().ToString()) __builtin_trap();
    if (lib.ok()) {
      const kvc::AtomicWrite& a = **fast;
      const kvc::AtomicWrite& b = *lib;
      if (a.checks.size() != b.checks.size() || a.mutations.size() != b.mutations.size() ||
          !a.enqueues.empty() || !b.enqueues.empty()) {
        __builtin_trap();
      }
      for (size_t i = 0; i < a.checks.size(); ++i) {
        if (a.checks[i].key != b.checks[i].key ||
            a.checks[i].versionstamp != b.checks[i].versionstamp) {
          __builtin_trap();
        }
      }
      for (size_t i = 0; i < a.mutations.size(); ++i) {
        const kvc::Mutation& x = a.mutations[i];
        const kvc::Mutation& y = b.mutations[i];
        if (x.key != y.key || x.type != y.type || x.value.data != y.value.data ||
            x.value.encoding != y.value.encoding || x.expire_at_ms != y.expire_at_ms ||
            x.sum_min != y.sum_min || x.sum_max != y.sum_max || x.sum_clamp != y.sum_clamp) {
          __builtin_trap();
        }
      }
    }
  }
  if (auto w = kvc::codec::DecodeAtomicWrite(in); w.ok()) {
    (void)kvc::engine::ValidateAtomicWrite(*w, limits, 0);
    // Apply each numeric mutation over every other mutation's value as the "stored" row.
    for (const auto& m : w->mutations) {
      if (m.type != kvc::MutationType::kSum && m.type != kvc::MutationType::kMin &&
          m.type != kvc::MutationType::kMax) {
        continue;
      }
      (void)kvc::engine::ApplyNumericMutation(m, std::nullopt, 1);
      for (const auto& other : w->mutations) {
        kvc::storage::StoredRow row{other.value.data, other.value.encoding, 1, -1};
        (void)kvc::engine::ApplyNumericMutation(m, row, 2);
      }
    }
  }
  if (auto k = kvc::codec::DecodeWatch(in); k.ok()) {
    (void)kvc::engine::ValidateWatch(*k, limits);
  }
  return 0;
}
