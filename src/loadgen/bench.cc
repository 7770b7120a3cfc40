// The benchmark driver: metadata exchange, connections, preload, the timed window with its
// actors (workloads.h), the sum check, and the report. plan.h describes the threading model.
#include "loadgen/bench.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <thread>

#include "codec/client_codec.h"
#include "codec/key_codec.h"
#include "loadgen/metadata.h"
#include "loadgen/plan.h"
#include "loadgen/setup.h"
#include "loadgen/workloads.h"

namespace kvc::loadgen {
namespace {

namespace asio = boost::asio;

constexpr char kUserAgent[] = "kvconnect-bench/0.1";

// One benchmark run: owns the I/O threads, the connections and every actor. The destructor
// stops the threads before any member they use is destroyed.
class BenchRun {
 public:
  BenchRun(const BenchOptions& options, client::Url metadata_url)
      : options_(options),
        metadata_url_(std::move(metadata_url)),
        http2_(options.http == client::HttpVersion::kHttp2),
        watch_(options.workload == Workload::kWatch),
        streams_(http2_ ? options.streams : 1),
        data_connections_(watch_ ? 1 : options.connections),
        watch_connections_(!watch_ ? 0
                                   : (http2_ ? std::min(options.connections, options.watchers)
                                             : options.watchers)),
        threads_(ThreadCount(options, data_connections_ + watch_connections_)),
        pool_(threads_),
        stats_(static_cast<size_t>(threads_)) {
    plan_.options = options;
  }

  ~BenchRun() {
    CloseAll();
    pool_.Stop();
  }

  Result<BenchReport> Run(BenchStage* stage) {
    *stage = BenchStage::kOptions;
    if (metadata_url_.tls()) KVC_RETURN_IF_ERROR(NeedTls());
    *stage = BenchStage::kMetadata;
    KVC_RETURN_IF_ERROR(ExchangeMetadata());
    *stage = BenchStage::kConnect;
    KVC_RETURN_IF_ERROR(OpenConnections());
    *stage = BenchStage::kPreload;
    KVC_RETURN_IF_ERROR(Preload());
    if (options_.workload == Workload::kSum) {
      KVC_ASSIGN_OR_RETURN(sum_start_, ReadCounter(io_of(0), connections_[0], plan_));
    }
    *stage = BenchStage::kRun;
    if (watch_) {
      KVC_RETURN_IF_ERROR(RunWatch());
    } else {
      RunRequests();
    }
    if (options_.workload == Workload::kSum) ReadFinalSum();
    CloseAll();
    pool_.Stop();
    return Report();
  }

 private:
  static int ThreadCount(const BenchOptions& o, int connections) {
    const int wanted =
        o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(wanted, 1, connections);
  }

  asio::io_context& io_of(size_t connection) { return pool_.context(connection); }
  ThreadStats* stats_of(size_t connection) { return &stats_[connection % stats_.size()]; }

  // Closes every connection on its own io_context.
  void CloseAll() {
    for (size_t i = 0; i < connections_.size(); ++i) {
      asio::post(io_of(i), [c = connections_[i]] { c->Close(); });
    }
    for (const auto& c : side_connections_) {
      asio::post(io_of(0), [c] { c->Close(); });
    }
  }

  Status NeedTls() {
    if (tls_) return Status::Ok();
    KVC_ASSIGN_OR_RETURN(
        tls_, client::MakeTlsContext(options_.http, options_.insecure, options_.ca_file));
    return Status::Ok();
  }

  client::ConnectionOptions ConnectionOptionsFor(const client::Url& origin) const {
    client::ConnectionOptions c;
    c.version = options_.http;
    c.origin = origin;
    c.connect_timeout = options_.timeout;
    c.max_response_bytes = options_.max_response_bytes;
    return c;
  }

  // POSTs the metadata request, checks the answer, and fills the plan's data-path parts.
  Status ExchangeMetadata() {
    const std::string where = "metadata exchange with " + metadata_url_.ToString();
    auto failed = [&](const Status& s) {
      return Status(s.code(), where + " failed: " + s.message());
    };
    Result<std::vector<std::string>> addresses =
        client::ResolveHost(metadata_url_.host, metadata_url_.port);
    if (!addresses.ok()) return failed(addresses.status());
    metadata_addresses_ = *addresses;
    auto conn = client::MakeConnection(io_of(0), ConnectionOptionsFor(metadata_url_),
                                       metadata_addresses_, tls_.get());
    side_connections_.push_back(conn);
    if (Status s = ConnectBlocking(io_of(0), conn, options_.timeout); !s.ok()) return failed(s);
    Result<client::Response> answer =
        CallBlocking(io_of(0), conn, MetadataRequest(metadata_url_, options_.token, kUserAgent),
                     options_.timeout);
    asio::post(io_of(0), [conn] { conn->Close(); });
    if (!answer.ok()) return failed(answer.status());
    if (answer->status != 200) {
      return Status(
          StatusCode::kUnauthenticated,
          where + " failed: HTTP " + std::to_string(answer->status) + ": " + answer->body);
    }
    Result<DataPath> path = DataPathFromMetadata(metadata_url_, answer->body, kUserAgent);
    if (!path.ok()) return failed(path.status());
    endpoint_ = path->endpoint;
    protocol_version_ = path->version;
    plan_.headers = path->headers;
    plan_.read_path = path->read_path;
    plan_.write_path = path->write_path;
    plan_.watch_path = path->watch_path;
    FillKeys();
    return Status::Ok();
  }

