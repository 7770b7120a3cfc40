// The admin API's request parsers (JSON, schema validation, keys and values in their JSON
// views, selectors and cursors) on untrusted bytes. Whatever parses must hold its invariants:
// a range never runs backwards, a check is empty or 10 bytes, a parsed value re-encodes.
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
  return 0;
}
