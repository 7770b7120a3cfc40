// `kvconnect db create|list|rename|delete` and `kvconnect token create|list|revoke`: manage the
// catalog of a storage (a data directory or PostgreSQL), also while `serve` runs on it (it notices
// within
// --catalog-poll-ms).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvc::cli {

struct AdminConfig {
  // The storage (cli/flags.h StorageFlags): --storage SPEC, or --data-dir DIR, --postgres CONNINFO.
  std::string storage;
  std::string data_dir = "./kvconnect-data";
  std::string postgres;
  bool json = false;
  bool yes = false;
  std::string name;              // db create / delete
  std::string new_name;          // db rename
  std::string db;                // token list
  std::vector<std::string> dbs;  // token create (repeatable --db)
  bool all_databases = false;    // token create
  std::string scope;
  std::string expires = "never";
  std::string label;
  double rate_limit = -1;
  std::string token;  // token revoke
  std::string action;
};

// Registers the `db` and `token` command groups.
void AddAdminCommands(CLI::App& app, AdminConfig* config);
// Runs the parsed admin command; returns the process exit code.
int RunAdmin(CLI::App& app, const AdminConfig& config);

// Prints "error: <message>" to stderr and returns the exit code of the CLI's subcommands:
// 2 bad input, 3 not found, 4 already exists, 1 anything else.
int PrintError(const Status& s);

}  // namespace kvc::cli