  void FillKeys() {
    plan_.value =
        codec::EncodeV8String(Filler(static_cast<size_t>(options_.value_size), options_.seed));
    switch (options_.workload) {
      case Workload::kGet:
      case Workload::kSet:
      case Workload::kList:
      case Workload::kMixed:
        plan_.keys.reserve(static_cast<size_t>(options_.keys));
        for (int64_t i = 0; i < options_.keys; ++i) plan_.keys.push_back(BenchKey("kv", i));
        plan_.keys_end =
            codec::EncodeKey({codec::KeyPart::String("bench"), codec::KeyPart::String("kv")}) +
            '\xff';
        break;
      case Workload::kCas:
        for (int i = 0; i < options_.hot_keys; ++i) plan_.hot_keys.push_back(BenchKey("hot", i));
        break;
      case Workload::kSum:
        plan_.counter_key =
            codec::EncodeKey({codec::KeyPart::String("bench"), codec::KeyPart::String("counter")});
        break;
      case Workload::kWatch:
        for (int i = 0; i < options_.watch_keys; ++i) {
          plan_.watch_keys.push_back(BenchKey("watch", i));
        }
        break;
    }
  }

  // Opens the data connections (for watch: the writer's, then the watchers'), all at once.
  Status OpenConnections() {
    if (endpoint_.tls()) KVC_RETURN_IF_ERROR(NeedTls());
    if (endpoint_.SameOrigin(metadata_url_)) {
      addresses_ = metadata_addresses_;
    } else {
      KVC_ASSIGN_OR_RETURN(addresses_, client::ResolveHost(endpoint_.host, endpoint_.port));
    }
    const int total = data_connections_ + watch_connections_;
    const client::ConnectionOptions copts = ConnectionOptionsFor(endpoint_);
    for (int i = 0; i < total; ++i) {
      connections_.push_back(
          client::MakeConnection(io_of(static_cast<size_t>(i)), copts, addresses_, tls_.get()));
    }
    // The watch writer's connection opens once the watchers are ready: an HTTP/1.1 server may
    // close a connection that stays silent that long.
    const size_t first = watch_ ? 1 : 0;
    connected_ = std::make_unique<Countdown>(total - static_cast<int>(first));
    for (size_t i = first; i < connections_.size(); ++i) {
      asio::post(io_of(i), [this, c = connections_[i]] {
        c->Connect([this](Status s) {
          if (!s.ok()) connect_failure_.Fail(std::move(s));
          connected_->Done();
        });
      });
    }
    // Each connection gives up after options_.timeout itself; this only guards the pool.
    if (!connected_->WaitUntil(Clock::now() + options_.timeout * 2)) {
      return Unavailable("connecting to " + endpoint_.Origin() + " timed out");
    }
    if (connect_failure_.failed()) {
      const Status s = connect_failure_.first();
      return Status(s.code(), "cannot open " + std::to_string(total) +
                                  (total == 1 ? " connection to " : " connections to ") +
                                  endpoint_.Origin() + ": " + s.message());
    }
    return Status::Ok();
  }

