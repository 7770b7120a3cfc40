#include "service/ops/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <atomic>
#include <unordered_map>

#include "common/build_info.h"
#include "common/process_stats.h"
#include "service/http_status.h"

namespace kvc::service {
namespace {

// Registers the metric family `builder` makes, named `name` and described by `help`, in `r`.
template <typename Builder>
auto& Register(Builder builder, const char* name, const char* help, prometheus::Registry& r) {
  return builder.Name(name).Help(help).Register(r);
}

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
const prometheus::Histogram::BucketBoundaries kBatchBuckets = {1,  2,  4,   8,   16,
                                                               32, 64, 128, 256, 512};

std::atomic<uint64_t> next_instance{1};

const char* StatusClass(int status) {
  static constexpr std::array<const char*, 6> kClasses = {"1xx", "1xx", "2xx", "3xx", "4xx", "5xx"};
  const int c = status / 100;
  return c >= 1 && c <= 5 ? kClasses[static_cast<size_t>(c)] : "5xx";
}

const char* OriginName(storage::CommitOrigin o) {
  switch (o) {
    case storage::CommitOrigin::kWrite:
      return "write";
    case storage::CommitOrigin::kExpiry:
      return "expiry";
    case storage::CommitOrigin::kOtherWriter:
      return "other_writer";
    case storage::CommitOrigin::kQueue:
      return "queue";
  }
  return "unknown";
}

// A scrape-time family as prometheus-cpp's serializer takes it.
MetricFamily ToPrometheus(ScrapedFamily f) {
  MetricFamily out;
  out.name = std::move(f.name);
  out.help = std::move(f.help);
  out.type = f.type == ScrapedFamily::Type::kCounter ? MetricType::Counter : MetricType::Gauge;
  for (ScrapedFamily::Sample& s : f.samples) {
    ClientMetric m;
    for (auto& [name, value] : s.labels) m.label.push_back({std::move(name), std::move(value)});
    if (out.type == MetricType::Counter) {
      m.counter.value = s.value;
    } else {
      m.gauge.value = s.value;
    }
    out.metric.push_back(std::move(m));
  }
  return out;
}

}  // namespace

// Commit-stream metrics; prometheus-cpp instruments are thread-safe, so one listener serves
// every engine.
class Metrics::CommitMetrics : public engine::CommitListener {
 public:
  explicit CommitMetrics(prometheus::Registry& r)
      : groups_(Register(prometheus::BuildCounter(), "kvconnect_commit_groups_total",
                         "Durable storage transactions published, by origin", r)),
        writes_(Register(prometheus::BuildCounter(), "kvconnect_committed_writes_total",
                         "Atomic writes (records) committed, by origin", r)),
        batch_(Register(prometheus::BuildHistogram(), "kvconnect_commit_batch_writes",
                        "Atomic writes sharing one group commit", r)
                   .Add({}, kBatchBuckets)),
        transaction_(Register(prometheus::BuildHistogram(), "kvconnect_commit_transaction_seconds",
                              "From taking the storage write lock to the commit returning", r)),
        sync_(Register(prometheus::BuildHistogram(), "kvconnect_commit_sync_seconds",
                       "The storage commit call alone (with sync=full mostly fsync)", r)) {}

  void OnCommit(const storage::CommitGroup& g) override {
    const auto index = static_cast<size_t>(g.origin);
    if (index >= slots_.size()) return;  // not an origin this build knows
    Slots& slots = slots_[index];
    const char* origin = OriginName(g.origin);
    Cached(slots.groups, groups_, origin).Increment();
    Cached(slots.writes, writes_, origin).Increment(static_cast<double>(g.records.size()));
    if (g.origin == storage::CommitOrigin::kWrite) {
      batch_.Observe(static_cast<double>(g.records.size()));
    }
    if (g.transaction_us > 0) {
      Cached(slots.transaction, transaction_, origin, kLatencyBuckets)
          .Observe(static_cast<double>(g.transaction_us) / 1e6);
    }
    if (g.commit_us > 0) {
      Cached(slots.sync, sync_, origin, kLatencyBuckets)
          .Observe(static_cast<double>(g.commit_us) / 1e6);
    }
  }

