// The KV data model shared by every layer: keys, values, read ranges, atomic writes and their
// results. Plain value types with no dependencies, so codec/, engine/ and storage/ can all
// speak them without depending on each other.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvc {

// On-disk `kv.v_encoding` values and wire `ValueEncoding` numbers. Do not renumber.
enum class ValueEncoding : int32_t { kV8 = 1, kLe64 = 2, kBytes = 3 };

inline bool IsKnownEncoding(int64_t e) { return e >= 1 && e <= 3; }

struct KvValue {
  std::string data;
  ValueEncoding encoding = ValueEncoding::kBytes;
};

// A stored entry as returned to readers. `version` is the commit version (the first 8 bytes of
// the versionstamp). `expire_at_ms` is when it expires (absolute Unix ms), -1 if never; the
// admin API and dumps show it, KV Connect has no field for it (a client never sees it there).
struct Entry {
  std::string key;
  std::string value;
  ValueEncoding encoding = ValueEncoding::kBytes;
  int64_t version = 0;
  int64_t expire_at_ms = -1;
};

// [start, end) in bytewise order; `limit` >= 1 rows; `reverse` returns the last `limit` rows
// in descending order.
struct ReadRange {
  std::string start;
  std::string end;
  int32_t limit = 1;
  bool reverse = false;
};

struct Check {
  std::string key;
  // Empty: the key must not exist. Otherwise exactly 10 bytes.
  std::string versionstamp;
};

// Do not renumber: equal to the wire MutationType numbers.
enum class MutationType : int32_t {
  kSet = 1,
  kDelete = 2,
  kSum = 3,
  kMax = 4,
  kMin = 5,
  kSetSuffixVersionstampedKey = 9,
};

struct Mutation {
  std::string key;
  MutationType type = MutationType::kSet;
  KvValue value;             // unused for kDelete
  int64_t expire_at_ms = 0;  // 0 or -1: never; > 0: absolute Unix ms
  std::string sum_min;       // V8-encoded bound, empty = none (kSum with V8 operands only)
  std::string sum_max;
  bool sum_clamp = false;
};

struct Enqueue {
  std::string payload;
  int64_t deadline_ms = 0;
  std::vector<std::string> keys_if_undelivered;
  std::vector<uint32_t> backoff_schedule;
  // An empty schedule means Deno's default unless given explicitly (the queue API's `[]`: no
  // retries; protobuf cannot tell the two apart).
  bool backoff_given = false;
};

struct AtomicWrite {
  std::vector<Check> checks;
  std::vector<Mutation> mutations;
  std::vector<Enqueue> enqueues;
};

struct CommitResult {
  bool ok = false;  // false: a check failed; nothing was applied
  int64_t version = 0;
  std::vector<uint32_t> failed_checks;
};

}  // namespace kvc
