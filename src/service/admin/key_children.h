// ListKeyChildren: the distinct next key parts under a prefix, with how many entries lie under
// each: the "folders" of the console's entries page (POST .../entries/children).
//
// Keys are encoded so that every key starting with prefix + part lies in
// [prefix + enc(part), prefix + enc(part) + 0xff) (parts are self-delimiting and no part starts
// with 0xff). So the walk reads rows in pages; a part whose count reaches the cap is not read
// to its end: the walk jumps past its range and reports the count as capped ("1000+"). The
// rows read per request are bounded too (`max_scan_rows`): when the budget runs out the part
// being counted is reported capped and the cursor continues after it. A request therefore
// reads at most about max_scan_rows + limit rows, whatever the database holds.
//
// Reads are pages of their own snapshots: writes between them may or may not be seen.
// A key that is no Deno key past the prefix (v8_json.h raw parts) is one child of its own: its
// remaining bytes.
//
// Ownership: the walk holds the engine until `done` has run.
// Thread-safety: the function may be called from any thread; `done` runs on an engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "storage/kv_types.h"

namespace kvc::service {

struct KeyChildrenOptions {
  // Counts stop here: a part with this many entries or more is reported capped.
  int64_t count_cap = 1000;
  // Rows read per request, over all parts; then the answer is cut short (with a cursor).
  int64_t max_scan_rows = 20000;
  // Rows per engine read (capped by the engine's max_read_entries).
  int32_t read_page = 1000;
};

// One next key part.
struct KeyChild {
  std::string part;            // the encoded part (or, for a raw child, the remaining bytes)
  bool raw = false;            // `part` is no Deno key part
  int64_t count = 0;           // entries whose key starts with prefix + part (at least, if capped)
  bool capped = false;         // the count is a lower bound
  std::optional<Entry> entry;  // the entry whose key is exactly prefix + part, if any
};

struct KeyChildrenResult {
  std::vector<KeyChild> children;
  std::string next_start;  // where the next page starts (a key); empty: no more
};

// Lists the children of the encoded `prefix` among keys in [start, end) (a range strictly under
// the prefix; `start` is where a previous page stopped), at most `limit` of them.
// Errors: those of the engine's reads. REQUIRES: limit >= 1; every key in [start, end) starts
// with `prefix`.
void ListKeyChildren(std::shared_ptr<engine::Engine> engine, std::string prefix, std::string start,
                     std::string end, int32_t limit, const KeyChildrenOptions& options,
                     std::function<void(Result<KeyChildrenResult>)> done);

// The next part of `key` after the first `prefix_size` bytes: its encoded bytes, and whether
// they are no Deno key part (then they are all the remaining bytes). Pure.
std::string NextKeyPart(std::string_view key, size_t prefix_size, bool* raw);

}  // namespace kvc::service