  // Writes the keys the workload reads before the window, in batches within the write limits.
  Status Preload() {
    const Workload w = options_.workload;
    const bool wanted =
        w == Workload::kGet || w == Workload::kList || w == Workload::kMixed || w == Workload::kCas;
    if (!options_.preload || !wanted) return Status::Ok();
    batches_ =
        PreloadBatches(w == Workload::kCas ? plan_.hot_keys : plan_.keys, plan_.value, options_);
    const size_t per_connection = http2_ ? static_cast<size_t>(std::min(streams_, 8)) : 1;
    const size_t lanes = connections_.size() * per_connection;
    preload_done_ = std::make_unique<Countdown>(static_cast<int64_t>(lanes));
    for (size_t i = 0; i < lanes; ++i) {
      const size_t conn = i / per_connection;
      lanes_.push_back(std::make_unique<PreloadLane>(&plan_, connections_[conn], &batches_,
                                                     &next_batch_, &preload_state_,
                                                     preload_done_.get()));
      asio::post(io_of(conn), [lane = lanes_.back().get()] { lane->SendNext(); });
    }
    // options_.timeout per 100 batches: generous for a slow disk, yet bounded.
    const auto deadline =
        Clock::now() + options_.timeout * static_cast<int64_t>(1 + batches_.size() / 100);
    if (!preload_done_->WaitUntil(deadline)) {
      return Unavailable("preloading " + std::to_string(batches_.size()) +
                         " atomic writes timed out");
    }
    if (preload_state_.failed()) {
      const Status s = preload_state_.first();
      return Status(s.code(), "preload failed: " + s.message());
    }
    plan_.expect_present = w != Workload::kCas;
    return Status::Ok();
  }

  // Sets the window: the warm-up starts now.
  void SetWindow() {
    const int64_t start = NowNs() + SecondsToNs(options_.warmup_s);
    plan_.window_end_ns.store(start + SecondsToNs(options_.duration_s));
    plan_.window_start_ns.store(start);
  }

  void RunRequests() {
    const size_t per_connection = static_cast<size_t>(streams_);
    const size_t n = connections_.size() * per_connection;
    finished_ = std::make_unique<Countdown>(static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const size_t conn = i / per_connection;
      workers_.push_back(std::make_unique<Worker>(&plan_, connections_[conn], stats_of(conn),
                                                  MixSeed(options_.seed, i), finished_.get()));
    }
    SetWindow();
    for (size_t i = 0; i < n; ++i) {
      asio::post(io_of(i / per_connection), [w = workers_[i].get()] { w->Start(); });
    }
    if (!finished_->WaitUntil(FromNs(plan_.window_end()) + options_.timeout)) {
      // Operations still pending this long after the window are cut off as "timeout" errors.
      plan_.stopping.store(true);
      CloseAll();
      finished_->WaitUntil(Clock::now() + options_.timeout);
    }
  }

  Status RunWatch() {
    const int n = options_.watchers;
    watch_ready_ = std::make_unique<Countdown>(n);
    watch_ended_ = std::make_unique<Countdown>(n);
    for (int j = 0; j < n; ++j) {
      const size_t conn = 1 + static_cast<size_t>(j % watch_connections_);
      const std::string* key = &plan_.watch_keys[static_cast<size_t>(j) % plan_.watch_keys.size()];
      watchers_.push_back(std::make_unique<Watcher>(&plan_, connections_[conn], stats_of(conn), key,
                                                    watch_ready_.get(), watch_ended_.get()));
      asio::post(io_of(conn), [w = watchers_.back().get()] { w->Start(); });
    }
    watch_ready_->WaitUntil(Clock::now() + options_.timeout);
    if (Status s = ConnectBlocking(io_of(0), connections_[0], options_.timeout); !s.ok()) {
      return Status(s.code(), "cannot open the watch writer's connection to " + endpoint_.Origin() +
                                  ": " + s.message());
    }
    writer_done_ = std::make_unique<Countdown>(1);
    writer_ = std::make_unique<WatchWriter>(&plan_, connections_[0], stats_of(0), io_of(0),
                                            streams_, writer_done_.get());
    SetWindow();
    asio::post(io_of(0), [w = writer_.get()] { w->Start(); });
    std::this_thread::sleep_until(FromNs(plan_.window_end()));
    writer_done_->WaitUntil(FromNs(plan_.window_end()) + options_.timeout);
    std::this_thread::sleep_for(options_.watch_drain);
    plan_.stopping.store(true);
    CloseAll();
    watch_ended_->WaitUntil(Clock::now() + options_.timeout);
    return Status::Ok();
  }

  // Reads the counter on a fresh connection (the others may have been cut off). Report()
  // compares it with the acknowledged sums once the threads have stopped.
  void ReadFinalSum() {
    auto conn =
        client::MakeConnection(io_of(0), ConnectionOptionsFor(endpoint_), addresses_, tls_.get());
    side_connections_.push_back(conn);
    Status s = ConnectBlocking(io_of(0), conn, options_.timeout);
    sum_final_ = s.ok() ? ReadCounter(io_of(0), conn, plan_) : Result<uint64_t>(s);
  }

  // REQUIRES: the pool has stopped.
  SumCheck CheckSum(ErrorCounts* errors) const {
    SumCheck check;
    check.start = sum_start_;
    for (const ThreadStats& t : stats_) {
      check.successes += t.sums_ok;
      check.unknown += t.sums_unknown;
    }
    if (!sum_final_.ok()) {
      errors->Add("sum_check",
                  "reading the counter after the run: " + sum_final_.status().message());
      return check;
    }
    check.final_read = true;
    check.final_value = *sum_final_;
    const uint64_t low = check.start + check.successes;
    check.ok = check.final_value >= low && check.final_value - low <= check.unknown;
    return check;
  }