 private:
  // prometheus-cpp's Family::Add builds a new instrument on every call (a histogram: its bucket
  // vectors) and drops it when the labels exist, so each one is looked up once, on first use
  // (a series appears when first observed, as before), and kept. Engines commit on their own
  // threads: two may look one up at once and both get the same instrument.
  template <typename T, typename... Args>
  static T& Cached(std::atomic<T*>& slot, prometheus::Family<T>& family, const char* origin,
                   const Args&... args) {
    T* instrument = slot.load(std::memory_order_acquire);
    if (instrument == nullptr) {
      instrument = &family.Add({{"origin", origin}}, args...);
      slot.store(instrument, std::memory_order_release);
    }
    return *instrument;
  }
  struct Slots {
    std::atomic<prometheus::Counter*> groups{nullptr};
    std::atomic<prometheus::Counter*> writes{nullptr};
    std::atomic<prometheus::Histogram*> transaction{nullptr};
    std::atomic<prometheus::Histogram*> sync{nullptr};
  };
  std::array<Slots, 4> slots_;  // by storage::CommitOrigin
  static_assert(static_cast<size_t>(storage::CommitOrigin::kQueue) == 3,
                "slots_ has one entry per storage::CommitOrigin");

  prometheus::Family<prometheus::Counter>& groups_;
  prometheus::Family<prometheus::Counter>& writes_;
  prometheus::Histogram& batch_;
  prometheus::Family<prometheus::Histogram>& transaction_;
  prometheus::Family<prometheus::Histogram>& sync_;
};

Metrics::Metrics(MetricsOptions options)
    : options_(options), registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &Register(prometheus::BuildCounter(), "kvconnect_http_requests_total",
                        "HTTP requests answered, by route, status class, protocol and transport",
                        *registry_);
  latency_ =
      &Register(prometheus::BuildHistogram(), "kvconnect_http_request_duration_seconds",
                "Time to the response head, by route (watch streams: to their start)", *registry_);
  auth_failures_ = &Register(prometheus::BuildCounter(), "kvconnect_auth_failures_total",
                             "Requests refused for their credentials, by reason", *registry_);
  rate_limited_ = &Register(prometheus::BuildCounter(), "kvconnect_rate_limited_total",
                            "Requests refused by a rate limit, by reason", *registry_);
  auto& portable = Register(
      prometheus::BuildCounter(), "kvconnect_portable_v8_values_total",
      "V8 values converted so Deno and Node both read them (--portable-v8-values), or kept as sent "
      "because the conversion was not provably exact, by path (write, read) and outcome",
      *registry_);
  for (int on_write = 0; on_write < 2; ++on_write) {
    for (auto outcome : {codec::V8PortableOutcome::kReheaded, codec::V8PortableOutcome::kRewritten,
                         codec::V8PortableOutcome::kKept}) {
      portable_v8_[static_cast<size_t>(on_write)][static_cast<size_t>(outcome)] =
          &portable.Add({{"path", on_write != 0 ? "write" : "read"},
                         {"outcome", codec::V8PortableOutcomeName(outcome)}});
    }
  }
  commit_listener_ = std::make_shared<CommitMetrics>(*registry_);
  instance_ = next_instance.fetch_add(1);
}

Metrics::~Metrics() { Stop(); }

std::shared_ptr<engine::CommitListener> Metrics::commit_listener() { return commit_listener_; }

void Metrics::Start(Directory* directory) {
  directory_ = directory;
  worker_.Start("kvc-stats", [this] { StatsLoop(); });
}

void Metrics::Stop() { worker_.Stop(mu_, cv_); }

void Metrics::AddCollector(const MetricsCollector* collector) {
  MutexLock lock(mu_);
  collectors_.push_back(collector);
}

void Metrics::AddConnectionSource(std::function<ConnectionStats()> source) {
  MutexLock lock(mu_);
  connection_sources_.push_back(std::move(source));
}

