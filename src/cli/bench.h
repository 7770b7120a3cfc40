// `kvconnect bench`: flags of the KV Connect load generator (loadgen/bench.h), and printing
// its report. Unless told otherwise (--db NAME, or a --url naming an endpoint's path), it works
// in a scratch database it creates through the server's admin API before the run and deletes
// after it (--keep keeps it), and says on stderr what it writes where.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "loadgen/bench.h"

namespace kvc::cli {

struct BenchConfig {
  loadgen::BenchOptions options;
  std::string http = "2";        // "2" or "1.1"
  std::string workload = "get";  // see loadgen::WorkloadName
  double timeout_s = 10;
  bool no_preload = false;
  bool json = false;
  bool keep = false;                          // keep the scratch database
  std::string data_dir = "./kvconnect-data";  // only for its access-token file (flags.h)
  CLI::Option* streams_flag = nullptr;        // to tell whether --streams was given
};

// Registers the `bench` subcommand.
CLI::App* AddBenchCommand(CLI::App& app, BenchConfig* config);

// Runs the parsed command. Prints the report (text, or one JSON object with --json) on stdout
// and the first distinct error texts on stderr. Returns the exit code: 0 if no request failed
// and every check passed, 1 if any did (or the scratch database could not be deleted), 2 for
// bad usage, a scratch database that could not be created, or a failed metadata exchange.
int RunBench(BenchConfig config);

}  // namespace kvc::cli
