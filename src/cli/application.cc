#include "cli/application.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iterator>
#include <memory>
#include <thread>

#include "cli/flags.h"
#include "cli/secrets.h"
#include "codec/json_depth.h"
#include "common/process_stats.h"
#include "common/random.h"
#include "components/backup_shipping/backup_shipping.h"
#include "components/node_registry/node_registration.h"
#include "components/queue_push/queue_push.h"
#include "engine/cache_budget.h"

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

storage::SyncMode SyncModeOf(const std::string& sync) {
  return sync == "full"     ? storage::SyncMode::kFull
         : sync == "normal" ? storage::SyncMode::kNormal
                            : storage::SyncMode::kOff;
}

}  // namespace

Result<std::unique_ptr<Application>> Application::Open(ServeConfig config) {
  std::unique_ptr<Application> app(new Application(std::move(config)));
  KVC_RETURN_IF_ERROR(app->Init());
  return app;
}

Application::~Application() { Shutdown(); }

Status Application::Init() {
  KVC_RETURN_IF_ERROR(OpenStorage());
  KVC_RETURN_IF_ERROR(LoadSecrets());
  MakeComponents();
  KVC_RETURN_IF_ERROR(WireComponents());
  MakeServices();
  AddRoutes();
  return Status::Ok();
}

Status Application::OpenStorage() {
  const ServeConfig& c = config_;
  storage::StorageOptions base = c.storage_options;
  base.sync = SyncModeOf(c.sync);
  const StorageFlags flags{c.storage, c.data_dir, c.postgres};
  KVC_ASSIGN_OR_RETURN(storage_options_, ResolveStorage(flags, base));
  const bool sqlite = storage_options_.kind == "sqlite";
  KVC_ASSIGN_OR_RETURN(storage_, storage::OpenStorage(storage_options_));
  KVC_ASSIGN_OR_RETURN(
      writer_lock_, ClaimWriters(*storage_,
                                 "; stop that process first (an offline `kvconnect import` holds "
                                 "it until it ends), or give this server a --data-dir of its "
                                 "own"));
  // Backup destinations (the data directory exists now, so its symlinks resolve): refused
  // when relative or touching the data directory (a storage without one has none to protect).
  KVC_ASSIGN_OR_RETURN(backup_destinations_,
                       backup::BackupDestinations::Create(c.backup_to, c.backup_allow,
                                                          sqlite ? storage_options_.location : ""));
  return Status::Ok();
}

