// The value semantics of sum/min/max mutations (KvU64 wrapping arithmetic and V8 Number/BigInt
// sums with optional bounds), as pure functions over the existing row, so the writer, the
// differential tests and any future backend share one definition.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>

#include "common/status.h"
#include "storage/backend.h"
#include "storage/kv_types.h"

namespace kvc::engine {

// Returns the row that a kSum/kMin/kMax mutation stores over `existing` (nullopt when the key is
// absent or expired). The result carries `version` and never expires.
// Errors: InvalidArgument with the reference texts (type mismatches, out-of-range sums).
// REQUIRES: m.type is kSum, kMin or kMax.
Result<storage::StoredRow> ApplyNumericMutation(const Mutation& m,
                                                const std::optional<storage::StoredRow>& existing,
                                                int64_t version);

}  // namespace kvc::engine
