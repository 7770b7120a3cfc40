#include "cli/application.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <thread>

#include "cli/secrets.h"
#include "codec/json_depth.h"
#include "common/clock.h"
#include "common/random.h"

namespace kvc::cli {

bool ParseAddr(const std::string& addr, std::string* host, uint16_t* port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) return false;
  *host = addr.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  try {
    int p = std::stoi(addr.substr(colon + 1));
    if (p < 0 || p > 65535) return false;
    *port = static_cast<uint16_t>(p);
  } catch (...) {
    return false;
  }
  return !host->empty();
}

namespace {

std::string UrlOf(bool tls, const std::string& host, uint16_t port) {
  return std::string(tls ? "https://" : "http://") +
         (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

storage::StorageOptions StorageOptionsOf(const ServeConfig& c) {
  storage::StorageOptions o;
  o.location = c.data_dir;
  o.sync = c.sync == "full"     ? storage::SyncMode::kFull
           : c.sync == "normal" ? storage::SyncMode::kNormal
                                : storage::SyncMode::kOff;
  o.mmap_bytes = c.sqlite_mmap_bytes;
  o.default_database_file = c.sqlite_path;
  if (!c.postgres.empty()) {
    o.kind = "postgres";
    o.location = c.postgres;
    o.read_location = c.postgres_read;
    o.change_retention_ms = c.pg_change_retention_ms;
    o.feed_poll_ms = c.pg_feed_poll_ms;
    o.commit_outcome_wait_ms = c.pg_commit_check_ms;
  }
  return o;
}

}  // namespace

Result<std::unique_ptr<Application>> Application::Open(ServeConfig config) {
  std::unique_ptr<Application> app(new Application(std::move(config)));
  KVC_RETURN_IF_ERROR(app->Init());
  return app;
}

Application::~Application() { Shutdown(); }

Status Application::Init() {
  ServeConfig& c = config_;
  if (!c.postgres.empty()) {
    if (!c.sqlite_path.empty()) {
      return InvalidArgument("--sqlite-path and --postgres exclude each other");
    }
    if (!c.backup_to.empty() || !c.backup_allow.empty()) {
      return InvalidArgument(
          "--backup-to and --backup-allow are for SQLite storage; with --postgres use "
          "PostgreSQL's own backups (pg_basebackup and WAL archiving)");
    }
  } else if (!c.postgres_read.empty()) {
    return InvalidArgument("--postgres-read needs --postgres");
  }
  // Storage: catalog, a backend per database, and secrets (storage/storage.h).
  KVC_ASSIGN_OR_RETURN(storage_, storage::OpenStorage(StorageOptionsOf(c)));
  auto lock = storage_->LockWriters();
  if (!lock.ok()) {
    return Status(lock.status().code(),
                  lock.status().message() +
                      "; stop that process first (an offline `kvconnect import` holds it until it "
                      "ends), or give this server a --data-dir of its own");
  }
  writer_lock_ = std::move(*lock);
  // Backup destinations (the data directory exists now, so its symlinks resolve): refused
  // when relative or touching the data directory.
  backup::BackupDestinations destinations;
  if (c.postgres.empty()) {
    KVC_ASSIGN_OR_RETURN(
        destinations, backup::BackupDestinations::Create(c.backup_to, c.backup_allow, c.data_dir));
  }

  // Bootstrap access token: flag or file, then environment, then the storage's secret
  // kAccessTokenSecret (generated on first start). Push secrets from files or the environment.
  KVC_RETURN_IF_ERROR(LoadServeSecrets(c));
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("KVCONNECT_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("DENO_KV_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  if (c.access_token.empty()) {
    KVC_ASSIGN_OR_RETURN(c.access_token,
                         storage_->LoadOrCreateSecret(
                             kAccessTokenSecret, [] { return "kvc_" + HexEncode(RandomBytes(24)); },
                             &token_created_));
    token_from_file_ = true;
  }
  if (c.access_token.size() < 12) {
    return InvalidArgument("the access token must be at least 12 characters long");
  }
  bool secret_created = false;
  KVC_ASSIGN_OR_RETURN(
      secret_, storage_->LoadOrCreateSecret(
                   "server-secret", [] { return HexEncode(RandomBytes(32)); }, &secret_created));

  c.directory.engine = c.engine;
  c.directory.engine.task_factories.push_back(queue::Queue::Factory(c.queue));
  if (!c.backup_to.empty()) {
    KVC_ASSIGN_OR_RETURN(auto target, backup::OpenTarget(c.backup_to, backup::TargetOptions{}));
    KVC_ASSIGN_OR_RETURN(c.backup.scratch_dir, storage_->ScratchDirectory());
    backup_ = std::make_unique<backup::ContinuousBackup>(std::move(target), c.backup);
    c.directory.engine.change_log = true;  // every commit is logged in its own transaction
  }
  directory_ = std::make_unique<service::Directory>(
      &storage_->catalog(),
      [s = storage_.get()](const storage::DatabaseRecord& rec) { return s->OpenBackend(rec); },
      c.directory);

  // Per-database listeners attach as each engine opens.
  metrics_ = std::make_unique<service::Metrics>(c.metrics);
  directory_->AddEngineHook([m = metrics_.get()](const storage::DatabaseRecord&,
                                                 const std::shared_ptr<engine::Engine>& e) {
    e->AddListener(m->commit_listener());
  });
  KVC_RETURN_IF_ERROR(ParsePushOptions());
  if (!push_options_.empty()) {
    directory_->AddEngineHook(
        [this](const storage::DatabaseRecord& rec, const std::shared_ptr<engine::Engine>& e) {
          auto it = push_options_.find(rec.name);
          if (it != push_options_.end()) StartPush(rec.name, it->second, *e);
        });
  }
  if (backup_) {
    directory_->AddEngineHook([b = backup_.get()](const storage::DatabaseRecord& rec,
                                                  const std::shared_ptr<engine::Engine>& e) {
      b->Attach(rec.name, rec.id, e);
    });
  }
  KVC_RETURN_IF_ERROR(directory_->Start());
  metrics_->Start(directory_.get());
  if (storage::NodeRegistry* nodes = storage_->nodes()) {
    metrics_->SetNodeSource([nodes] {
      service::Metrics::NodeStats st;
      for (const storage::NodeInfo& n : nodes->LiveNodes()) {
        ++(n.role == "eventual" ? st.eventual_live : st.strong_live);
      }
      st.replica_lag_ms = nodes->ReplicaLagMs();
      st.reading_from_replica = nodes->ReadingFromReplica();
      return st;
    });
  }
  health_ = std::make_unique<service::Health>(directory_.get());
  if (backup_) {
    backup_->Start();
    metrics_->SetBackupSource([b = backup_.get()] { return b->Statuses(); });
    health_->SetDetailSource([b = backup_.get()] {
      std::vector<std::string> lines;
      for (const backup::BackupStatus& s : b->Statuses()) {
        std::string line = "backup of '" + s.database + "': shipped through version " +
                           std::to_string(s.shipped_version) + ", " +
                           std::to_string(s.lag_entries) + " commit(s) pending (oldest " +
                           std::to_string(s.lag_ms / 1000) + " s)";
        if (!s.last_error.empty()) line += ", last error: " + s.last_error;
        lines.push_back(std::move(line));
      }
      return lines;
    });
  }

  c.service.access_token = c.access_token;
  if (storage::NodeRegistry* nodes = storage_->nodes()) {
    // Several nodes serve this storage: list the live ones in metadata answers.
    node_id_ = HexEncode(RandomBytes(8));
    c.service.self_consistency = c.postgres_read.empty() ? "strong" : "eventual";
    c.service.peer_endpoints = [nodes, self = node_id_] {
      std::vector<std::pair<std::string, std::string>> out;
      for (const storage::NodeInfo& n : nodes->LiveNodes()) {
        if (n.id != self) out.emplace_back(n.url, n.role);
      }
      return out;
    };
  }
  codec::SetMaxJsonDepth(c.service.max_json_depth);
  body_pool_ = std::make_unique<service::WorkPool>(c.service.body_pool, "request body pool");
  kv_ =
      std::make_unique<service::KvService>(c.service, secret_, directory_.get(), body_pool_.get());
  kv_->SetAuthObserver(metrics_.get());
  kv_->SetPortableValueObserver(metrics_.get());
  admin_ops_ = std::make_unique<service::AdminOps>(&storage_->catalog(), storage_.get());
  admin_api_ = std::make_unique<service::AdminApi>(c.admin, directory_.get(), kv_->authenticator(),
                                                   admin_ops_.get(), metrics_.get());
  admin_api_->SetStorage(storage_.get());
  admin_api_->SetBackupDestinations(std::move(destinations));
  live_handler_ =
      std::make_unique<service::HealthHandler>(health_.get(), service::HealthHandler::Kind::kLive);
  // --metrics-public opens the metrics listener if there is one, else the main listener.
  const bool main_open = c.metrics_public && c.metrics_addr.empty();
  for (auto [routes, open] :
       {std::pair{&main_operator_, main_open}, std::pair{&metrics_operator_, c.metrics_public}}) {
    routes->gate = std::make_unique<service::OperatorGate>(kv_->authenticator(), open);
    routes->metrics = std::make_unique<service::MetricsHandler>(metrics_.get(), routes->gate.get());
    routes->ready = std::make_unique<service::HealthHandler>(
        health_.get(), service::HealthHandler::Kind::kReady, routes->gate.get());
  }
  if (c.console) console_handler_ = std::make_unique<service::ConsoleHandler>();

  // Routes: each service registers its endpoints (one metrics route each).
  using M = service::Router::Match;
  // `/` is KV Connect's metadata exchange; a browser's GET there is sent to the console.
  root_handler_ = std::make_unique<service::RootHandler>(
      kv_.get(), console_handler_ ? service::ConsoleHandler::kPrefix : "");
  kv_->AddRoutes(&router_, root_handler_.get());
  queue_api_ = std::make_unique<service::QueueApi>(c.queue_api, directory_.get(),
                                                   kv_->authenticator(), body_pool_.get());
  queue_api_->AddRoutes(&router_);
  admin_api_->AddRoutes(&router_);
  // The web console's files; it answers its own 404s and 405s, with its security headers.
  if (console_handler_) {
    router_.Add("console", M::kPrefix, service::ConsoleHandler::kPrefix, {},
                console_handler_.get());
  }
  for (auto [r, routes] :
       {std::pair{&router_, &main_operator_}, std::pair{&metrics_router_, &metrics_operator_}}) {
    r->Add("healthz", M::kExact, "/healthz", {"GET", "HEAD"}, live_handler_.get());
    r->Add("readyz", M::kExact, "/readyz", {"GET", "HEAD"}, routes->ready.get());
    r->Add("metrics", M::kExact, "/metrics", {"GET", "HEAD"}, routes->metrics.get());
    r->SetObserver(metrics_.get());
  }
  return Status::Ok();
}

Status Application::Start() {
  server_ = std::make_unique<net::Server>(config_.net, &router_);
  KVC_RETURN_IF_ERROR(server_->Start());
  metrics_->AddConnectionSource([s = server_.get()] {
    const net::ServerStats st = s->stats();
    return service::ConnectionStats{st.connections_open, st.connections_total, st.h2_streams_open,
                                    st.h2_streams_total};
  });
  if (!config_.metrics_addr.empty()) {
    net::ServerOptions o;
    if (!ParseAddr(config_.metrics_addr, &o.host, &o.port)) {
      return InvalidArgument("--metrics-addr must be HOST:PORT, got '" + config_.metrics_addr +
                             "'");
    }
    o.io_threads = 1;
    o.max_connections = 64;
    metrics_server_ = std::make_unique<net::Server>(o, &metrics_router_);
    KVC_RETURN_IF_ERROR(metrics_server_->Start());
  }
  if (storage::NodeRegistry* nodes = storage_->nodes()) {
    storage::NodeInfo self;
    self.id = node_id_;
    self.url = !config_.advertise_url.empty()        ? config_.advertise_url
               : !config_.service.public_url.empty() ? config_.service.public_url
                                                     : url();
    while (!self.url.empty() && self.url.back() == '/') self.url.pop_back();
    self.role = config_.service.self_consistency;
    self.region = config_.region;
    self.started_ms = NowUnixMs();
    nodes->Start(self, config_.node_heartbeat_ms, config_.max_replica_lag_ms);
    spdlog::info("registered as a {} node at {}", self.role, self.url);
  }
  return Status::Ok();
}

void Application::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (health_) health_->SetDraining();
  if (storage_ && storage_->nodes()) storage_->nodes()->Stop();  // others stop listing us
  if (server_ && config_.shutdown_drain_ms > 0) {
    spdlog::info("not ready; draining for {} ms before closing the listeners",
                 config_.shutdown_drain_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.shutdown_drain_ms));
  }
  if (server_) (void)server_->Stop(std::chrono::milliseconds(config_.shutdown_grace_ms));
  if (metrics_server_) (void)metrics_server_->Stop(std::chrono::milliseconds(0));
  if (metrics_) metrics_->Stop();
  StopPushes();
  if (backup_) backup_->Stop();  // ships what is pending, while the engines still run
  if (directory_) directory_->Stop();
}

Status Application::ParsePushOptions() {
  const ServeConfig& c = config_;
  auto split = [](const std::string& item,
                  const char* flag) -> Result<std::pair<std::string, std::string>> {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return InvalidArgument(std::string(flag) + " takes NAME=VALUE, got '" + item + "'");
    }
    return std::make_pair(item.substr(0, eq), item.substr(eq + 1));
  };
  for (const std::string& item : c.queue_push) {
    KVC_ASSIGN_OR_RETURN(auto kv, split(item, "--queue-push"));
    queue::PushOptions& o = push_options_[kv.first];
    o.url = kv.second;
    o.allow_hosts = c.queue_push_allow;
    o.concurrency = c.queue_push_concurrency;
    o.timeout_ms = c.queue_push_timeout_ms;
    o.visibility_ms = std::max(o.visibility_ms, c.queue_push_timeout_ms * 2);
    o.format = c.queue_push_format;
  }
  for (const std::string& item : c.queue_push_secrets) {
    KVC_ASSIGN_OR_RETURN(auto kv, split(item, "--queue-push-secret"));
    auto it = push_options_.find(kv.first);
    if (it == push_options_.end()) {
      return InvalidArgument("--queue-push-secret names database '" + kv.first +
                             "', which has no --queue-push URL");
    }
    it->second.secrets.push_back(kv.second);
  }
  for (const auto& [name, o] : push_options_) {
    Status s = queue::ValidatePushOptions(o);
    if (!s.ok()) return InvalidArgument("push delivery of '" + name + "': " + s.message());
  }
  return Status::Ok();
}

