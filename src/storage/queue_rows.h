// Queue rows beyond the ready message (QueueRow, commit_record.h): what kvconnect keeps to
// deliver messages (queue/queue.h). Deno's own tables hold the messages (`queue`: ready, due
// at ts; `queue_running`: leased until a deadline); kvconnect adds per-message delivery state
// and dead letters in tables of its own, which Deno ignores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/commit_record.h"

namespace kvc::storage {

// kvconnect's delivery state of a message (absent for one nobody delivered yet).
struct QueueDeliveryState {
  int32_t attempts = 0;    // deliveries so far
  std::string lease;       // the current delivery's token ("" when not leased by kvconnect)
  std::string last_error;  // why the last delivery failed
};

// A message and its delivery state; row.ts is the due time of a ready message and the
// deadline of a running one.
struct QueuedMessage {
  QueueRow row;
  QueueDeliveryState state;
};

// A message whose deliveries all failed.
struct DeadLetterRow {
  std::string id;
  std::string payload;
  std::vector<std::string> keys_if_undelivered;
  int32_t attempts = 0;
  std::string last_error;
  int64_t dead_at_ms = 0;
};

// A place in a queue table's (ts, id) order, to read it a page at a time
// (Reader::ScanQueueMessages): rows strictly after it. The default comes before every row.
struct QueueCursor {
  int64_t ts = INT64_MIN;
  std::string id;
};

struct QueueTableCounts {
  int64_t ready = 0;    // ts <= now
  int64_t delayed = 0;  // ts > now
  int64_t leased = 0;   // rows of the running table: delivered, not settled
  int64_t dead = 0;
};

}  // namespace kvc::storage
