// Request limits and their validation, with the exact client-visible error texts of the
// KV Connect reference. Defaults follow the reference; `--max-checks` and `--max-mutations`
// (or the config file) override two of them.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/kv_types.h"

namespace kvc::engine {

struct Limits {
  size_t max_read_ranges = 10;
  size_t max_read_entries = 1000;
  size_t max_read_key_bytes = 2049;
  size_t max_write_key_bytes = 2048;
  size_t max_value_bytes = 65536;
  // Deno's client sends up to 100 checks; the reference server's 10 breaks such writes.
  size_t max_checks = 100;
  size_t max_mutations = 1000;  // mutations + enqueues
  size_t max_total_mutation_bytes = 819200;
  size_t max_watched_keys = 10;
  size_t max_queue_undelivered_keys = 10;
  size_t max_queue_backoff_intervals = 10;
  uint32_t max_queue_backoff_ms = 3600000;
  int64_t max_queue_delay_ms = 30LL * 24 * 3600 * 1000;
};

// The backoff schedule of an enqueue that names none (Deno's default), in ms.
inline const std::vector<uint32_t> kDefaultBackoffSchedule = {100, 1000, 5000, 30000, 60000};

// Returns InvalidArgument with the reference text for the first violated limit.
Status ValidateSnapshotRead(const std::vector<ReadRange>& ranges, const Limits& limits);
// The bytes of `write` as counted against max_total_mutation_bytes: check keys, mutation keys
// and values, enqueue payloads, their keys_if_undelivered and 4 per backoff interval.
size_t AtomicWriteBytes(const AtomicWrite& write);
// REQUIRES: mutation kinds and value encodings were already decoded (codec/).
Status ValidateAtomicWrite(const AtomicWrite& write, const Limits& limits, int64_t now_ms);
// Also refuses a watch of no keys (ours: the reference has no text for it).
Status ValidateWatch(const std::vector<std::string>& keys, const Limits& limits);

}  // namespace kvc::engine
