// `kvconnect migrate --from SPEC --to SPEC (--db NAME ... | --all) [--verify-only]`: moves
// databases between two storages, e.g. from a SQLite data directory to PostgreSQL and back
// (storage/migration.h does the work). A SPEC is `sqlite:PATH` (a data directory; as a source
// also a single Deno KV .sqlite3 file, served as its database "default") or `postgres:CONNINFO`
// (a libpq conninfo string or URL; `postgres://...` and `postgresql://...` are taken as is).
//
// For each database: its rows as one snapshot of the source has them (a server may keep serving
// the source; its later writes are not copied) go into a new database of the same id and name
// in the destination, with the same versions, expiries and data version; then its access tokens.
// Then the secrets "server-secret" (signs data-path tokens) and "access-token" (serve's bootstrap
// token), unless --no-secrets, so that clients of the old server keep working unchanged.
// Finally both sides are digested (storage::ContentDigest) and compared; --verify-only does only
// that. The destination is written under its writer claim: no server may run on it meanwhile.
//
// Thread-safety: called from one thread.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/migration.h"
#include "storage/storage.h"
#include "storage/storage_spec.h"

namespace kvc::cli {

struct MigrateConfig {
  std::string from;              // SPEC
  std::string to;                // SPEC
  std::vector<std::string> dbs;  // --db (repeatable): names or ids in the source
  bool all = false;
  bool verify_only = false;
  bool no_secrets = false;
  int32_t batch_rows = 1000;   // rows per destination transaction, and per read page
  int64_t progress_ms = 5000;  // a progress line this often while a database copies
  // --from URL (cli/migrate_url.h).
  std::string from_token;  // empty: --from-token-file, then env DENO_KV_ACCESS_TOKEN
  std::string from_token_file;
  std::string from_ca_file;
  bool from_insecure = false;
  bool from_http1 = false;
  int64_t from_retry_ms = 120000;   // 5xx and transport failures: retried this long
  int64_t from_timeout_ms = 60000;  // one call to the source
  int32_t page_entries = 1000;      // per snapshot_read, and per destination write
  double max_rate = 0;              // entries per second at most; 0: no limit
  std::string to_token;             // --to URL: an admin token (or --to-token-file, env)
  std::string to_token_file;
  std::string to_ca_file;
  size_t request_bytes = size_t{1} << 20;  // --to URL: dump bytes per import request
  int32_t import_batch = 500;              // --to URL: entries per atomic write
  bool resume = false;
  bool no_verify = false;
};

// What the flags of MigrateConfig mean, with the storages already parsed.
struct MigrateOptions {
  std::vector<std::string> dbs;
  bool all = false;
  bool verify_only = false;
  bool copy_secrets = true;
  int32_t batch_rows = 1000;
  int64_t progress_ms = 5000;
};

struct DatabaseMigration {
  std::string name;
  std::string id;
  bool copied = false;  // false with verify_only
  storage::DatabaseCopy copy;
  storage::TokenCopy tokens_copied;
  storage::ContentDigest source;       // what the destination was compared with
  storage::ContentDigest destination;  // the destination's contents
  storage::TokenComparison tokens;
  bool match = false;        // contents and tokens the same
  std::string verdict;       // why not, or a note on what was compared
  double copy_seconds = 0;   // the copy, from the source's snapshot to registration
  double check_seconds = 0;  // both digests and the token comparison
};

struct MigrationReport {
  std::string from;  // the storages, as Storage::Describe shows them
  std::string to;
  std::vector<DatabaseMigration> databases;
  std::vector<std::string> warnings;  // also printed as they arose
  bool ok() const;                    // every database matches
};

// `sqlite:PATH`, `postgres:CONNINFO`, `postgres://...`, `postgresql://...` as storage options:
// the storage kind table's parser (storage/storage_spec.h), the one every command uses.
using storage::ParseStorageSpec;

// Runs a migration (or, with o.verify_only, the comparison) from `from` to `to`, printing what
// it does to `log` as it goes. A sqlite source must exist (a directory or a Deno KV file); a
// sqlite destination directory is created if missing (not with verify_only). Errors:
// InvalidArgument (options, the same storage on both sides), NotFound (a source, a database),
// AlreadyExists (the destination has one of the databases with data: nothing is copied then),
// Unavailable (a server holds the destination), the storages' errors. A verification that
// finds a difference is a report that is not ok(), not an error.
Result<MigrationReport> Migrate(const storage::StorageOptions& from,
                                const storage::StorageOptions& to, const MigrateOptions& o,
                                std::ostream& log);

// Registers the `migrate` command.
void AddMigrateCommand(CLI::App& app, MigrateConfig* config);
// Runs the parsed `migrate` command; returns the process exit code (0: every database matches;
// 1: a difference or a failure; 2, 3, 4 as for the other commands: bad input, not found,
// already exists).
int RunMigrate(const MigrateConfig& config);

}  // namespace kvc::cli
