// `kvconnect queue`: a running server's queue through its admin API (docs/queues.md): `stats`
// (counts), `dead list`, `dead requeue` and `dead purge` (by --id, or --all). Prints the API's
// JSON answer; errors are the server's text on stderr with exit code 1 (2 for usage).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace kvc::cli {

struct QueueCliConfig {
  std::string url = "http://127.0.0.1:4512";
  std::string token;  // default: env KVCONNECT_ACCESS_TOKEN
  std::string db = "default";
  std::string ca_file;
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
