// The admin API's request parsers (JSON, schema validation, keys and values in their JSON
// views, selectors and cursors) on untrusted bytes. Whatever parses must hold its invariants:
// a range never runs backwards, a check is empty or 10 bytes, a parsed value re-encodes. The
// queue API's requests (docs/queues.md) too: delays within 0..30 days, bounded lists.
#include <cstdlib>
#include <string_view>

#include "codec/admin_json.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvc::codec;  // NOLINT(google-build-using-namespace)
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)ParseAdminDatabaseRequest(in);
  (void)ParseAdminTokenRequest(in);
  (void)ParseAdminGetRequest(in);
  if (auto many = ParseAdminGetManyRequest(in); many.ok()) Require(!many->keys.empty());
  (void)ParseAdminWatchRequest(in);
  if (auto list = ParseAdminListRequest(in); list.ok()) {
    Require(list->range.start <= list->range.end);
    Require(list->limit >= 1 && list->limit <= 1000);
  }
  if (auto range = ParseAdminRangeRequest(in); range.ok()) {
    Require(range->range.start <= range->range.end);
  }
  if (auto set = ParseAdminSetRequest(in, 15); set.ok()) {
    Require(!set->check || set->check->empty() || set->check->size() == 10);
  }
  if (auto del = ParseAdminDeleteRequest(in); del.ok()) {
    Require(!del->check || del->check->empty() || del->check->size() == 10);
  }
  if (auto enq = ParseQueueEnqueueRequest(in, 15, 1'000'000); enq.ok()) {
    Require(!enq->empty() && enq->size() <= 1000);
    for (const kvc::Enqueue& e : *enq) {
      Require(e.deadline_ms >= 1'000'000 && e.deadline_ms - 1'000'000 <= kMaxQueueDelayMs);
      Require(!e.payload.empty() && static_cast<uint8_t>(e.payload[0]) == 0xff);
    }
  }
  if (auto pull = ParseQueuePullRequest(in); pull.ok()) {
    Require(pull->max_messages >= 1 && pull->wait_ms >= 0);
  }
  if (auto settle = ParseQueueSettleRequest(in); settle.ok()) {
    Require(!settle->leases.empty() && settle->leases.size() <= 100);
    Require(!settle->delay_ms || *settle->delay_ms >= 0);
  }
  (void)ParseQueueDeadListRequest(in);
  if (auto dead = ParseQueueDeadRequest(in); dead.ok()) {
    Require(!(dead->all && !dead->ids.empty()));  // one of the two ways, never both
  }
  return 0;
}
