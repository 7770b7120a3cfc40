#include "cli/bench.h"

#include <sys/resource.h>

#include <cstdlib>
#include <iostream>

#include "client/connection.h"

namespace kvc::cli {

CLI::App* AddBenchCommand(CLI::App& app, BenchConfig* c) {
  CLI::App* b = app.add_subcommand(
      "bench", "Load-test a KV Connect server: metadata exchange, then the data path");
  b->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  loadgen::BenchOptions& o = c->options;
  b->add_option("--url", o.url, "Server URL (the metadata exchange POSTs here)")
      ->capture_default_str();
  b->add_option("--token", o.token, "Access token (default: $DENO_KV_ACCESS_TOKEN)");
  b->add_option("--database", o.database,
                "Database name or id: POST to <origin>/databases/NAME/connect");
  b->add_option("--http", c->http, "HTTP version: 2 (h2c or TLS+ALPN h2) or 1.1")
      ->check(CLI::IsMember({"2", "1.1"}))
      ->capture_default_str();
  b->add_option("--connections", o.connections, "Connections")->capture_default_str();
  c->streams_flag =
      b->add_option("--streams", o.streams, "Requests in flight per connection (HTTP/2 only)")
          ->capture_default_str();
  b->add_option("--threads", o.threads,
                "I/O threads (default: CPU count, at most one per connection)");
  b->add_option("--duration", o.duration_s, "Timed window in seconds (decimals allowed)")
      ->capture_default_str();
  b->add_option("--warmup", o.warmup_s, "Warm-up before the window in seconds (not counted)")
      ->capture_default_str();
  b->add_option("--workload", c->workload, "get|set|cas|list|sum|mixed|watch")
      ->check(CLI::IsMember({"get", "set", "cas", "list", "sum", "mixed", "watch"}))
      ->capture_default_str();
  b->add_option("--keys", o.keys, "Keys for get/set/list/mixed")->capture_default_str();
  b->add_option("--value-size", o.value_size, "Characters per written value")
      ->capture_default_str();
  b->add_option("--hot-keys", o.hot_keys, "Keys the cas workload contends on")
      ->capture_default_str();
  b->add_option("--watchers", o.watchers, "Watch streams (watch workload)")->capture_default_str();
  b->add_option("--watch-keys", o.watch_keys, "Keys the watchers watch (one each)")
      ->capture_default_str();
  b->add_option("--watch-interval-ms", o.watch_interval_ms,
                "The watch writer sets a key this often")
      ->capture_default_str();
  b->add_flag("--no-preload", c->no_preload, "Do not write the keys before the window");
  b->add_option("--seed", o.seed, "Seed of the key choices")->capture_default_str();
  b->add_option("--timeout", c->timeout_s,
                "Seconds for connecting, the metadata exchange, and operations still running "
                "after the window")
      ->capture_default_str();
  b->add_flag("--json", c->json, "Print one JSON object instead of the table");
  b->add_flag("--insecure", o.insecure, "Do not verify the server's TLS certificate");
  b->add_option("--ca", o.ca_file, "PEM file of extra trusted CA certificates");
  return b;
}

namespace {

// Every connection needs a descriptor (an HTTP/1.1 watch run needs one per watcher): use what
// the hard limit allows.
void RaiseOpenFileLimit() {
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
}

}  // namespace

int RunBench(BenchConfig c) {
  loadgen::BenchOptions& o = c.options;
  o.http = c.http == "1.1" ? client::HttpVersion::kHttp1 : client::HttpVersion::kHttp2;
  o.workload = *loadgen::ParseWorkload(c.workload);  // CLI11 checked the name
  o.preload = !c.no_preload;
  if (!(c.timeout_s > 0) || c.timeout_s > 86400) {
    std::cerr << "error: --timeout must be a positive number of seconds\n";
    return 2;
  }
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000));
  if (o.token.empty()) {
    if (const char* e = std::getenv("DENO_KV_ACCESS_TOKEN"); e != nullptr) o.token = e;
  }
  if (o.http == client::HttpVersion::kHttp1 && c.streams_flag != nullptr &&
      c.streams_flag->count() > 0 && o.streams != 1) {
    std::cerr << "note: --streams is ignored over HTTP/1.1 (one request in flight per "
                 "connection)\n";
  }
  RaiseOpenFileLimit();

  loadgen::BenchStage stage = loadgen::BenchStage::kOptions;
  Result<loadgen::BenchReport> report = loadgen::RunBenchmark(o, &stage);
  if (!report.ok()) {
    std::cerr << "error: " << report.status().message() << "\n";
    const bool usage =
        stage == loadgen::BenchStage::kOptions || stage == loadgen::BenchStage::kMetadata;
    return usage ? 2 : 1;
  }
  if (c.json) {
    std::cout << loadgen::FormatReportJson(*report) << std::endl;
  } else {
    std::cout << loadgen::FormatReportText(*report) << std::flush;
  }
  const auto& samples = report->errors.samples();
  if (!samples.empty()) {
    std::cerr << "first distinct errors:\n";
    for (const std::string& text : samples) std::cerr << "  " << text << "\n";
  }
  if (report->sum && report->sum->final_read && !report->sum->ok) {
    std::cerr << "sum check failed: the counter went from " << report->sum->start << " to "
              << report->sum->final_value << " after " << report->sum->successes
              << " acknowledged sums\n";
  }
  return report->ok() ? 0 : 1;
}

}  // namespace kvc::cli