void Metrics::OnRequest(const RequestInfo& info) {
  // Each thread remembers the instruments it used, so the hot path takes no family lock.
  struct Key {
    uint64_t instance;
    const std::string* route;
    int status_class;
    int protocol;
    bool operator==(const Key& o) const {
      return instance == o.instance && route == o.route && status_class == o.status_class &&
             protocol == o.protocol;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.route) ^ (k.instance * 0x9e3779b97f4a7c15ULL) ^
             (static_cast<size_t>(k.status_class) << 8) ^ static_cast<size_t>(k.protocol);
    }
  };
  struct Instruments {
    prometheus::Counter* requests;
    prometheus::Histogram* latency;
  };
  thread_local std::unordered_map<Key, Instruments, KeyHash> cache;
  const int protocol = (info.http2 ? 1 : 0) | (info.tls ? 2 : 0);
  const Key key{instance_, &info.route, info.status / 100, protocol};
  auto it = cache.find(key);
  if (it == cache.end()) {
    Instruments ins;
    ins.requests = &requests_->Add({{"route", info.route},
                                    {"code", StatusClass(info.status)},
                                    {"protocol", info.http2 ? "h2" : "h1"},
                                    {"transport", info.tls ? "tls" : "plain"}});
    ins.latency = &latency_->Add({{"route", info.route}}, kLatencyBuckets);
    it = cache.emplace(key, ins).first;
  }
  it->second.requests->Increment();
  it->second.latency->Observe(std::chrono::duration<double>(info.latency).count());
}

void Metrics::CountAuthFailure(std::string_view reason) {
  auth_failures_->Add({{"reason", std::string(reason)}}).Increment();
}

void Metrics::CountRateLimited(std::string_view reason) {
  rate_limited_->Add({{"reason", std::string(reason)}}).Increment();
}

void Metrics::CountPortableV8(bool on_write, codec::V8PortableOutcome outcome) {
  prometheus::Counter* c = portable_v8_[on_write ? 1 : 0][static_cast<size_t>(outcome)];
  if (c != nullptr) c->Increment();
}

// One round of per-database counts: the engines' reader threads fill it in, StatsLoop waits
// for it. Shared with the round's callbacks, which may outlive a round that stopped waiting.
struct Metrics::StatsRound {
  explicit StatsRound(size_t databases) : pending(databases) {}
  Mutex mu;
  CondVar cv;
  std::map<std::string, DbStats> results KVC_GUARDED_BY(mu);
  size_t pending KVC_GUARDED_BY(mu);  // callbacks still to come
};

std::optional<Metrics::DatabaseSize> Metrics::DatabaseSizeOf(const std::string& database_id) const {
  MutexLock lock(mu_);
  auto it = db_stats_.find(database_id);
  if (it == db_stats_.end()) return std::nullopt;
  return it->second;
}

void Metrics::StatsLoop() {
  MutexLock lock(mu_);
  while (!worker_.stop_requested()) {
    lock.Unlock();
    auto snap = directory_->snapshot();
    std::map<std::string, DbStats> fresh;
    // Sizes only change with writes, but counting is cheap next to a scrape interval.
    auto round = std::make_shared<StatsRound>(snap->by_id.size());
    for (const auto& [id, db] : snap->by_id) {
      db.engine->QueryStats([id = id, round](Result<storage::StorageStats> r) {
        MutexLock l(round->mu);
        if (r.ok()) round->results[id] = DbStats{r->key_count, r->total_bytes, r->wal_bytes};
        if (--round->pending == 0) round->cv.NotifyAll();
      });
    }
    {
      // Waits for the counts, but not past the interval nor through a Stop().
      MutexLock l(round->mu);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.stats_interval_ms);
      while (round->pending != 0 && !worker_.stop_requested() &&
             std::chrono::steady_clock::now() < deadline) {
        round->cv.WaitFor(round->mu, std::chrono::milliseconds(100));
      }
      fresh = round->results;
    }
    lock.Lock();
    db_stats_ = std::move(fresh);
    const auto next = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(std::max<int64_t>(options_.stats_interval_ms, 10));
    while (!worker_.stop_requested()) {
      if (!cv_.WaitUntil(mu_, next)) break;
    }
  }
}

std::string Metrics::Render() {
  std::vector<ScrapedFamily> scraped;
  CollectConnections(&scraped);
  CollectDatabases(&scraped);
  std::vector<const MetricsCollector*> collectors;
  {
    MutexLock lock(mu_);
    collectors = collectors_;
  }
  for (const MetricsCollector* c : collectors) c->Collect(&scraped);
  CollectProcess(&scraped);
  std::vector<MetricFamily> families = registry_->Collect();
  for (ScrapedFamily& f : scraped) families.push_back(ToPrometheus(std::move(f)));
  return prometheus::TextSerializer().Serialize(families);
}

