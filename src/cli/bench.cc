#include "cli/bench.h"

#include <sys/resource.h>

#include <cstdlib>
#include <iostream>
#include <optional>

#include "cli/admin_client.h"
#include "cli/flags.h"
#include "client/connection.h"
#include "client/url.h"
#include "codec/json_text.h"
#include "common/random.h"

namespace kvc::cli {

CLI::App* AddBenchCommand(CLI::App& app, BenchConfig* c) {
  CLI::App* b = app.add_subcommand(
      "bench", "Load-test a KV Connect server: metadata exchange, then the data path");
  b->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  loadgen::BenchOptions& o = c->options;
  AddUrlFlag(b, &o.url,
             "The server (its origin; a URL with a path is the endpoint the metadata exchange "
             "POSTs to, used as it is)")
      ->capture_default_str();
  AddTokenFlag(b, &o.token);
  b->add_option("--db", o.database,
                "Run in this existing database (<origin>/databases/NAME/connect) and leave what "
                "the run writes there; default: a scratch database, deleted after the run");
  b->add_option("--database", o.database)->group("");  // the old spelling of --db
  b->add_flag("--keep", c->keep, "Keep the scratch database after the run (prints its name)");
  AddDataDirFlag(b, &c->data_dir,
                 "The server's data directory, for its access-token file when --url is on this "
                 "machine and no token is given");
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
  AddCaFileFlag(b, &o.ca_file);
  b->add_option("--ca", o.ca_file)->group("");  // the old spelling of --ca-file
  return b;
}

namespace {

// What a run of `o` writes, for the line bench prints before it starts.
std::string WhatItWrites(const loadgen::BenchOptions& o) {
  const std::string values = " (values of " + Count(o.value_size, "character", "characters") + ")";
  // "10,000 keys [\"bench\", \"kv\", 0..9999]"
  const std::string kv = Count(o.keys, "key", "keys") + " [\"bench\", \"kv\", " +
                         (o.keys == 1 ? "0" : "0.." + std::to_string(o.keys - 1)) + "]";
  switch (o.workload) {
    case loadgen::Workload::kGet:
    case loadgen::Workload::kList:
      return o.preload ? "writes " + kv + values + " before it starts, then reads them"
                       : "only reads " + kv;
    case loadgen::Workload::kMixed:
      return (o.preload ? "writes " + kv + values +
                              " before it starts, then reads them and "
                              "sets some of them again"
                        : "reads and sets " + kv + values);
    case loadgen::Workload::kSet:
      return "sets " + kv + values;
    case loadgen::Workload::kCas:
      return "writes " + Count(o.hot_keys, "key", "keys") +
             " [\"bench\", \"hot\", i] over and over";
    case loadgen::Workload::kSum:
      return "adds to the counter [\"bench\", \"counter\"]";
    case loadgen::Workload::kWatch:
      return "sets " + Count(o.watch_keys, "key", "keys") + " [\"bench\", \"watch\", i] every " +
             std::to_string(o.watch_interval_ms) + " ms while watching them";
  }
  return "writes keys under [\"bench\"]";
}

// The scratch database of a run: created through the admin API (with the run's token, which
// must be an admin token of the server) and deleted at the end unless kept.
class ScratchDatabase {
 public:
  // Creates it. Errors: connecting, and the server's answer (AdminHttpError).
  static Result<std::unique_ptr<ScratchDatabase>> Create(const loadgen::BenchOptions& o) {
    const AdminClient::Options ao{.url = o.url,
                                  .token = o.token,
                                  .ca_file = o.ca_file,
                                  .insecure = o.insecure,
                                  .connect_timeout = o.timeout,
                                  .request_timeout = o.timeout};
    std::unique_ptr<ScratchDatabase> db(new ScratchDatabase());
    db->options_ = ao;
    db->name_ = "bench-" + HexEncode(RandomBytes(4));
    KVC_ASSIGN_OR_RETURN(auto admin, AdminClient::Connect(ao));
    KVC_ASSIGN_OR_RETURN(
        client::Response r,
        admin->Send("POST", "databases", "{\"name\":" + codec::JsonQuote(db->name_) + "}"));
    if (r.status != 200 && r.status != 201) return AdminHttpError(r.status, r.body);
    return db;
  }

  const std::string& name() const { return name_; }

  // Deletes it (a new connection: the run may have taken long). Errors: as Create.
  Status Delete() {
    KVC_ASSIGN_OR_RETURN(auto admin, AdminClient::Connect(options_));
    KVC_ASSIGN_OR_RETURN(client::Response r,
                         admin->Send("DELETE", "databases/" + name_, std::string()));
    if (r.status != 200) return AdminHttpError(r.status, r.body);
    return Status::Ok();
  }

