#include "engine/limits.h"

namespace kvc::engine {
namespace {
const char kKeyTooLarge[] = "A key exceeds the key size limit.";
const char kValueTooLarge[] = "A value exceeds the value size limit.";
}  // namespace

Status ValidateSnapshotRead(const std::vector<ReadRange>& ranges, const Limits& limits) {
  if (ranges.size() > limits.max_read_ranges) {
    return InvalidArgument("Too many read ranges requested in one read request.");
  }
  size_t total = 0;
  for (const ReadRange& r : ranges) {
    if (r.limit <= 0) {
      return InvalidArgument("The read range limit of the snapshot read request is invalid.");
    }
    if (r.start.size() > limits.max_read_key_bytes || r.end.size() > limits.max_read_key_bytes) {
      return InvalidArgument(kKeyTooLarge);
    }
    total += static_cast<size_t>(r.limit);
  }
  if (total > limits.max_read_entries) {
    return InvalidArgument(
        "The total number of entries requested across read ranges in the read request is too "
        "large.");
  }
  return Status::Ok();
}

size_t AtomicWriteBytes(const AtomicWrite& w) {
  size_t total = 0;
  for (const Check& c : w.checks) total += c.key.size();
  for (const Mutation& m : w.mutations) total += m.key.size() + m.value.data.size();
  for (const Enqueue& e : w.enqueues) {
    for (const std::string& k : e.keys_if_undelivered) total += k.size();
    total += e.payload.size() + 4 * e.backoff_schedule.size();
  }
  return total;
}

Status ValidateAtomicWrite(const AtomicWrite& w, const Limits& limits, int64_t now_ms) {
  if (w.checks.size() > limits.max_checks) {
    return InvalidArgument("Too many checks included in atomic write.");
  }
  if (w.mutations.size() + w.enqueues.size() > limits.max_mutations) {
    return InvalidArgument("Too many mutations / enqueues included in atomic write.");
  }
  for (const Check& c : w.checks) {
    if (c.key.size() > limits.max_read_key_bytes) return InvalidArgument(kKeyTooLarge);
    if (!c.versionstamp.empty() && c.versionstamp.size() != 10) {
      return InvalidArgument("Invalid versionstamp.");
    }
  }
  for (const Mutation& m : w.mutations) {
    if (m.key.empty()) return InvalidArgument("Keys must not be empty.");
    if (m.key.size() > limits.max_write_key_bytes) return InvalidArgument(kKeyTooLarge);
    if (m.type != MutationType::kDelete && m.value.data.size() > limits.max_value_bytes) {
      return InvalidArgument(kValueTooLarge);
    }
    if (m.expire_at_ms < -1) return InvalidArgument("Invalid mutation expire at.");
  }
  for (const Enqueue& e : w.enqueues) {
    if (e.payload.size() > limits.max_value_bytes) return InvalidArgument(kValueTooLarge);
    if (e.deadline_ms < 0 || now_ms - e.deadline_ms > limits.max_queue_delay_ms) {
      return InvalidArgument("Invalid mutation enqueue deadline.");
    }
    if (e.keys_if_undelivered.size() > limits.max_queue_undelivered_keys) {
      return InvalidArgument("Too many dead letter keys for a single queue message.");
    }
    for (const std::string& k : e.keys_if_undelivered) {
      if (k.size() > limits.max_write_key_bytes) return InvalidArgument(kKeyTooLarge);
    }
    if (e.backoff_schedule.size() > limits.max_queue_backoff_intervals) {
      return InvalidArgument("Too many backoff intervals for a single queue message.");
    }
    for (uint32_t b : e.backoff_schedule) {
      if (b > limits.max_queue_backoff_ms) {
        return InvalidArgument("A backoff interval exceeds the maximum allowed backoff interval.");
      }
    }
  }
  if (AtomicWriteBytes(w) > limits.max_total_mutation_bytes) {
    return InvalidArgument("The total size of the atomic write is too large.");
  }
  return Status::Ok();
}

Status ValidateWatch(const std::vector<std::string>& keys, const Limits& limits) {
  // A watch of nothing would hold a stream (and a subscription) open that never sends a
  // change: refused, as a request that cannot mean anything.
  if (keys.empty()) return InvalidArgument("A watch request needs at least one key.");
  if (keys.size() > limits.max_watched_keys) {
    return InvalidArgument("Too many keys watched in a single watch request.");
  }
  for (const std::string& k : keys) {
    if (k.size() > limits.max_write_key_bytes) return InvalidArgument(kKeyTooLarge);
  }
  return Status::Ok();
}

}  // namespace kvc::engine
