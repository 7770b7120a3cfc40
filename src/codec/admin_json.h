// JSON of the admin API (/admin/v1): request bodies parsed into typed values after validation
// against their definition in schemas/admin-api.schema.json (embedded at build time), and the
// entry-shaped answers. Keys, values and entries use the JSON views of v8_json.h. The JSON of
// databases and tokens is written in service/ (admin_api.cc), next to their types.
//
// Every error is InvalidArgument with a text for the client that names the member at fault.
// Thread-safety: pure functions; schema documents are compiled once, thread-safely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/kv_types.h"
#include "storage/queue_rows.h"

namespace kvc::codec {

// Checks `json` against the definition called `definition` (e.g. "DatabaseList"). Used for the
// requests below and, in tests, for every answer. Errors: InvalidArgument (not JSON, not valid
// against the definition), Internal (no such definition).
Status ValidateAdminJson(std::string_view definition, std::string_view json);

// DatabaseCreateRequest and DatabaseRenameRequest.
struct AdminDatabaseRequest {
  std::string name;
};
Result<AdminDatabaseRequest> ParseAdminDatabaseRequest(std::string_view body);

// BackupRequest: where to store an online snapshot (a directory or s3://bucket/prefix), as
// given; empty when the body names none (or is empty): the server's default destination.
Result<std::string> ParseAdminBackupRequest(std::string_view body);

// TokenCreateRequest: exactly one of "database" (one), "databases" (a list) or
// "all_databases": true.
struct AdminTokenRequest {
  std::vector<std::string> databases;  // names or ids; empty when all_databases
  bool all_databases = false;
  std::string scope;
  std::string expires = "never";
  std::string name;
  double rate_limit = -1;  // < 0: the server's default
};
Result<AdminTokenRequest> ParseAdminTokenRequest(std::string_view body);

// Keys in requests are KvKeyJSON and may hold raw parts (v8_json.h: bytes as they are), so an
// operator can name, read and delete a key that is no Deno key.
//
// Keys [start, end) in the key encoding, chosen as Deno.Kv.list chooses them: a prefix alone
// is every key strictly under it; a prefix with start (or end) is bounded by that key inside
// the prefix; start and end without a prefix is that range.
struct AdminRange {
  std::string start;
  std::string end;
};

// ListRequest. A cursor (from an EntryList answer) narrows the range to what follows the last
// entry already seen, in the direction of the listing.
struct AdminListRequest {
  AdminRange range;
  int32_t limit = 100;
  bool reverse = false;
  bool raw = false;
};
Result<AdminListRequest> ParseAdminListRequest(std::string_view body);

// ChildrenRequest: the next key parts under `prefix` (encoded). `range` is what is strictly under
// it, narrowed by a cursor (an EntryChildren answer's: the key where the next page starts).
struct AdminChildrenRequest {
  std::string prefix;
  AdminRange range;
  int32_t limit = 100;
};
Result<AdminChildrenRequest> ParseAdminChildrenRequest(std::string_view body);

// GetRequest.
struct AdminGetRequest {
  std::string key;  // encoded
  bool raw = false;
};
Result<AdminGetRequest> ParseAdminGetRequest(std::string_view body);

// GetManyRequest: keys to read at one version, in the order given (at least one; how many at
// most is the engine's read-range limit, which the handler checks).
struct AdminGetManyRequest {
  std::vector<std::string> keys;  // encoded
  bool raw = false;
};
Result<AdminGetManyRequest> ParseAdminGetManyRequest(std::string_view body);

// A versionstamp check: the entry must have this versionstamp (10 bytes), or not exist (empty).
using AdminCheck = std::optional<std::string>;

// SetRequest. The value is encoded as Deno stores it (v8_json.h KvValueFromJson) with the V8
// format version `v8_format`. At most one of "expire_in" (ms from now) and "expires_at" (an
// RFC 3339 time, or null: never) is given; neither is never, as for Deno's set without expireIn.
// Errors: InvalidArgument also when both are given or expires_at is no RFC 3339 time.
struct AdminSetRequest {
  std::string key;
  KvValue value;
  AdminCheck check;
  int64_t expire_in_ms = 0;             // 0: not given
  std::optional<int64_t> expire_at_ms;  // absolute Unix ms; nullopt: not given, or null
};
Result<AdminSetRequest> ParseAdminSetRequest(std::string_view body, uint32_t v8_format);

// DeleteRequest.
struct AdminDeleteRequest {
  std::string key;
  AdminCheck check;
};
Result<AdminDeleteRequest> ParseAdminDeleteRequest(std::string_view body);

// RangeRequest (count, delete by prefix or range). An empty body or {} is every key.
struct AdminRangeRequest {
  AdminRange range;
  int32_t batch = 100;
};
Result<AdminRangeRequest> ParseAdminRangeRequest(std::string_view body);

// ExportRequest: a Selector (an empty body or {} is every key).
Result<AdminRange> ParseAdminExportRequest(std::string_view body);

// The keys strictly under the key `prefix_json` (a KvKeyJSON; [] is every key), as a Selector
// with only that prefix names them; `*encoded_prefix` (if given) gets the encoded prefix.
// Errors: as KeyBytesFromJson, prefixed with "'prefix': ".
Result<AdminRange> AdminPrefixRange(std::string_view prefix_json,
                                    std::string* encoded_prefix = nullptr);

// What an import wrote: the counts of the ImportResult answer, and of an ImportError's part
// written before the line at fault. The server's importer (service/admin/dump.h) counts them;
// clients read them back with ParseAdminImportAnswer.
struct ImportStats {
  int64_t entries = 0;    // entries written
  int64_t bytes = 0;      // dump bytes of the lines written
  int64_t batches = 0;    // atomic writes
  int64_t deleted = 0;    // kReplace: entries deleted first
  int64_t last_line = 0;  // the last line of the last batch written (0: none)
  int64_t skipped = 0;    // lines read whose entry had already expired (not written)
  double seconds = 0;     // from Start to the end
};

// The members `"entries":N,...,"seconds":S` of those answers, without braces.
std::string ImportStatsMembers(const ImportStats& stats);

// An ImportResult or ImportError answer (or any error answer), as a client reads it; members it
// lacks stay 0 or empty. Errors: InvalidArgument if `json` is not a JSON object.
struct AdminImportAnswer {
  ImportStats stats;
  int64_t line = 0;  // ImportError: the line at fault; 0 if none
  std::string error;
};
Result<AdminImportAnswer> ParseAdminImportAnswer(std::string_view json);

// WatchRequest: keys (encoded, in request order), or a prefix (encoded).
struct AdminWatchRequest {
  std::vector<std::string> keys;
  std::optional<std::string> prefix;
};
Result<AdminWatchRequest> ParseAdminWatchRequest(std::string_view body);

// The cursor that continues a listing after `last_key` (opaque to clients).
std::string AdminCursor(std::string_view last_key);

// A ListedEntry: KvEntryJSON, plus {"raw": {"encoding", "bytes"}} when `raw`. Every key has a
// view (a key that is no Deno key gets a raw part, v8_json.h), and so has every value a client
// can store. Errors: Corruption only for a KvU64 value that is not 8 bytes (the data path
// refuses those, so only damaged storage holds one).
Result<std::string> AdminEntryJson(const Entry& entry, bool raw);
// An EntryList: the entries, and the cursor after the last one when `more`, else null.
Result<std::string> AdminEntryListJson(const std::vector<Entry>& entries, bool more, bool raw);
// The client side of an EntryList answer to a listing with "raw": true (kvconnect migrate
// digests a server destination with it): each entry's key bytes, stored encoding and bytes
// (`version` is 0), and the cursor (empty: no more). Errors: InvalidArgument when the answer is
// not such an EntryList (an entry without its raw member, a bad key or base64).
struct AdminEntryListAnswer {
  std::vector<Entry> entries;
  std::string cursor;
};
Result<AdminEntryListAnswer> ParseAdminEntryListAnswer(std::string_view json);
// A dump line (KvEntryJSON and "\n") that the import API turns into exactly `entry`'s bytes: a
// V8 value in the {"type": "v8"} raw form (kept as stored, not rewritten from its JSON view),
// KvU64 and raw bytes in their usual forms, and its expires_at if it has one. Errors: as
// KvValueToJson (a kLe64 value that is not 8 bytes).
Result<std::string> AdminExactImportLine(const Entry& entry);

// One item of a WatchEvent: the entry, or the key with null value and versionstamp.
Result<std::string> AdminWatchItemJson(std::string_view key, const Entry* entry);

// Queue API (docs/queues.md; definitions Queue* of the schema).
inline constexpr int64_t kMaxQueueDelayMs = 30LL * 24 * 3600 * 1000;
// QueueEnqueueRequest: each message becomes an Enqueue due at now_ms + delay; values as
// KvValueFromJson with `v8_format` (a V8 value is required: Deno's queue carries V8 values).
Result<std::vector<Enqueue>> ParseQueueEnqueueRequest(std::string_view body, uint32_t v8_format,
                                                      int64_t now_ms);
struct QueuePullJson {
  int64_t max_messages = 1;
  int64_t visibility_ms = 0;  // 0: the server's default
  int64_t wait_ms = 20000;
  bool v8 = false;  // format "v8"
};
Result<QueuePullJson> ParseQueuePullRequest(std::string_view body);
struct QueueSettleJson {
  std::vector<std::string> leases;
  std::optional<int64_t> delay_ms;
  std::string error;
  int64_t visibility_ms = 0;
};
Result<QueueSettleJson> ParseQueueSettleRequest(std::string_view body);
struct QueueDeadListJson {
  int64_t limit = 100;
  std::string cursor;  // the last id of the previous page
};
Result<QueueDeadListJson> ParseQueueDeadListRequest(std::string_view body);
struct QueueDeadJson {
  std::vector<std::string> ids;
  bool all = false;
};
// Errors: InvalidArgument unless exactly one of ids and all (true) is given.
Result<QueueDeadJson> ParseQueueDeadRequest(std::string_view body);
// A message's V8 payload as a Value: its KvValueJSON, or with `v8` the {"type": "v8"} form.
Result<std::string> QueueValueJson(const std::string& payload, bool v8);

// The client side of the queue's admin answers, as `kvconnect queue` reads them for people:
// QueueCounts (or the {"count"} of requeue and purge), and a page of dead letters (values and
// keys kept as their JSON text). Members an answer lacks stay 0 or empty. Errors:
// InvalidArgument if `json` is not such a JSON object.
struct QueueCountsAnswer {
  storage::QueueTableCounts counts;
  int64_t undelivered = 0;
  int64_t count = 0;  // requeue, purge
};
Result<QueueCountsAnswer> ParseQueueCountsAnswer(std::string_view json);
// The QueueCounts answer that ParseQueueCountsAnswer reads.
std::string QueueCountsJson(const storage::QueueTableCounts& counts, int64_t undelivered);
struct QueueDeadLetterAnswer {
  std::string id;
  std::string value_json;
  std::vector<std::string> keys_json;  // keys_if_undelivered
  int64_t attempts = 0;
  std::string last_error;
  int64_t dead_at_ms = 0;
};
struct QueueDeadListAnswer {
  std::vector<QueueDeadLetterAnswer> dead_letters;
  std::string cursor;  // empty: no more
};
Result<QueueDeadListAnswer> ParseQueueDeadListAnswer(std::string_view json);

}  // namespace kvc::codec