  // REQUIRES: the pool has stopped.
  BenchReport Report() {
    BenchReport r;
    r.workload = std::string(WorkloadName(options_.workload));
    r.protocol = http2_ ? "h2" : "http/1.1";
    r.url = metadata_url_.ToString();
    r.endpoint = endpoint_.ToString();
    r.protocol_version = protocol_version_;
    r.connections = watch_ ? watch_connections_ : data_connections_;
    r.streams = !watch_  ? streams_
                : http2_ ? (options_.watchers + watch_connections_ - 1) / watch_connections_
                         : 1;
    r.threads = threads_;
    r.duration_s = options_.duration_s;
    r.warmup_s = options_.warmup_s;

    std::vector<uint64_t> latencies;
    int64_t last_done = 0;
    WatchSummary w;
    for (ThreadStats& t : stats_) {
      latencies.insert(latencies.end(), t.latency_ns.begin(), t.latency_ns.end());
      r.ops += t.ops;
      r.conflicts += t.conflicts;
      r.misses += t.misses;
      r.errors.Merge(t.errors);
      last_done = std::max(last_done, t.last_done_ns);
      w.watchers_open += t.watchers_open;
      w.frames += t.frames;
      w.writes += t.writes;
    }
    for (const auto& watcher : watchers_) {
      if (!watcher->opened() && !watcher->failed()) {
        r.errors.Add("watch_not_open", "watch: no first frame within the timeout");
      }
    }
    if (options_.workload == Workload::kSum) r.sum = CheckSum(&r.errors);
    r.latency = Summarize(&latencies);
    // The window runs from its start until the last operation started in it has ended.
    r.seconds = options_.duration_s;
    const int64_t window_start = plan_.window_start();
    if (!watch_ && r.ops > 0 && last_done > window_start) {
      r.seconds = std::max(r.seconds, static_cast<double>(last_done - window_start) / 1e9);
    }
    r.ops_per_s = static_cast<double>(r.ops) / r.seconds;
    if (watch_) {
      w.watchers = options_.watchers;
      w.latency = r.latency;
      r.watch = w;
    }
    return r;
  }

  const BenchOptions options_;
  const client::Url metadata_url_;
  const bool http2_;
  const bool watch_;
  const int streams_;
  const int data_connections_;
  const int watch_connections_;
  const int threads_;
  client::Url endpoint_;
  int protocol_version_ = 0;
  std::vector<std::string> metadata_addresses_;
  std::vector<std::string> addresses_;  // of the endpoint's host
  std::shared_ptr<asio::ssl::context> tls_;
  // Everything below is used by the I/O threads; the destructor stops them first.
  IoPool pool_;
  std::vector<ThreadStats> stats_;  // one per thread
  Plan plan_;
  // Connection i runs on io_of(i) (for watch: 0 is the writer's, then the watchers').
  std::vector<std::shared_ptr<client::Connection>> connections_;
  // The metadata exchange's and the final sum read's, on io_of(0).
  std::vector<std::shared_ptr<client::Connection>> side_connections_;
  std::unique_ptr<Countdown> connected_;
  PreloadState connect_failure_;
  std::vector<std::string> batches_;
  std::atomic<size_t> next_batch_{0};
  PreloadState preload_state_;
  std::unique_ptr<Countdown> preload_done_;
  std::vector<std::unique_ptr<PreloadLane>> lanes_;
  std::unique_ptr<Countdown> finished_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Countdown> watch_ready_;
  std::unique_ptr<Countdown> watch_ended_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::unique_ptr<Countdown> writer_done_;
  std::unique_ptr<WatchWriter> writer_;
  uint64_t sum_start_ = 0;
  Result<uint64_t> sum_final_ = Internal("the counter was not read");
};

}  // namespace

Result<BenchReport> RunBenchmark(const BenchOptions& options, BenchStage* failed_stage) {
  BenchStage ignored;
  BenchStage* stage = failed_stage != nullptr ? failed_stage : &ignored;
  *stage = BenchStage::kOptions;
  KVC_RETURN_IF_ERROR(ValidateOptions(options));
  KVC_ASSIGN_OR_RETURN(client::Url metadata_url, client::ParseUrl(options.url));
  if (!options.database.empty()) metadata_url.path = "/databases/" + options.database + "/connect";
  BenchRun run(options, std::move(metadata_url));
  return run.Run(stage);
}

}  // namespace kvc::loadgen
