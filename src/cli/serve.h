// `kvconnect serve`: options, flag registration and the run loop.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <limits>
#include <optional>
#include <string>

#include "backup/continuous_backup.h"
#include "components/node_registry/node_registration.h"
#include "engine/engine.h"
#include "net/server.h"
#include "queue/queue.h"
#include "service/admin/admin_api.h"
#include "service/directory.h"
#include "service/kvconnect/kv_service.h"
#include "service/ops/metrics.h"
#include "service/queue/queue_api.h"
#include "storage/storage.h"

namespace kvc::cli {

// ServeConfig::engine.read_cache_bytes when --read-cache-bytes is not given.
inline constexpr size_t kNoOwnReadCacheCap = std::numeric_limits<size_t>::max();

struct ServeConfig {
  std::string config_file;  // JSON, see schemas/config.schema.json
  std::string addr = "127.0.0.1:4512";
  std::string tls_addr;  // a second, TLS listener
  std::string tls_cert;
  std::string tls_key;
  // Where everything is kept (cli/flags.h StorageFlags): a storage spec (storage/storage_spec.h,
  // sqlite:DIR or postgres:CONNINFO), or its short forms --data-dir DIR and --postgres CONNINFO
  // (see README "Scaling out"). --storage wins over both.
  std::string storage;
  std::string data_dir = "./kvconnect-data";
  std::string postgres;
  // The options of the storage's kind beyond where it is, set by their own flags: the SQLite file
  // of "default" (--sqlite-path) and memory map, a PostgreSQL standby to read from
  // (--postgres-read) and PostgreSQL's timings (--pg-*). Kind, location and sync come from the
  // flags above when the application opens the storage.
  storage::StorageOptions storage_options = [] {
    storage::StorageOptions o;
    o.mmap_bytes = int64_t{4} << 30;
    return o;
  }();
  // This node in the node registry of a storage several nodes serve (components/node_registry).
  components::NodeRegistryOptions nodes;
  std::string access_token;
  std::string access_token_file;  // the token in a file (cli/secrets.h), kept out of `ps`
  std::string sync = "full";      // full | normal | off
  std::string log_level = "info";
  int shutdown_grace_ms = 10000;
  int64_t shutdown_drain_ms = 0;  // readiness 503 this long before the listeners close
  std::string metrics_addr;       // a separate listener for /metrics and health (optional)
  // The listener of metrics_addr, parsed once with the others (ParseListenAddresses); unset:
  // none.
  std::optional<net::ServerOptions> metrics_net;
  // Written (atomically, mode 0600) once every listener is bound: the bound addresses as JSON,
  // so whoever started the server with port 0 learns the ports. Empty: none.
  std::string ready_file;
  // /metrics and /readyz?verbose=1 without a token: on the metrics_addr listener if set, else
  // on the main listener (service/ops/operator_gate.h).
  bool metrics_public = false;
  // The web console at /console (and the browser's GET / sent there). false: neither is served
  // (the admin API it uses stays).
  bool console = true;
  service::MetricsOptions metrics;
  // The main (and TLS) listener: addr and tls_addr parsed by ParseListenAddresses.
  net::ServerOptions net;
  // As the engine's defaults, but the read cache is prewarmed after a start, and a database's
  // cache has no cap of its own: the budget of read_cache_total bounds them together.
  engine::EngineOptions engine = [] {
    engine::EngineOptions o;
    o.prewarm_read_cache = true;
    o.read_cache_bytes = kNoOwnReadCacheCap;
    return o;
  }();
  // The read caches' shared budget (engine/cache_budget.h; engine::ParseCacheBudget): bytes, or
  // a percentage of the memory this process may use (MemoryLimitBytes). Application makes the
  // budget and puts it in `engine`.
  std::string read_cache_total = "25%";
  service::ServiceOptions service;
  service::DirectoryOptions directory;
  service::AdminApiOptions admin;
  // Queue delivery of every database (docs/queues.md).
  queue::QueueOptions queue;
  service::QueueApiOptions queue_api;
  // Push delivery (docs/queues.md): NAME=URL per database, NAME=whsec_... secrets (two during a
  // rotation), literal addresses or CIDRs allowed although private or loopback.
  std::vector<std::string> queue_push;
  std::vector<std::string> queue_push_secrets;
  std::vector<std::string> queue_push_secret_files;  // NAME=PATH, one secret per line
  std::vector<std::string> queue_push_allow;
  size_t queue_push_concurrency = 4;
  int64_t queue_push_timeout_ms = 30000;
  std::string queue_push_format = "json";
  // Continuous backup: a directory or s3://bucket/prefix; empty: off. Also the default
  // destination of on-demand backups through the admin API.
  std::string backup_to;
  // Further destinations the admin API may back up to (a server-wide token chooses).
  std::vector<std::string> backup_allow;
  backup::ContinuousBackupOptions backup;
};

CLI::App* AddServeCommand(CLI::App& app, ServeConfig* config);
// Parses addr, tls_addr and metrics_addr (HOST:PORT, IPv6 in brackets) into config->net and
// config->metrics_net, the one place listen addresses are parsed, and checks that --tls-cert and
// --tls-key go together. Errors: InvalidArgument naming the flag.
Status ParseListenAddresses(ServeConfig* config);
// Applies `config->config_file` (if set) to the options of the `serve` command that were not
// given on the command line. Returns an error naming the file and the offending key.
Status ApplyServeConfigFile(CLI::App* serve, const ServeConfig& config);
// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, and so in every thread it starts
// afterwards (threads inherit the mask): they stay pending until RunServe's sigwait takes them,
// so one that arrives during start-up still ends in a drained shutdown. Ignores SIGPIPE.
// Returns the blocked set. REQUIRES: called before any thread starts (main() does).
sigset_t BlockServeSignals();
// Runs the server until SIGINT/SIGTERM. Returns the process exit code.
// REQUIRES: BlockServeSignals() was called before any thread started.
int RunServe(ServeConfig config);

}  // namespace kvc::cli
