// `kvconnect backup`, `kvconnect backup list` and `kvconnect restore`: online snapshots of a
// storage's databases into a backup target (a directory or s3://bucket/prefix), what a target
// can restore, and restores (to the latest state or a point in time) into the storage, as a new
// database (--as) or in place. All of them work while `serve` runs on the storage
// (backup/operations.h); a running server switches to a restored database within its catalog
// poll. The storage is any storage spec (--storage, --data-dir, --postgres); a kind that cannot
// copy or adopt snapshots refuses with the storage's own reason.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kvc::cli {

struct BackupConfig {
  // The storage (cli/flags.h StorageFlags): --storage SPEC, --data-dir DIR or --postgres CONNINFO.
  std::string storage;
  std::string data_dir = "./kvconnect-data";
  std::string postgres;
  std::vector<std::string> dbs;  // backup --db (repeatable)
  bool all = false;              // backup --all
  std::string to;                // backup --to
  std::string from;              // backup list / restore --from
  std::string db;                // restore --db
  std::string as;                // restore --as
  std::string at;                // restore --at
  bool json = false;             // backup list --json
};

// Registers `backup` (with `list`) and `restore`.
void AddBackupCommands(CLI::App& app, BackupConfig* config);
// Runs the parsed command; returns the process exit code.
int RunBackup(CLI::App& app, const BackupConfig& config);

}  // namespace kvc::cli