void Metrics::CollectConnections(std::vector<ScrapedFamily>* out) {
  ConnectionStats conn;
  {
    MutexLock lock(mu_);
    for (const auto& src : connection_sources_) {
      const ConnectionStats s = src();
      conn.connections_open += s.connections_open;
      conn.connections_total += s.connections_total;
      conn.h2_streams_open += s.h2_streams_open;
      conn.h2_streams_total += s.h2_streams_total;
    }
  }
  using F = ScrapedFamily;
  out->push_back(F::Gauge("kvconnect_connections_open", "Client connections open"));
  out->back().Add(static_cast<double>(conn.connections_open));
  out->push_back(F::Counter("kvconnect_connections_total", "Client connections accepted"));
  out->back().Add(static_cast<double>(conn.connections_total));
  out->push_back(F::Gauge("kvconnect_http2_streams_open", "HTTP/2 streams open"));
  out->back().Add(static_cast<double>(conn.h2_streams_open));
  out->push_back(F::Counter("kvconnect_http2_streams_total", "HTTP/2 streams accepted"));
  out->back().Add(static_cast<double>(conn.h2_streams_total));
}

void Metrics::CollectDatabases(std::vector<ScrapedFamily>* out) {
  std::map<std::string, DbStats> db_stats;
  {
    MutexLock lock(mu_);
    db_stats = db_stats_;
  }
  using F = ScrapedFamily;
  F keys = F::Gauge("kvconnect_database_keys",
                    "Keys stored (expired ones not yet swept included), refreshed in the "
                    "background");
  F bytes = F::Gauge("kvconnect_database_bytes", "Bytes the database occupies in storage");
  F wal = F::Gauge("kvconnect_database_wal_bytes",
                   "Bytes of the database's SQLite write-ahead log file: near "
                   "--sqlite-wal-limit-pages pages at most, unless a long read holds a snapshot");
  F version = F::Gauge("kvconnect_database_last_version",
                       "The committed version (first 8 bytes of the last versionstamp)");
  F writable = F::Gauge("kvconnect_database_writable",
                        "1 while the database accepts writes, 0 after a storage failure");
  F watches = F::Gauge("kvconnect_watch_subscriptions", "Open watch streams");
  F qreads = F::Gauge("kvconnect_queued_reads", "Reads waiting for a reader thread");
  F qwrites = F::Gauge("kvconnect_queued_writes", "Writes waiting for the writer thread");
  F hits = F::Counter("kvconnect_read_cache_hits_total", "Reads answered from the read cache");
  F misses = F::Counter("kvconnect_read_cache_misses_total",
                        "Point reads that went to storage while the cache was on");
  F storage_reads = F::Counter(
      "kvconnect_storage_reads_total",
      "Storage calls that answered snapshot reads not answered from the cache (point reads "
      "waiting together share one)");
  F refused = F::Counter("kvconnect_overload_refusals_total",
                         "Requests refused with 503 because a queue was full, by kind");
  F retries = F::Counter("kvconnect_commit_retries_total",
                         "Group commits run again after the storage refused them for a conflict");
  F cache_entries = F::Gauge("kvconnect_read_cache_entries", "Keys the read cache holds");
  F cache_bytes = F::Gauge("kvconnect_read_cache_bytes",
                           "Bytes the read cache's entries are charged (at most "
                           "kvconnect_read_cache_limit_bytes, give or take what it gives back)");
  F cache_limit = F::Gauge("kvconnect_read_cache_limit_bytes",
                           "What the read cache may hold now: its share of --read-cache-total "
                           "(what the other databases leave, or an equal part if more), at most "
                           "--read-cache-bytes");
  F prewarm_running = F::Gauge("kvconnect_read_cache_prewarm_running",
                               "1 while the read cache is being filled from the database after "
                               "the start (--read-cache-prewarm)");
  F prewarm_entries =
      F::Gauge("kvconnect_read_cache_prewarmed_entries", "Entries the read cache prewarm stored");
  F prewarm_seconds = F::Gauge("kvconnect_read_cache_prewarm_seconds",
                               "How long the read cache prewarm took (so far, while it runs)");
  if (directory_) {
    const std::shared_ptr<const Directory::Snapshot> snap = directory_->snapshot();
    for (const auto& [id, db] : snap->by_id) {
      const engine::Engine& e = *db.engine;
      const std::string& name = db.record.name;
      const F::Labels l = {{"database", name}};
      if (auto it = db_stats.find(id); it != db_stats.end()) {
        if (it->second.keys >= 0) keys.Add(static_cast<double>(it->second.keys), l);
        if (it->second.bytes >= 0) bytes.Add(static_cast<double>(it->second.bytes), l);
        if (it->second.wal_bytes >= 0) wal.Add(static_cast<double>(it->second.wal_bytes), l);
      }
      version.Add(static_cast<double>(e.committed_version()), l);
      writable.Add(e.writable() ? 1 : 0, l);
      watches.Add(static_cast<double>(e.watch_count()), l);
      qreads.Add(static_cast<double>(e.queued_reads()), l);
      qwrites.Add(static_cast<double>(e.queued_writes()), l);
      const engine::EngineCounters& c = e.counters();
      hits.Add(static_cast<double>(c.cache_hits.load()), l);
      misses.Add(static_cast<double>(c.cache_misses.load()), l);
      storage_reads.Add(static_cast<double>(c.storage_reads.load()), l);
      refused.Add(static_cast<double>(c.reads_refused.load()),
                  {{"database", name}, {"kind", "read"}});
      refused.Add(static_cast<double>(c.writes_refused.load()),
                  {{"database", name}, {"kind", "write"}});
      retries.Add(static_cast<double>(c.commit_retries.load()), l);
      cache_entries.Add(static_cast<double>(e.read_cache().entry_count()), l);
      cache_bytes.Add(static_cast<double>(e.read_cache().charged_bytes()), l);
      cache_limit.Add(static_cast<double>(e.read_cache().limit_bytes()), l);
      const engine::Engine::PrewarmProgress p = e.prewarm_progress();
      prewarm_running.Add(p.running ? 1 : 0, l);
      prewarm_entries.Add(static_cast<double>(p.entries), l);
      prewarm_seconds.Add(p.seconds, l);
    }
  }
  for (F* f : {&keys, &bytes, &wal, &version, &writable, &watches, &qreads, &qwrites, &hits,
               &misses, &storage_reads, &refused, &retries, &cache_entries, &cache_bytes,
               &cache_limit, &prewarm_running, &prewarm_entries, &prewarm_seconds}) {
    out->push_back(std::move(*f));
  }
}

