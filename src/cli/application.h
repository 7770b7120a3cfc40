// Application: everything `kvconnect serve` runs, owned in one place and wired once: the
// storage (catalog, databases, token-signing secret; storage/storage.h, opened from the storage
// spec), the components (components/component.h: backup shipping, queue push, node
// registration), the directory of engines, the authenticator, the services (KV Connect, admin
// and queue APIs, metrics and health), the router that dispatches to them, and the listeners (the
// client listener(s) and an optional separate metrics listener). RunServe is only flags, signals
// and the banner around it.
//
// Adding an endpoint is its handler plus one registration in its service's AddRoutes; adding a
// subsystem that attaches to every database (backups, queue push) is a component.
//
// Ownership: owns everything above; destruction stops what is still running.
// Thread-safety: Open/Start/Shutdown from one controlling thread; ReloadTls from that thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backup/destinations.h"
#include "cli/serve.h"
#include "components/component.h"
#include "net/server.h"
#include "queue/queue.h"
#include "service/admin/admin_api.h"
#include "service/admin/admin_ops.h"
#include "service/admin/console.h"
#include "service/admin/root_redirect.h"
#include "service/authenticator.h"
#include "service/directory.h"
#include "service/kvconnect/kv_service.h"
#include "service/ops/cache_budget_metrics.h"
#include "service/ops/health.h"
#include "service/ops/metrics.h"
#include "service/queue/queue_api.h"
#include "service/queue/queue_metrics.h"
#include "service/router.h"
#include "storage/storage.h"

namespace kvc::cli {

// The secret holding the bootstrap access token, when it is neither a flag nor in the
// environment.
inline constexpr const char* kAccessTokenSecret = "access-token";

// A bound listener: the host it was given, the port it got (the kernel's choice when the flag
// said 0) and its URL.
struct BoundListener {
  std::string host;
  uint16_t port = 0;
  std::string url;  // e.g. http://127.0.0.1:4512; an IPv6 host in brackets
};

// Every listener of a started server.
struct BoundListeners {
  BoundListener main;                    // --addr (TLS when --tls-cert without --tls-addr)
  std::optional<BoundListener> tls;      // --tls-addr
  std::optional<BoundListener> metrics;  // --metrics-addr
};

class Application {
 public:
  // Opens the storage (the storage spec of config.storage, --data-dir or --postgres) and every
  // database, wires the components and builds the services. Listens nowhere yet. Errors:
  // InvalidArgument (a bad option), the storage's. REQUIRES: config.net and config.metrics_net
  // hold the parsed listen addresses (ParseListenAddresses).
  static Result<std::unique_ptr<Application>> Open(ServeConfig config);
  ~Application();

  // Binds the listeners, starts serving and starts the components.
  Status Start();
  // Readiness 503 at once; after `drain_ms` (so load balancers notice) stops accepting,
  // finishes in-flight requests up to the grace period, ends streams, closes databases.
  // Idempotent.
  void Shutdown();
  Status ReloadTls();

  std::string url() const;          // the primary listener, e.g. http://127.0.0.1:4512
  std::string tls_url() const;      // the second (TLS) listener, or empty
  std::string metrics_url() const;  // the separate metrics listener, or empty
  // The listeners with their bound ports. REQUIRES: Start() succeeded.
  BoundListeners listeners() const;
  const ServeConfig& config() const { return config_; }
  const storage::Storage& storage() const { return *storage_; }
  // The bootstrap token came from (and, if created, was written to) the storage's secret
  // kAccessTokenSecret.
  bool token_from_file() const { return token_from_file_; }
  bool token_created() const { return token_created_; }
  service::Directory& directory() { return *directory_; }
  // Whether the web console is served (at service::ConsoleHandler::kPrefix).
  bool console_enabled() const { return console_handler_ != nullptr; }

 private:
  explicit Application(ServeConfig config) : config_(std::move(config)) {}
  Status Init();
  // The steps of Init, in order.
  Status OpenStorage();     // the storage, its writer claim, the backup destinations
  Status LoadSecrets();     // the bootstrap access token, the server secret
  void MakeComponents();    // the components this configuration turns on
  Status WireComponents();  // each component's Wire; then the directory with their hooks
  void MakeServices();      // the authenticator, the handlers
  void AddRoutes();         // every endpoint on the routers

  ServeConfig config_;
  storage::StorageOptions storage_options_;    // the storage as opened
  std::unique_ptr<storage::Storage> storage_;  // outlives everything that uses its catalog
  // The storage's writer claim, held from Init until everything else is gone, so an offline
  // import (or a second server) never writes beside this one.
  std::unique_ptr<storage::WriterLock> writer_lock_;
  backup::BackupDestinations backup_destinations_;  // for the admin API's on-demand backups
  std::string secret_;
  bool token_from_file_ = false;
  bool token_created_ = false;
  // Started in order, stopped in reverse; they outlive the directory and the metrics that call
  // what they registered.
  std::vector<std::unique_ptr<components::Component>> components_;
  components::Wiring wiring_;  // what the components registered
  std::unique_ptr<service::Directory> directory_;
  std::unique_ptr<service::QueueMetrics> queue_metrics_;  // a collector: outlives metrics_
  std::unique_ptr<service::CacheBudgetMetrics> cache_budget_metrics_;  // likewise
  std::unique_ptr<service::Metrics> metrics_;
  std::unique_ptr<service::Health> health_;
  std::unique_ptr<service::Authenticator> auth_;  // shared by every API, so one rate limit
  std::unique_ptr<service::KvService> kv_;
  std::unique_ptr<service::AdminOps> admin_ops_;
  std::unique_ptr<service::AdminApi> admin_api_;
  std::unique_ptr<service::QueueApi> queue_api_;
  // Parses metadata and queue API bodies off the I/O threads; after the handlers that post to it,
  // so it finishes their queued work (and joins) before they go away.
  std::unique_ptr<service::WorkPool> body_pool_;
  std::unique_ptr<service::HealthHandler> live_handler_;
  // /metrics and /readyz per router (main, metrics listener), each with who may read the
  // operator details there (--metrics-public opens one of them).
  struct OperatorRoutes {
    std::unique_ptr<service::OperatorGate> gate;
    std::unique_ptr<service::MetricsHandler> metrics;
    std::unique_ptr<service::HealthHandler> ready;
  };
  OperatorRoutes main_operator_;
  OperatorRoutes metrics_operator_;
  std::unique_ptr<service::ConsoleHandler> console_handler_;  // null: the console is off
  std::unique_ptr<service::RootHandler> root_handler_;        // `/`: metadata, or browsers
  service::Router router_;                                    // every endpoint
  service::Router metrics_router_;  // the separate metrics listener's endpoints
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<net::Server> metrics_server_;
  bool shut_down_ = false;
};

// "HOST:PORT" (IPv6 in brackets) -> host and port. False if malformed.
bool ParseAddr(const std::string& addr, std::string* host, uint16_t* port);

}  // namespace kvc::cli