void Application::StartPush(const std::string& name, const queue::PushOptions& options,
                            engine::Engine& engine) {
  std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(engine);
  if (!q) return;
  std::weak_ptr<queue::Queue> weak = q;  // the queue holds the dispatcher: no cycle
  const bool v8 = options.format == "v8";
  auto d = queue::PushDispatcher::Start(
      options,
      [weak](queue::SettleRequest r, queue::Queue::SettleCallback cb) {
        if (auto queue = weak.lock()) {
          queue->Settle(std::move(r), std::move(cb));
        } else {
          cb(Unavailable("The queue stopped."));
        }
      },
      [v8](const queue::Delivery& m) -> Result<std::string> {
        KVC_ASSIGN_OR_RETURN(std::string value, service::QueueValueOf(m.payload, v8));
        return queue::PushBody(m, value, NowUnixMs());
      });
  if (!d.ok()) {
    spdlog::error("push delivery of '{}' did not start: {}", name, d.status().ToString());
    return;
  }
  auto sub = q->Subscribe((*d)->consumer_options(), *d);
  if (!sub.ok()) {
    spdlog::error("push delivery of '{}' did not start: {}", name, sub.status().ToString());
    (*d)->Stop();
    return;
  }
  spdlog::info("pushing the queue of '{}' to {}", name, options.url);
  MutexLock lock(push_mu_);
  pushes_.push_back(Push{std::move(*d), std::move(*sub)});
}

