// `kvconnect bench`: flags of the KV Connect load generator (loadgen/bench.h), and printing
// its report.
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
  CLI::Option* streams_flag = nullptr;  // to tell whether --streams was given
};

// Registers the `bench` subcommand.
CLI::App* AddBenchCommand(CLI::App& app, BenchConfig* config);

// Runs the parsed command. Prints the report (text, or one JSON object with --json) on stdout
// and the first distinct error texts on stderr. Returns the exit code: 0 if no request failed
// and every check passed, 1 if any did, 2 for bad usage or a failed metadata exchange.
int RunBench(BenchConfig config);

}  // namespace kvc::cli
