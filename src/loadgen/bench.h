// `kvconnect bench`: a load generator that speaks KV Connect like a real client. It does the
// metadata exchange, then drives the data path (snapshot_read, atomic_write, watch) of the
// endpoint it was given over N connections x M concurrent streams (HTTP/2) or N keep-alive
// connections (HTTP/1.1), and measures throughput, latency and errors in a timed window.
//
// Ownership: RunBenchmark owns every thread, connection and buffer it makes and releases them
// before it returns.
// Thread-safety: RunBenchmark may be called from any thread; it blocks until the run is over.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/connection.h"
#include "common/status.h"
#include "loadgen/stats.h"

namespace kvc::loadgen {

enum class Workload { kGet, kSet, kCas, kList, kSum, kMixed, kWatch };

// "get", "set", "cas", "list", "sum", "mixed", "watch".
std::string_view WorkloadName(Workload w);
// The inverse of WorkloadName; nullopt for an unknown name.
std::optional<Workload> ParseWorkload(std::string_view name);

struct BenchOptions {
  std::string url = "http://127.0.0.1:4512";
  std::string token;     // access token for the metadata exchange
  std::string database;  // empty: POST to `url`; else <origin>/databases/<name>/connect
  client::HttpVersion http = client::HttpVersion::kHttp2;
  int connections = 1;
  int streams = 64;  // requests in flight per connection over HTTP/2 (1 over HTTP/1.1)
  int threads = 0;   // 0: hardware concurrency; always capped by the number of connections
  double duration_s = 10;
  double warmup_s = 1;
  Workload workload = Workload::kGet;
  int64_t keys = 10000;  // get, set, list, mixed
  int value_size = 100;  // characters of the V8 string values written
  int hot_keys = 4;      // cas
  int watchers = 1000;   // watch
  int watch_keys = 10;
  int watch_interval_ms = 10;
  bool preload = true;
  uint64_t seed = 1;
  bool insecure = false;
  std::string ca_file;
  // Bounds connecting, the metadata exchange, preload calls, opening watch streams, and how
  // long operations may still take after the window before they are cut off (as errors).
  std::chrono::milliseconds timeout{10000};
  // After the watch window, frames for changes made inside it may still arrive this long.
  std::chrono::milliseconds watch_drain{1000};
  // Per-write limits of the server (reference §3.8), respected when preloading.
  size_t write_max_mutations = 1000;
  size_t write_max_bytes = 819200;
  size_t max_response_bytes = 64u << 20;
};

// Returns InvalidArgument naming the first option out of range.
Status ValidateOptions(const BenchOptions& options);

// The result of `sum`: the counter must have grown by exactly the number of sums acknowledged
// (plus at most the number whose outcome is unknown because the transport failed).
struct SumCheck {
  uint64_t start = 0;
  uint64_t successes = 0;   // acknowledged sums, warm-up included
  uint64_t unknown = 0;     // sums whose answer was lost
  bool final_read = false;  // false: the counter could not be read back (an error)
  uint64_t final_value = 0;
  bool ok = false;
};

struct WatchSummary {
  int watchers = 0;
  int watchers_open = 0;   // got their first frame
  uint64_t frames = 0;     // frames for changes made inside the window
  uint64_t writes = 0;     // acknowledged writes of the writer, whole run
  LatencySummary latency;  // change (writer's submit) to frame
};

struct BenchReport {
  std::string workload;
  std::string protocol;  // "h2" or "http/1.1"
  std::string url;       // where the metadata exchange went
  std::string endpoint;  // the resolved data-path endpoint
  int protocol_version = 0;
  int connections = 0;
  int streams = 0;
  int threads = 0;
  double duration_s = 0;
  double warmup_s = 0;
  double seconds = 0;  // measured window: its start until the last counted operation ended
  uint64_t ops = 0;
  double ops_per_s = 0;
  LatencySummary latency;
  ErrorCounts errors;
  uint64_t conflicts = 0;  // cas: check failures
  uint64_t misses = 0;     // get/list: keys not found (an error when this run preloaded them)
  std::optional<SumCheck> sum;
  std::optional<WatchSummary> watch;

  // No request failed and every check passed.
  bool ok() const { return errors.total() == 0 && (!sum || sum->ok); }
};

// Where a run stopped before its timed window.
enum class BenchStage { kOptions, kMetadata, kConnect, kPreload, kRun };

// Runs the benchmark. Returns the report (also when requests failed: see BenchReport::ok()), or
// the error that stopped the run before the window ended; `*failed_stage` then says where.
Result<BenchReport> RunBenchmark(const BenchOptions& options, BenchStage* failed_stage);

// The report as an aligned text table, and as one JSON object (no trailing newline).
std::string FormatReportText(const BenchReport& report);
std::string FormatReportJson(const BenchReport& report);

}  // namespace kvc::loadgen
