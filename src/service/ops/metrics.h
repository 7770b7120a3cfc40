// Metrics: the server's Prometheus metrics (prometheus-cpp's core registry and text
// serializer), served at GET /metrics by our own router.
//
// Sources: the router's RequestObserver (requests by route, status class and protocol, latency
// per route); every engine's commit stream (a CommitListener: group sizes, transaction and
// commit/fsync latency by origin); counters the service calls (auth failures and rate-limit
// refusals by reason, V8 values made portable by path and outcome); values read at scrape time
// (connections and HTTP/2 streams from the server; per database: queued reads and writes, watch
// subscriptions, read-cache hits and misses, last version, writability), this process's figures
// from /proc under Prometheus' standard `process_*` names (CPU, memory, file descriptors, start
// time) and kvconnect_build_info{version,commit}; per-database key counts and sizes that a
// background thread refreshes every `stats_interval_ms` on the engines' reader threads (counting
// keys is too slow for a scrape); and the registered collectors (service/ops/metrics_collector.h:
// queues, continuous backup, the node registry), in the order they were added. Labels never
// carry tokens or token ids: database names, routes, reasons.
//
// Ownership: does not own the directory (it must outlive Stop()).
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/worker_thread.h"
#include "engine/commit_listener.h"
#include "service/authenticator.h"
#include "service/directory.h"
#include "service/kvconnect/portable_values.h"
#include "service/ops/metrics_collector.h"
#include "service/ops/operator_gate.h"
#include "service/router.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
struct MetricFamily;
class Counter;
class Histogram;
}  // namespace prometheus

namespace kvc::service {

struct MetricsOptions {
  int64_t stats_interval_ms = 15000;  // per-database key counts and sizes
};

// What the network layer reports at scrape time.
struct ConnectionStats {
  uint64_t connections_open = 0;
  uint64_t connections_total = 0;
  int64_t h2_streams_open = 0;
  uint64_t h2_streams_total = 0;
};

class Metrics : public RequestObserver, public AuthObserver, public PortableValueObserver {
 public:
  explicit Metrics(MetricsOptions options);
  ~Metrics() override;

  // Starts the per-database stats thread over `directory`'s databases.
  void Start(Directory* directory);
  void Stop();  // idempotent
  // Adds a connection source (one per listener set); summed at scrape time.
  void AddConnectionSource(std::function<ConnectionStats()> source);
  // Adds a collector, read at every scrape after the built-in families. REQUIRES: `collector`
  // outlives the last Render.
  void AddCollector(const MetricsCollector* collector);

  void OnRequest(const RequestInfo& info) override;
  // Reasons are short fixed words (e.g. "revoked", "expired", "wrong_database").
  void CountAuthFailure(std::string_view reason) override;
  void CountRateLimited(std::string_view reason) override;
  void CountPortableV8(bool on_write, codec::V8PortableOutcome outcome) override;
  // The listener to add to every engine.
  std::shared_ptr<engine::CommitListener> commit_listener();

  // A database's size as last measured by the stats loop (either field -1 when unknown);
  // nullopt before the first measurement.
  struct DatabaseSize {
    int64_t keys = -1;
    int64_t bytes = -1;
    int64_t wal_bytes = -1;  // SQLite only
  };
  std::optional<DatabaseSize> DatabaseSizeOf(const std::string& database_id) const;

  // The Prometheus text exposition (format 0.0.4) of everything.
  std::string Render();

 private:
  class CommitMetrics;
  using DbStats = DatabaseSize;
  struct StatsRound;
  void StatsLoop() KVC_EXCLUDES(mu_);
  // The scrape-time families of the listeners and of every database's engine.
  void CollectConnections(std::vector<ScrapedFamily>* out) KVC_EXCLUDES(mu_);
  void CollectDatabases(std::vector<ScrapedFamily>* out) KVC_EXCLUDES(mu_);
  static void CollectProcess(std::vector<ScrapedFamily>* out);

  const MetricsOptions options_;
  uint64_t instance_ = 0;  // tells instances apart in per-thread caches
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Counter>* auth_failures_;
  prometheus::Family<prometheus::Counter>* rate_limited_;
  // kvconnect_portable_v8_values_total by [on_write][outcome], made up front so counting takes
  // no family lock.
  std::array<std::array<prometheus::Counter*, 4>, 2> portable_v8_{};
  std::shared_ptr<CommitMetrics> commit_listener_;

  mutable Mutex mu_;
  std::vector<std::function<ConnectionStats()>> connection_sources_ KVC_GUARDED_BY(mu_);
  std::vector<const MetricsCollector*> collectors_ KVC_GUARDED_BY(mu_);
  std::map<std::string, DbStats> db_stats_ KVC_GUARDED_BY(mu_);  // by id
  Directory* directory_ = nullptr;                               // set once by Start
  CondVar cv_;
  WorkerThread worker_;
};

// GET /metrics, for whoever `gate` admits (service/ops/operator_gate.h).
class MetricsHandler : public Handler {
 public:
  // REQUIRES: metrics and gate outlive the handler.
  MetricsHandler(Metrics* metrics, const OperatorGate* gate) : metrics_(metrics), gate_(gate) {}
  void Handle(HttpRequest request, Responder respond) override;

 private:
  Metrics* metrics_;
  const OperatorGate* gate_;
};

}  // namespace kvc::service
