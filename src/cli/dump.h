// `kvconnect export` and `kvconnect import`: a database as a dump (service/admin/dump.h: one
// KvEntryJSON per line) on stdout, and a dump from stdin into a database.
//
// Two ways to reach the database:
// - `--url http://HOST:PORT` (with an admin token): through a running server's admin API
//   (POST /admin/v1/databases/{db}/export and .../import). The server writes through its own
//   engine, so versionstamps, watchers and its read cache stay right. A dump larger than one
//   request (--request-bytes, below the server's --max-body-bytes) goes in several requests,
//   numbered so errors name the dump's own line.
// - the storage (`--storage SPEC`, `--postgres CONNINFO`, or `--data-dir`, the default): export
//   reads the database at one snapshot with a storage reader, which is safe while a server runs
//   (SQLite WAL readers never block its writer; PostgreSQL readers neither). Import opens an
//   engine of its own under the storage's writer claim (storage::Storage::LockWriters): a SQLite
//   data directory has one writer, so import refuses, naming the server's pid, while `serve`
//   holds it; PostgreSQL has many writers and claims nothing, so import runs beside servers.
//
// Thread-safety: RunExport/RunImport are called from one thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "common/status.h"
#include "service/admin/dump.h"

namespace kvc::cli {

struct DumpConfig {
  std::string db = "default";  // name or id
  std::string prefix;          // key syntax or KvKeyJSON (codec/key_text.h); empty: every key
  // The storage when not --url (cli/flags.h StorageFlags): --storage SPEC, --data-dir DIR
  // (the default) or --postgres CONNINFO.
  std::string storage;
  std::string data_dir = "./kvconnect-data";
  std::string postgres;
  std::string url;    // through this server's admin API; empty: the data directory
  std::string token;  // --url: an admin token; empty: ResolveToken's fallbacks (flags.h)
  std::string ca_file;
  std::string file = "-";      // export: where to write; import: what to read ("-": stdout/stdin)
  std::string mode = "merge";  // import: merge | replace
  size_t batch_entries = 500;  // import: entries per atomic write
  size_t request_bytes = size_t{1} << 20;  // import --url: dump bytes per request at most
  size_t max_line_bytes = size_t{64} << 20;
  size_t export_page_entries = 1000;    // export --data-dir: entries read at a time (>= 1)
  int64_t connect_timeout_ms = 10000;   // --url
  int64_t request_timeout_ms = 600000;  // --url import: one request at most
  int64_t progress_lines = 100000;      // import: a progress line every this many lines...
  int64_t progress_ms = 5000;           // ...or this often, whichever first
  bool quiet = false;                   // no progress or summary on stderr
};

struct ExportSummary {
  int64_t entries = 0;
  int64_t bytes = 0;
  double seconds = 0;
  std::string versionstamp;  // of the snapshot
};

// Writes the dump of c.db (under c.prefix) to `out`. Errors: InvalidArgument (flags, prefix),
// NotFound (database, data directory), Unavailable (server unreachable), the server's answer,
// IoError (writing `out`), storage errors. A dump cut short is an error, never a success.
Result<ExportSummary> RunExport(const DumpConfig& c, std::ostream& out);

// Applies the dump read from `in` to c.db; progress lines go to `log` (unless c.quiet).
// Errors: as RunExport; Unavailable when a server holds the data directory; InvalidArgument
// "line N: ..." at a bad line, saying what was written before it.
Result<service::ImportStats> RunImport(const DumpConfig& c, std::istream& in, std::ostream& log);

// Registers the `export` and `import` commands.
void AddDumpCommands(CLI::App& app, DumpConfig* config);
// Runs the parsed `export` or `import` command; returns the process exit code.
int RunDump(CLI::App& app, const DumpConfig& config);

}  // namespace kvc::cli