Status Application::LoadSecrets() {
  // Bootstrap access token: flag or file, then environment, then the storage's secret
  // kAccessTokenSecret (generated on first start). Push secrets from files or the environment.
  ServeConfig& c = config_;
  KVC_RETURN_IF_ERROR(LoadServeSecrets(c));
  for (const char* name : {"KVCONNECT_ACCESS_TOKEN", "DENO_KV_ACCESS_TOKEN"}) {
    const char* e = std::getenv(name);
    if (c.access_token.empty() && e != nullptr && *e != '\0') c.access_token = e;
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
  return Status::Ok();
}

void Application::MakeComponents() {
  const ServeConfig& c = config_;
  if (!c.backup_to.empty()) {
    components_.push_back(std::make_unique<components::BackupShipping>(c.backup_to, c.backup));
  }
  components_.push_back(std::make_unique<components::QueuePush>(components::QueuePushFlags{
      c.queue_push, c.queue_push_secrets, c.queue_push_allow, c.queue_push_concurrency,
      c.queue_push_timeout_ms, c.queue_push_format}));
  if (storage::NodeRegistry* nodes = storage_->nodes()) {
    components_.push_back(std::make_unique<components::NodeRegistration>(nodes, c.nodes));
  }
}

namespace {

// "1.5 GiB": a size for people.
std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

// The read caches' shared budget of --read-cache-total, into c->engine. `shared_storage`: other
// servers write the same databases (PostgreSQL nodes), so engines keep no read cache.
Status MakeReadCacheBudget(ServeConfig* c, bool shared_storage) {
  const uint64_t memory = MemoryLimitBytes();
  KVC_ASSIGN_OR_RETURN(const size_t total, engine::ParseCacheBudget(c->read_cache_total, memory));
  c->engine.read_cache_budget = std::make_shared<engine::CacheBudget>(total);
  if (shared_storage) {
    spdlog::info("read cache off: other nodes write these databases too");
  } else if (total == 0 || c->engine.read_cache_bytes == 0) {
    spdlog::info("read cache off (--read-cache-total {}, --read-cache-bytes {})",
                 c->read_cache_total, c->engine.read_cache_bytes);
  } else if (c->engine.read_cache_bytes == kNoOwnReadCacheCap) {
    spdlog::info("read cache: {} shared by the databases (--read-cache-total {}; memory {})",
                 HumanBytes(total), c->read_cache_total, HumanBytes(memory));
  } else {
    spdlog::info(
        "read cache: {} shared by the databases (--read-cache-total {}; memory {}), at most {} "
        "each (--read-cache-bytes)",
        HumanBytes(total), c->read_cache_total, HumanBytes(memory),
        HumanBytes(c->engine.read_cache_bytes));
  }
  return Status::Ok();
}

}  // namespace

Status Application::WireComponents() {
  ServeConfig& c = config_;
  KVC_RETURN_IF_ERROR(MakeReadCacheBudget(&c, storage_->nodes() != nullptr));
  c.directory.engine = c.engine;
  c.directory.engine.task_factories.push_back(queue::Queue::Factory(c.queue));
  c.service.auth.bootstrap_token = c.access_token;
  wiring_ = {storage_.get(), &storage_options_, &c.directory.engine, &c.service};
  for (auto& component : components_) KVC_RETURN_IF_ERROR(component->Wire(wiring_));
  // The directory of engines; every engine reports its commits to the metrics, then meets the
  // components' hooks.
  directory_ = std::make_unique<service::Directory>(
      &storage_->catalog(),
      [s = storage_.get()](const storage::DatabaseRecord& rec) { return s->OpenBackend(rec); },
      c.directory);
  metrics_ = std::make_unique<service::Metrics>(c.metrics);
  directory_->AddEngineHook([m = metrics_.get()](const storage::DatabaseRecord&,
                                                 const std::shared_ptr<engine::Engine>& e) {
    e->AddListener(m->commit_listener());
  });
  for (auto& hook : wiring_.engine_hooks) directory_->AddEngineHook(hook);
  KVC_RETURN_IF_ERROR(directory_->Start());
  metrics_->Start(directory_.get());
  queue_metrics_ = std::make_unique<service::QueueMetrics>(directory_.get());
  metrics_->AddCollector(queue_metrics_.get());
  cache_budget_metrics_ = std::make_unique<service::CacheBudgetMetrics>(c.engine.read_cache_budget);
  metrics_->AddCollector(cache_budget_metrics_.get());
  for (const service::MetricsCollector* collector : wiring_.collectors) {
    metrics_->AddCollector(collector);
  }
  health_ = std::make_unique<service::Health>(directory_.get());
  if (!wiring_.ready_details.empty()) {
    health_->SetDetailSource([sources = wiring_.ready_details] {
      std::vector<std::string> lines;
      for (const auto& source : sources) {
        for (std::string& line : source()) lines.push_back(std::move(line));
      }
      return lines;
    });
  }
  return Status::Ok();
}

void Application::MakeServices() {
  ServeConfig& c = config_;
  codec::SetMaxJsonDepth(c.service.max_json_depth);
  body_pool_ = std::make_unique<service::WorkPool>(c.service.body_pool, "request body pool");
  auth_ = std::make_unique<service::Authenticator>(c.service.auth, secret_, directory_.get());
  auth_->SetObserver(metrics_.get());
  kv_ = std::make_unique<service::KvService>(c.service, auth_.get(), directory_.get(),
                                             body_pool_.get());
  kv_->SetPortableValueObserver(metrics_.get());
  admin_ops_ = std::make_unique<service::AdminOps>(&storage_->catalog(), storage_.get());
  admin_api_ = std::make_unique<service::AdminApi>(c.admin, directory_.get(), auth_.get(),
                                                   admin_ops_.get(), metrics_.get());
  admin_api_->SetStorage(storage_.get());
  admin_api_->SetBackupDestinations(std::move(backup_destinations_));
  queue_api_ = std::make_unique<service::QueueApi>(c.queue_api, directory_.get(), auth_.get(),
                                                   body_pool_.get());
  live_handler_ =
      std::make_unique<service::HealthHandler>(health_.get(), service::HealthHandler::Kind::kLive);
  // --metrics-public opens the metrics listener if there is one, else the main listener.
  const bool main_open = c.metrics_public && !c.metrics_net;
  for (auto [routes, open] :
       {std::pair{&main_operator_, main_open}, std::pair{&metrics_operator_, c.metrics_public}}) {
    routes->gate = std::make_unique<service::OperatorGate>(auth_.get(), open);
    routes->metrics = std::make_unique<service::MetricsHandler>(metrics_.get(), routes->gate.get());
    routes->ready = std::make_unique<service::HealthHandler>(
        health_.get(), service::HealthHandler::Kind::kReady, routes->gate.get());
  }
  if (c.console) console_handler_ = std::make_unique<service::ConsoleHandler>();
  // `/` is KV Connect's metadata exchange; a browser's GET there is sent to the console.
  root_handler_ = std::make_unique<service::RootHandler>(
      kv_.get(), console_handler_ ? service::ConsoleHandler::kPrefix : "");
}

void Application::AddRoutes() {
  // Each service registers its endpoints (method, pattern, one metrics route each).
  using M = service::Router::Match;
  kv_->AddRoutes(&router_, root_handler_.get());
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
}

Status Application::Start() {
  server_ = std::make_unique<net::Server>(config_.net, &router_);
  KVC_RETURN_IF_ERROR(server_->Start());
  metrics_->AddConnectionSource([s = server_.get()] {
    const net::ServerStats st = s->stats();
    return service::ConnectionStats{st.connections_open, st.connections_total, st.h2_streams_open,
                                    st.h2_streams_total};
  });
  if (config_.metrics_net) {
    metrics_server_ = std::make_unique<net::Server>(*config_.metrics_net, &metrics_router_);
    KVC_RETURN_IF_ERROR(metrics_server_->Start());
  }
  const components::Started started{url()};
  for (auto& component : components_) KVC_RETURN_IF_ERROR(component->Start(started));
  return Status::Ok();
}

void Application::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (health_) health_->SetDraining();
  for (const auto& hook : wiring_.drain_hooks) hook();  // e.g. others stop listing this node
  if (server_ && config_.shutdown_drain_ms > 0) {
    spdlog::info("not ready; draining for {} ms before closing the listeners",
                 config_.shutdown_drain_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.shutdown_drain_ms));
  }
  if (server_) (void)server_->Stop(std::chrono::milliseconds(config_.shutdown_grace_ms));
  if (metrics_server_) (void)metrics_server_->Stop(std::chrono::milliseconds(0));
  if (metrics_) metrics_->Stop();
  // Push stops before the backup ships what is pending, while the engines still run.
  for (auto it = components_.rbegin(); it != components_.rend(); ++it) (*it)->Stop();
  if (directory_) directory_->Stop();
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
    l.metrics =
        BoundListener{config_.metrics_net->host, metrics_server_->bound_port(), metrics_url()};
  }
  return l;
}

std::string Application::metrics_url() const {
  if (!metrics_server_) return "";
  return UrlOf(false, config_.metrics_net->host, metrics_server_->bound_port());
}

}  // namespace kvc::cli
