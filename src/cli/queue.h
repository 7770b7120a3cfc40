// `kvconnect queue`: a running server's queue through its admin API (docs/queues.md): `stats`
// (counts), `dead list`, `dead requeue` and `dead purge` (by --id, or --all). Prints a table for
// people (dates with relative times), or with --json the API's JSON answer for scripts; errors
// are the server's text on stderr with a non-zero exit code (2 for usage). The token comes from
// ResolveToken (flags.h): a server on this machine needs none beyond its data directory.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"

namespace kvc::cli {

struct QueueCliConfig {
  std::string url = kDefaultServerUrl;
  std::string token;  // empty: ResolveToken's fallbacks
  std::string db = "default";
  std::string ca_file;
  std::string data_dir = kDefaultDataDir;  // only for its access-token file
  bool json = false;
  std::vector<std::string> ids;  // dead requeue/purge --id
  bool all = false;              // dead requeue/purge --all
  int64_t limit = 100;           // dead list
  std::string cursor;            // dead list
};

// Registers `queue` with `stats` and `dead list|requeue|purge`.
void AddQueueCommands(CLI::App& app, QueueCliConfig* config);
// Runs the parsed command; returns the process exit code.
int RunQueue(CLI::App& app, const QueueCliConfig& config);

}  // namespace kvc::cli