void Application::StopPushes() {
  std::vector<Push> pushes;
  {
    MutexLock lock(push_mu_);
    pushes.swap(pushes_);
  }
  for (Push& p : pushes) {
    p.subscription.reset();
    p.dispatcher->Stop();
  }
}

Status Application::ReloadTls() {
  if (!config_.net.tls && config_.net.tls_host.empty()) {
    return InvalidArgument("nothing to reload (no TLS)");
  }
  return server_->ReloadTls();
}

std::string Application::url() const {
  return server_ ? UrlOf(config_.net.tls, config_.net.host, server_->bound_port()) : "";
}

std::string Application::tls_url() const {
  return server_ && !config_.net.tls_host.empty()
             ? UrlOf(true, config_.net.tls_host, server_->bound_tls_port())
             : "";
}

BoundListeners Application::listeners() const {
  BoundListeners l;
  l.main = {config_.net.host, server_->bound_port(), url()};
  if (!config_.net.tls_host.empty()) {
    l.tls = BoundListener{config_.net.tls_host, server_->bound_tls_port(), tls_url()};
  }
  if (metrics_server_) {
    BoundListener m;
    (void)ParseAddr(config_.metrics_addr, &m.host, &m.port);
    m.port = metrics_server_->bound_port();
    m.url = metrics_url();
    l.metrics = std::move(m);
  }
  return l;
}

std::string Application::metrics_url() const {
  if (!metrics_server_) return "";
  std::string host;
  uint16_t port = 0;
  (void)ParseAddr(config_.metrics_addr, &host, &port);
  return UrlOf(false, host, metrics_server_->bound_port());
}

}  // namespace kvc::cli