void Metrics::CollectProcess(std::vector<ScrapedFamily>* out) {
  using F = ScrapedFamily;
  out->push_back(F::Gauge("kvconnect_build_info",
                          "Always 1; the version and the git commit the server was built from, "
                          "and its allocator (jemalloc or libc)"));
  out->back().Add(
      1, {{"version", BuildVersion()}, {"commit", BuildCommit()}, {"allocator", AllocatorInUse()}});
  // Prometheus' standard process metrics (the names its client libraries use), from /proc.
  const std::optional<ProcessStats> p = ReadProcessStats();
  if (!p) return;
  auto add = [out](F f, double value) {
    f.Add(value);
    out->push_back(std::move(f));
  };
  add(F::Counter("process_cpu_seconds_total",
                 "CPU time this process used, user and system, in seconds"),
      p->cpu_seconds);
  add(F::Gauge("process_resident_memory_bytes", "Resident set size of this process, in bytes"),
      static_cast<double>(p->resident_bytes));
  add(F::Gauge("process_virtual_memory_bytes", "Virtual memory size of this process, in bytes"),
      static_cast<double>(p->virtual_bytes));
  if (p->open_fds >= 0) {
    add(F::Gauge("process_open_fds", "File descriptors this process has open"),
        static_cast<double>(p->open_fds));
  }
  if (p->max_fds >= 0) {
    add(F::Gauge("process_max_fds",
                 "The most file descriptors this process may open (soft RLIMIT_NOFILE)"),
        static_cast<double>(p->max_fds));
  }
  if (p->start_time_seconds > 0) {
    add(F::Gauge("process_start_time_seconds",
                 "When this process started, in seconds since the Unix epoch"),
        p->start_time_seconds);
  }
}

void MetricsHandler::Handle(HttpRequest request, Responder respond) {
  gate_->Check(request, [this, respond = std::move(respond)](const Status& s) {
    if (!s.ok()) {
      respond(ErrorResponse(s));
      return;
    }
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_->Render();
    respond(std::move(r));
  });
}

}  // namespace kvc::service
