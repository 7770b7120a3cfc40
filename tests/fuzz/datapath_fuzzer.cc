// Feeds untrusted bytes to every data-path decoder, the request validation that follows, and
// the sum/min/max semantics over arbitrary stored values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "codec/datapath_codec.h"
#include "engine/limits.h"
#include "engine/mutation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  kvc::engine::Limits limits;
  if (auto r = kvc::codec::DecodeSnapshotRead(in); r.ok()) {
    (void)kvc::engine::ValidateSnapshotRead(*r, limits);
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
