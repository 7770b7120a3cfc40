// Dumps: the format of `export` and `import`, and applying a dump to a database.
//
// A dump is NDJSON: one KvEntryJSON (codec/v8/v8_json.h: key, value, versionstamp) per line, in
// key order, the form @deno/kv-utils and kv-toolbox read and write. Import applies the lines
// through Engine::Write in atomic batches, so checks of concurrent writers, versionstamps,
// watchers and the read cache behave as for any KV Connect write; each imported entry gets the
// versionstamp of its batch's commit (a KV Connect write cannot choose one), so the dump's
// versionstamps are not kept. Values keep their encodings (V8, KvU64 as le64, raw bytes). An
// entry that expires carries "expires_at" (v8_json.h) and keeps that expiry when imported; one
// whose expiry has passed by the time its line is read is skipped (and counted). A line without
// "expires_at" (as dumps of older versions and of other tools have) never expires.
//
// Thread-safety: DumpLine is a pure function; a DumpBatcher or DumpReader is used by one
// thread at a time; BulkImport runs one step at a time (see Start).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/admin_json.h"
#include "common/status.h"
#include "engine/engine.h"
#include "engine/limits.h"
#include "storage/kv_types.h"

namespace kvc::service {

// The dump line of `entry`: its KvEntryJSON and "\n". Errors: those of codec::EntryToJson
// (a stored key that does not decode).
Result<std::string> DumpLine(const Entry& entry);

// Where the lines of a dump come from.
class DumpReader {
 public:
  virtual ~DumpReader() = default;
  // The next line without its "\n" (or "\r\n"), or nullopt at the end; the view is valid until
  // the next call. Errors: InvalidArgument (a line over the reader's cap), IoError.
  virtual Result<std::optional<std::string_view>> Next() = 0;
};

// Lines of `text`, which the reader owns.
std::unique_ptr<DumpReader> StringDumpReader(std::string text);
// Lines read from `in` (borrowed; must outlive the reader), each at most `max_line_bytes`.
std::unique_ptr<DumpReader> StreamDumpReader(std::istream* in, size_t max_line_bytes);

struct DumpBatchOptions {
  size_t max_entries = 500;            // per atomic write (the engine's max_mutations caps it)
  size_t max_bytes = size_t{1} << 19;  // keys + values per write (capped the same way)
  std::string prefix;       // encoded key; not empty: every key must be strictly under it
  uint32_t v8_format = 15;  // for values given as V8 JSON views
};

// Consecutive dump lines as one atomic write, one set per entry.
struct DumpBatch {
  AtomicWrite write;
  int64_t entries = 0;
  int64_t first_line = 0;
  int64_t last_line = 0;
  int64_t bytes = 0;  // dump bytes of its lines, newlines included
};

// Parses dump lines into batches that the engine accepts: a batch is closed when it holds
// max_entries, or when one more entry would take it over max_bytes.
class DumpBatcher {
 public:
  DumpBatcher(const DumpBatchOptions& options, const engine::Limits& limits);

  // Parses `line` (line number `line_no`) into the open batch; a blank line is skipped, and so
  // is an entry that expires at or before `now_ms` (counted in skipped_expired()). Errors:
  // InvalidArgument "line N: ..." (not a KvEntryJSON, a key not under the prefix, a key or
  // value over the engine's limits); nothing is added then.
  Status Add(std::string_view line, int64_t line_no, int64_t now_ms);
  // Closes the open batch (end of input).
  void Finish();
  bool has_ready() const { return !ready_.empty(); }
  // The oldest closed batch. REQUIRES: has_ready().
  DumpBatch TakeReady();
  // Lines skipped so far because their entry had already expired.
  int64_t skipped_expired() const { return skipped_expired_; }

 private:
  void Close();

  const DumpBatchOptions options_;
  const engine::Limits limits_;
  const size_t max_entries_;
  const size_t max_bytes_;
  DumpBatch open_;
  size_t open_bytes_ = 0;  // keys + values of open_
  std::vector<DumpBatch> ready_;
  int64_t skipped_expired_ = 0;
};

enum class ImportMode { kMerge, kReplace };

struct ImportOptions {
  // kReplace deletes every entry in range (in batches) once the first batch has parsed (so a
  // file that is not a dump deletes nothing), then imports.
  ImportMode mode = ImportMode::kMerge;
  DumpBatchOptions batch;
  // kReplace: the encoded range deleted first, [start, end); by default every key.
  std::string replace_start = std::string(1, '\x00');
  std::string replace_end = std::string(1, '\xff');
  int32_t delete_batch = 500;
  int64_t first_line = 1;  // the number of the reader's first line (a dump sent in pieces)
};

using ImportStats = codec::ImportStats;  // the counts the import answers report

struct ImportOutcome {
  Status status;  // OK, or why it stopped (the text says what was written)
  ImportStats stats;
  int64_t bad_line = 0;  // the line it stopped at, when a line was at fault
};

// One import: reads lines, writes each batch through the engine after the previous one was
// committed, stops at the first error. Only whole batches are ever written: at a bad line,
// nothing of its batch is, and every batch before it is.
// Ownership: keeps itself (and the engine) alive until `done` has run.
class BulkImport : public std::enable_shared_from_this<BulkImport> {
 public:
  // Runs `work` later, off the engine's threads (the API's worker); or inline, where blocking
  // an engine thread is acceptable (an offline import owns its engine). Errors: the runner's
  // refusal, which ends the import.
  using Runner = std::function<Status(std::function<void()>)>;
  using Progress = std::function<void(const ImportStats&)>;
  using Done = std::function<void(ImportOutcome)>;

  // Starts the import; the first lines are read on the calling thread, later ones through
  // `run`. `progress` (may be empty) runs after each batch is committed, on an engine thread;
  // `done` runs exactly once, on any thread.
  static void Start(std::shared_ptr<engine::Engine> engine, ImportOptions options,
                    std::unique_ptr<DumpReader> reader, Runner run, Progress progress, Done done);

 private:
  BulkImport(std::shared_ptr<engine::Engine> engine, ImportOptions options,
             std::unique_ptr<DumpReader> reader, Runner run, Progress progress, Done done);

  void Step();                                 // reads until a batch is closed or the input ends
  void ClearThen(std::function<void()> next);  // kReplace: deletes the range once
  void WriteBatch();
  void Fail(const Status& status, int64_t bad_line);
  void Finish(Status status, int64_t bad_line);

  const std::shared_ptr<engine::Engine> engine_;
  const ImportOptions options_;
  std::unique_ptr<DumpReader> reader_;
  const Runner run_;
  const Progress progress_;
  Done done_;
  DumpBatcher batcher_;
  ImportStats stats_;
  int64_t next_line_;
  bool input_done_ = false;
  bool cleared_ = false;
  DumpBatch pending_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

struct DeleteRangeResult {
  int64_t deleted = 0;
  int64_t batches = 0;
};

// Deletes every entry of [start, end) in atomic writes of at most `batch` deletions (each
// reading its keys first, so entries written meanwhile may be deleted too), then calls `done`
// once, on an engine thread (or inline on a refusal). Errors: the engine's; what was deleted
// before an error stays deleted.
void DeleteRangeInBatches(std::shared_ptr<engine::Engine> engine, std::string start,
                          std::string end, int32_t batch,
                          std::function<void(Result<DeleteRangeResult>)> done);

}  // namespace kvc::service