 private:
  ScratchDatabase() = default;
  AdminClient::Options options_;
  std::string name_;
};

// Every connection needs a descriptor (an HTTP/1.1 watch run needs one per watcher): use what
// the hard limit allows.
void RaiseOpenFileLimit() {
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
}

// Completes c->options from the flags and checks them; on bad usage prints why and returns an
// empty optional. Returns the parsed --url.
std::optional<client::Url> PrepareOptions(BenchConfig* c) {
  loadgen::BenchOptions& o = c->options;
  o.http = c->http == "1.1" ? client::HttpVersion::kHttp1 : client::HttpVersion::kHttp2;
  o.workload = *loadgen::ParseWorkload(c->workload);  // CLI11 checked the name
  o.preload = !c->no_preload;
  if (!(c->timeout_s > 0) || c->timeout_s > 86400) {
    std::cerr << "error: --timeout must be a positive number of seconds\n";
    return std::nullopt;
  }
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(c->timeout_s * 1000));
  auto token = ResolveToken(o.token, o.url, c->data_dir);
  if (!token.ok()) {
    std::cerr << "error: " << token.status().message() << "\n";
    return std::nullopt;
  }
  o.token = *token;
  auto url = client::ParseUrl(o.url);
  if (!url.ok()) {
    std::cerr << "error: --url: " << url.status().message() << "\n";
    return std::nullopt;
  }
  if (Status s = loadgen::ValidateOptions(o); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return std::nullopt;
  }
  if (o.http == client::HttpVersion::kHttp1 && c->streams_flag != nullptr &&
      c->streams_flag->count() > 0 && o.streams != 1) {
    std::cerr << "note: --streams is ignored over HTTP/1.1 (one request in flight per "
                 "connection)\n";
  }
  return std::move(*url);
}

// Where the run writes: a scratch database (created here, left in *scratch, its name in
// c->options.database) unless --db or a URL with a path says where. Says so on stderr. Returns
// false (after printing why) if the scratch database could not be created.
bool ChooseDatabase(BenchConfig* c, const client::Url& url,
                    std::unique_ptr<ScratchDatabase>* scratch) {
  loadgen::BenchOptions& o = c->options;
  if (o.database.empty() && (url.path.empty() || url.path == "/")) {
    auto made = ScratchDatabase::Create(o);
    if (!made.ok()) {
      std::cerr << "error: bench runs in a scratch database it creates and deletes; creating one "
                   "on "
                << url.Origin() << " failed: " << made.status().message()
                << " (that needs an admin token of the server). Give --db NAME to run in an "
                   "existing database instead.\n";
      return false;
    }
    *scratch = std::move(*made);
    o.database = (*scratch)->name();
    std::cerr << "bench: created the scratch database '" << o.database << "'; the run "
              << WhatItWrites(o) << " there. "
              << (c->keep ? "It is kept afterwards (--keep)." : "It is deleted after the run.")
              << std::endl;
  } else {
    std::cerr << "bench: the run " << WhatItWrites(o) << " in "
              << (o.database.empty() ? "the database of " + o.url
                                     : "the database '" + o.database + "'")
              << ", and leaves what it writes there." << std::endl;
  }
  return true;
}

// Deletes (or with `keep` keeps) the scratch database, if any; false if deleting it failed.
bool FinishScratch(ScratchDatabase* scratch, bool keep) {
  if (scratch == nullptr) return true;
  if (keep) {
    std::cerr << "bench: kept the scratch database '" << scratch->name()
              << "' (delete it with `kvconnect db delete " << scratch->name() << " --yes`)."
              << std::endl;
    return true;
  }
  if (Status s = scratch->Delete(); !s.ok()) {
    std::cerr << "error: deleting the scratch database '" << scratch->name()
              << "' failed: " << s.message() << "; delete it with `kvconnect db delete "
              << scratch->name() << " --yes`.\n";
    return false;
  }
  std::cerr << "bench: deleted the scratch database '" << scratch->name() << "'." << std::endl;
  return true;
}

// The report on stdout (text or JSON), then the first distinct errors and a failed sum check on
// stderr.
void PrintReport(const loadgen::BenchReport& report, bool json) {
  if (json) {
    std::cout << loadgen::FormatReportJson(report) << std::endl;
  } else {
    std::cout << loadgen::FormatReportText(report) << std::flush;
  }
  const auto& samples = report.errors.samples();
  if (!samples.empty()) {
    std::cerr << "first distinct errors:\n";
    for (const std::string& text : samples) std::cerr << "  " << text << "\n";
  }
  if (report.sum && report.sum->final_read && !report.sum->ok) {
    std::cerr << "sum check failed: the counter went from " << report.sum->start << " to "
              << report.sum->final_value << " after " << report.sum->successes
              << " acknowledged sums\n";
  }
}

}  // namespace

int RunBench(BenchConfig c) {
  const std::optional<client::Url> url = PrepareOptions(&c);
  if (!url) return 2;
  RaiseOpenFileLimit();
  std::unique_ptr<ScratchDatabase> scratch;
  if (!ChooseDatabase(&c, *url, &scratch)) return 2;

  loadgen::BenchStage stage = loadgen::BenchStage::kOptions;
  Result<loadgen::BenchReport> report = loadgen::RunBenchmark(c.options, &stage);
  const bool deleted = FinishScratch(scratch.get(), c.keep);
  if (!report.ok()) {
    std::cerr << "error: " << report.status().message() << "\n";
    const bool usage =
        stage == loadgen::BenchStage::kOptions || stage == loadgen::BenchStage::kMetadata;
    return usage ? 2 : 1;
  }
  PrintReport(*report, c.json);
  return report->ok() && deleted ? 0 : 1;
}

}  // namespace kvc::cli
