#include "cli/serve.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/application.h"
#include "cli/ready_file.h"
#include "codec/config_json.h"
#include "codec/json_depth.h"
#include "common/build_info.h"
#include "storage/storage_spec.h"

namespace kvc::cli {
namespace fs = std::filesystem;

namespace {

// Where the server listens, with TLS.
void AddListenerFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--config", c->config_file,
                "JSON configuration file (keys: these flags with '_' for '-'; flags win)");
  s->add_option("--addr", c->addr,
                "Listen address HOST:PORT (TLS when --tls-cert is given without --tls-addr)")
      ->capture_default_str();
  s->add_option("--tls-addr", c->tls_addr, "A second listener HOST:PORT speaking TLS");
  s->add_option("--tls-cert", c->tls_cert, "PEM certificate chain (leaf first); reread on SIGHUP");
  s->add_option("--tls-key", c->tls_key, "PEM private key; reread on SIGHUP");
  s->add_option_function<int64_t>(
      "--tls-handshake-timeout-ms",
      [c](int64_t v) { c->net.tls_handshake_timeout = std::chrono::milliseconds(v); },
      "A TLS handshake must finish within this time (default 10000)");
}

// The bootstrap token, durability, logs, threads and limits on requests and queues.
void AddLimitFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--access-token", c->access_token,
                "Access token clients send (>= 12 characters); also from "
                "KVCONNECT_ACCESS_TOKEN or DENO_KV_ACCESS_TOKEN; generated if absent. Visible "
                "in `ps`: prefer --access-token-file or the environment");
  s->add_option("--access-token-file", c->access_token_file,
                "Read the access token from this file (not readable by others; a trailing "
                "newline is dropped)");
  s->add_option("--sync", c->sync, "Durability: full (fsync every commit), normal, off")
      ->check(CLI::IsMember({"full", "normal", "off"}))
      ->capture_default_str();
  s->add_option("--log-level", c->log_level, "trace|debug|info|warn|error")->capture_default_str();
  s->add_option("--io-threads", c->net.io_threads, "Network I/O threads")->capture_default_str();
  s->add_option("--reader-threads", c->engine.reader_threads, "SQLite reader threads")
      ->capture_default_str();
  s->add_option("--max-body-bytes", c->net.max_body_bytes, "Request body cap (413 above)")
      ->capture_default_str();
  s->add_option("--max-header-bytes", c->net.max_header_bytes, "Request header cap")
      ->capture_default_str();
  s->add_option("--max-json-depth", c->service.max_json_depth,
                "Nesting of arrays and objects allowed in a JSON request body (400 above)")
      ->check(CLI::Range(size_t{1}, codec::kMaxJsonDepthLimit))
      ->capture_default_str();
  s->add_option("--max-connections", c->net.max_connections, "Concurrent connections cap")
      ->capture_default_str();
  s->add_option("--max-checks", c->engine.limits.max_checks, "Checks per atomic write")
      ->capture_default_str();
  s->add_option("--max-mutations", c->engine.limits.max_mutations,
                "Mutations + enqueues per atomic write")
      ->capture_default_str();
  s->add_option("--h2-max-streams", c->net.h2_max_concurrent_streams,
                "HTTP/2 concurrent streams per connection")
      ->capture_default_str();
  s->add_option("--h2-max-inflight", c->net.h2_max_inflight_requests,
                "HTTP/2 requests being handled per connection before new streams are refused")
      ->capture_default_str();
  s->add_option("--h2-max-pending-body-bytes", c->net.h2_max_pending_body_bytes,
                "Unfinished HTTP/2 request bodies buffered per connection")
      ->capture_default_str();
  s->add_option("--max-pending-body-bytes", c->net.max_pending_body_bytes,
                "Unfinished HTTP/2 request bodies buffered server-wide")
      ->capture_default_str();
  s->add_option("--max-queued-reads", c->engine.max_queued_reads,
                "Reads waiting for a reader before new ones get 503")
      ->capture_default_str();
  s->add_option("--max-read-batch", c->engine.max_read_batch,
                "Waiting single-key reads (read-cache misses) answered together from one "
                "snapshot in one storage call")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
      ->capture_default_str();
  s->add_option("--max-queued-writes", c->engine.max_queued_writes,
                "Writes waiting for the writer before new ones get 503")
      ->capture_default_str();
  s->add_option("--max-commit-retries", c->engine.max_commit_retries,
                "Times a group commit that the storage refused for a conflict runs again "
                "(checks re-evaluated) before its writes get 503")
      ->check(CLI::Range(size_t{0}, engine::kMaxCommitRetriesLimit))
      ->capture_default_str();
  s->add_option("--read-cache-total", c->read_cache_total,
                "Memory for cached point reads, shared by every database: bytes, or a "
                "percentage of the server's memory (its cgroup limit if lower); 0: no cache")
      ->capture_default_str();
  s->add_option("--read-cache-bytes", c->engine.read_cache_bytes,
                "The most one database's read cache may hold, within --read-cache-total "
                "(default: no cap of its own; 0: no cache)");
  s->add_flag("--read-cache-prewarm", c->engine.prewarm_read_cache,
              "After a start, fill each database's read cache from its data in the background, "
              "until the cache is full (default on; --read-cache-prewarm=false: off)");
  s->add_option("--sqlite-mmap-bytes", c->storage_options.mmap_bytes,
                "Bytes of each database file SQLite reader connections memory-map (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--sqlite-checkpoint-pages", c->storage_options.checkpoint_pages,
                "WAL pages from which a background thread copies the WAL into the database "
                "file (0: SQLite's checkpoint inside the commit at 1000 pages)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  s->add_option("--sqlite-wal-limit-pages", c->storage_options.wal_limit_pages,
                "WAL pages at which the writer checkpoints itself, bounding the WAL")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  s->add_option("--sqlite-wal-buffer-bytes", c->storage_options.wal_buffer_bytes,
                "With --sync full, the writer gathers each commit's WAL writes into one write "
                "of up to this many bytes (0: one write per frame, as SQLite does)")
      ->check(CLI::Range(size_t{0}, size_t{64} << 20))
      ->capture_default_str();
}

// HTTP/2 windows, timeouts, tokens and rate limits.
void AddTimeoutFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--h2-initial-window", c->net.h2_initial_window,
                "HTTP/2 flow-control window per stream")
      ->capture_default_str();
  s->add_option("--h2-connection-window", c->net.h2_connection_window,
                "HTTP/2 flow-control window per connection")
      ->capture_default_str();
  s->add_option_function<int64_t>(
      "--header-timeout-ms",
      [c](int64_t v) { c->net.header_timeout = std::chrono::milliseconds(v); },
      "An HTTP/1.1 header block must arrive within this time (default 10000)");
  s->add_option_function<int64_t>(
      "--request-timeout-ms",
      [c](int64_t v) { c->net.request_timeout = std::chrono::milliseconds(v); },
      "A request must arrive completely within this time (default 30000)");
  s->add_option_function<int64_t>(
      "--idle-timeout-ms", [c](int64_t v) { c->net.idle_timeout = std::chrono::milliseconds(v); },
      "Idle connections close after this time (default 120000)");
  s->add_option_function<int64_t>(
       "--linger-timeout-ms",
       [c](int64_t v) { c->net.linger_timeout = std::chrono::milliseconds(v); },
       "After an error answer that ends a connection (413, 400), read and discard what the "
       "client still sends for up to this long, so it can read the answer (default 2000)")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--linger-max-bytes", c->net.linger_max_bytes,
                "At most this many bytes are discarded while lingering")
      ->capture_default_str();
  s->add_option("--shutdown-grace-ms", c->shutdown_grace_ms,
                "How long in-flight requests may take on shutdown")
      ->capture_default_str();
  s->add_option("--token-ttl-ms", c->service.metadata_ttl_ms,
                "expiresAt of metadata answers = now + this")
      ->capture_default_str();
  s->add_option("--token-grace-ms", c->service.token_grace_ms,
                "Data-path tokens stay valid this long after expiresAt")
      ->capture_default_str();
  s->add_option("--catalog-poll-ms", c->directory.poll_ms,
                "How often the catalog is checked for revocations and database changes")
      ->capture_default_str();
  s->add_option("--rate-limit-rps", c->service.auth.rate_limit_rps,
                "Requests per second per access token unless the token sets its own (0: off)")
      ->capture_default_str();
  s->add_option("--rate-limit-burst", c->service.auth.rate_limit_burst,
                "Requests an access token may make at once (token bucket size)")
      ->capture_default_str();
  s->add_option("--bootstrap-rate-limit-rps", c->service.auth.bootstrap_rate_limit_rps,
                "Requests per second for the bootstrap token (0: unlimited)")
      ->capture_default_str();
  s->add_option("--metadata-rate-limit-rps", c->service.auth.metadata_rate_limit_rps,
                "The metadata exchange (opening a database) has its own budget per access token: "
                "at least this many per second, never less than the token's own rate (0: "
                "unlimited)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--metadata-rate-limit-burst", c->service.auth.metadata_rate_limit_burst,
                "Metadata exchanges an access token may make at once (at least)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--data-path-token-format", c->service.auth.data_path_token_format,
                "Data-path tokens handed out: packed (default, about 85 characters) or text "
                "(the longer layout of versions before 2026-11-29, for a rolling upgrade of "
                "nodes that share a secret); both are always accepted")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, auth::TokenFormat>{{"packed", auth::TokenFormat::kPacked},
                                                   {"text", auth::TokenFormat::kText}},
          CLI::ignore_case));
}

// Metrics, readiness, the console and the URL clients see.
void AddOperatorFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--metrics-addr", c->metrics_addr,
                "Also serve /metrics, /healthz and /readyz on this HOST:PORT (they are always on "
                "the main listener too)");
  s->add_option("--ready-file", c->ready_file,
                "Once every listener is bound, write this file (atomically, mode 0600): one JSON "
                "object with the bound addresses and ports (port 0 in --addr, --tls-addr or "
                "--metrics-addr picks a free one), the URLs and the pid");
  s->add_flag("--console", c->console,
              "Serve the web console at /console, where a browser's GET / is sent (default on; "
              "--console=false: off, and /console answers 404; the admin API "
              "stays)");
  s->add_flag("--metrics-public", c->metrics_public,
              "Serve /metrics and /readyz?verbose=1 without a token (a trusted network only): on "
              "--metrics-addr when given (the main listener still asks for the bootstrap token), "
              "else on the main listener");
  s->add_option("--metrics-stats-interval-ms", c->metrics.stats_interval_ms,
                "How often per-database key counts and sizes are refreshed for /metrics")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--shutdown-drain-ms", c->shutdown_drain_ms,
                "On SIGTERM, answer /readyz with 503 for this long before closing the listeners "
                "(let load balancers notice)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--public-url", c->service.public_url,
                "The server's URL as clients see it, e.g. https://kv.example.com behind a proxy; "
                "metadata answers point at <URL>/v2 (default: the request's scheme and Host)");
  s->add_option("--allowed-host", c->service.allowed_hosts,
                "Without --public-url: a Host (NAME or NAME:PORT) metadata answers may build "
                "endpoint URLs from; other Hosts get 400 (repeatable; default: any Host)")
      ->delimiter(',');
  s->add_option("--hsts-max-age-s", c->net.hsts_max_age_s,
                "Strict-Transport-Security max-age on answers over TLS (0: no header)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Backups (continuous and on demand) and the admin API's bounds.
void AddBackupFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--backup-to", c->backup_to,
                "Continuous backup: ship every commit (and periodic snapshots) to this directory "
                "or s3://bucket/prefix (credentials, region and endpoint from AWS_* variables)");
  s->add_option("--backup-allow", c->backup_allow,
                "A destination (absolute directory or s3://bucket/prefix) on-demand backups "
                "through the admin API may also go to; only the bootstrap token may choose one "
                "(repeatable; in a config file, comma-separated)")
      ->delimiter(',');
  s->add_option("--backup-min-interval-ms", c->admin.backup_min_interval_ms,
                "At most one on-demand backup of a database through the admin API per this "
                "interval (0: unbounded)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--admin-children-count-cap", c->admin.children.count_cap,
                "Admin API entries/children (the console's folders): counts stop at this many "
                "entries per key part (shown as N+)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--admin-children-scan-rows", c->admin.children.max_scan_rows,
                "Admin API entries/children: at most this many rows read per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--backup-interval-ms", c->backup.interval_ms,
                "Ship committed writes to the backup target at least this often")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--backup-snapshot-interval-ms", c->backup.snapshot_interval_ms,
                "Take a new backup snapshot this often (bounds restore time)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--backup-snapshot-log-bytes", c->backup.snapshot_after_log_bytes,
                "Also take a new backup snapshot after this many bytes of shipped log")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--backup-retention-ms", c->backup.retention_ms,
                "Keep backups restorable this far back; older snapshots and log are deleted")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// Queue delivery and push, and V8 values.
void AddQueueFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--queue-max-undelivered", c->queue.max_undelivered,
                "Refuse enqueues (429) beyond this many undelivered messages per database")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--queue-visibility-timeout-ms", c->queue.default_visibility_ms,
                "Lease length of a queue delivery when the consumer names none")
      ->check(CLI::Range(int64_t{1000}, int64_t{12} * 3600 * 1000))
      ->capture_default_str();
  s->add_option("--queue-dead-letter-retention-ms", c->queue.dead_letter_retention_ms,
                "Keep dead-lettered queue messages this long")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--queue-foreign-poll-ms", c->queue.foreign_poll_ms,
                "While consumers wait, look this often for messages other processes (Deno on "
                "the same file) enqueued; 0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--queue-push", c->queue_push,
                "Push a database's queue messages to a URL as Standard Webhooks: NAME=URL "
                "(repeatable; in a config file, comma-separated)")
      ->delimiter(',');
  s->add_option("--queue-push-secret", c->queue_push_secrets,
                "Signing secret of a database's push: NAME=whsec_BASE64 (repeatable; two for a "
                "rotation). Visible in `ps`: prefer --queue-push-secret-file or "
                "KVCONNECT_QUEUE_PUSH_SECRET")
      ->delimiter(',');
  s->add_option("--queue-push-secret-file", c->queue_push_secret_files,
                "Signing secrets of a database's push from a file: NAME=PATH, one whsec_ secret "
                "per line (two for a rotation; not readable by others); repeatable")
      ->delimiter(',');
  s->add_option("--queue-push-allow", c->queue_push_allow,
                "Address or CIDR that push may reach although private or loopback (repeatable)")
      ->delimiter(',');
  s->add_option("--queue-push-concurrency", c->queue_push_concurrency,
                "Push requests in flight per database")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  s->add_option("--queue-push-timeout-ms", c->queue_push_timeout_ms,
                "A push request that takes longer fails (and is retried per the backoff schedule)")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))
      ->capture_default_str();
  s->add_option("--queue-push-format", c->queue_push_format,
                "The value in a push body: json (KvValueJSON) or v8 (V8 bytes, base64url)")
      ->check(CLI::IsMember({"json", "v8"}))
      ->capture_default_str();
  s->add_flag("--portable-v8-values", c->service.portable_v8_values,
              "Store and serve V8 values so Deno and Node (@deno/kv) read each other's: format "
              "16 as 15, Node's typed arrays and error field order as V8's, each only when "
              "exact (--portable-v8-values=false: values exactly as sent)")
      ->capture_default_str();
}

// PostgreSQL's timings (storage::StorageOptions).
void AddPostgresTimingFlags(CLI::App* s, storage::StorageOptions* o) {
  s->add_option("--pg-change-retention-ms", o->pg.change_retention_ms,
                "With --postgres: keep commit records for other nodes' change feeds this long")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--pg-feed-poll-ms", o->pg.feed_poll_ms,
                "With --postgres: re-read the commit records this often when no notification "
                "came (a safety net)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--pg-commit-check-ms", o->pg.commit_outcome_wait_ms,
                "With --postgres: when the connection breaks during COMMIT, keep asking "
                "PostgreSQL this long (through a failover) whether it landed before answering "
                "503")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// Where everything is kept: the storage spec and its short forms, the options of its kind, and
// this node in the node registry.
void AddServeStorageFlags(CLI::App* s, ServeConfig* c) {
  s->add_option("--storage", c->storage,
                "Where everything is kept: " + storage::StorageSpecForms() +
                    " (--data-dir DIR and --postgres CONNINFO are its short forms; this wins)");
  s->add_option("--data-dir", c->data_dir, "Data directory (databases, token, server secret)")
      ->capture_default_str();
  s->add_option("--sqlite-path", c->storage_options.default_database_file,
                "Serve this SQLite file as the default database (e.g. one made by "
                "Deno.openKv(\"./x.sqlite\"))");
  s->add_option("--postgres", c->postgres,
                "Keep everything in PostgreSQL instead of --data-dir: a libpq conninfo or "
                "postgresql:// URI (several hosts allowed); every node given the same one serves "
                "the same databases")
      ->envname("KVCONNECT_POSTGRES");
  s->add_option("--postgres-read", c->storage_options.read_location,
                "With --postgres: serve reads from this streaming standby as an eventual endpoint "
                "(read_is_strongly_consistent=false); writes still go to --postgres");
  s->add_option("--advertise-url", c->nodes.advertise_url,
                "With --postgres: the URL other nodes list for this node in the metadata "
                "exchange (default: the URL the client used)");
  s->add_option("--region", c->nodes.region,
                "With --postgres: a region label for the node registry");
  s->add_option("--max-replica-lag-ms", c->nodes.max_replica_lag_ms,
                "With --postgres-read: above this replay lag, reads go to the primary instead")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--node-heartbeat-ms", c->nodes.heartbeat_ms,
                "With --postgres: how often this node refreshes its registry row (live for 5x)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddPostgresTimingFlags(s, &c->storage_options);
}
}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeConfig* c) {
  CLI::App* s = app.add_subcommand("serve", "Run the KV Connect server");
  // A flag given twice takes its last value, so wrappers (a container's entrypoint, a unit
  // file) can set defaults that arguments appended later override.
  s->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  AddListenerFlags(s, c);
  AddServeStorageFlags(s, c);
  AddLimitFlags(s, c);
  AddTimeoutFlags(s, c);
  AddOperatorFlags(s, c);
  AddBackupFlags(s, c);
  AddQueueFlags(s, c);
  return s;
}

Status ApplyServeConfigFile(CLI::App* serve, const ServeConfig& config) {
  if (config.config_file.empty()) return Status::Ok();
  std::ifstream in(config.config_file);
  if (!in) return InvalidArgument("cannot read config file " + config.config_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto entries = codec::ParseConfigFile(ss.str());
  if (!entries.ok()) {
    return InvalidArgument("config file " + config.config_file + ": " + entries.status().message());
  }
  for (const auto& [key, value] : *entries) {
    std::string flag = "--" + key;
    for (char& ch : flag) {
      if (ch == '_') ch = '-';
    }
    CLI::Option* opt = nullptr;
    try {
      opt = serve->get_option(flag);
    } catch (const CLI::OptionNotFound&) {
      // An error message built once, then the loop ends.
      // NOLINTBEGIN(performance-inefficient-string-concatenation)
      return InvalidArgument("config file " + config.config_file + ": key '" + key +
                             "' has no matching flag " + flag);
      // NOLINTEND(performance-inefficient-string-concatenation)
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      opt->add_result(value);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return InvalidArgument("config file " + config.config_file + ": invalid value for '" + key +
                             "': " + e.what());
    }
  }
  return Status::Ok();
}

namespace {

// Every connection and every database file needs descriptors: use what the hard limit allows.
void RaiseOpenFileLimit(size_t max_connections) {
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    const rlim_t before = nofile.rlim_cur;
    nofile.rlim_cur = nofile.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &nofile) == 0) {
      spdlog::debug("raised the open-file limit from {} to {}", before, nofile.rlim_cur);
    }
  }
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < static_cast<rlim_t>(max_connections) + 64) {
    spdlog::warn(
        "the open-file limit ({}) is below --max-connections ({}); raise it (e.g. "
        "LimitNOFILE= in the systemd unit)",
        nofile.rlim_cur, max_connections);
  }
}

// The running binary's path (so a user knows which build answers), or empty.
std::string ExecutablePath() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

void PrintBanner(const Application& app) {
  const std::string url = app.url();
  const std::string tls_url = app.tls_url();
  const std::string root = app.storage().Describe();
  const std::string& token = app.config().access_token;
  const size_t databases = const_cast<Application&>(app).directory().snapshot()->by_id.size();
  spdlog::info("kvconnect listening on {}{}; {} database(s) in {}", url,
               tls_url.empty() ? "" : " and " + tls_url, databases, root);
  if (!app.metrics_url().empty()) spdlog::info("metrics and health on {}", app.metrics_url());
  std::cout << "\nkvconnect is serving " << databases << " database(s) from " << root << " at "
            << url << (tls_url.empty() ? "" : " and " + tls_url) << "\n";
  if (app.token_from_file()) {
    std::cout << "Bootstrap access token (kept in "
              << app.storage().SecretLocation(kAccessTokenSecret) << ", mode 0600"
              << (app.token_created() ? ", generated now" : "") << "):\n\n  " << token
              << "\n\nUse it from Deno:\n\n  DENO_KV_ACCESS_TOKEN=" << token
              << " deno run --unstable-kv -A app.ts\n\n  // app.ts\n  const kv = await "
                 "Deno.openKv(\""
              << url
              << "\");\n  await kv.set([\"hello\"], \"world\");\n  console.log((await "
                 "kv.get([\"hello\"])).value);\n\n";
    if (app.console_enabled()) {
      std::cout << "Console: " << url << service::ConsoleHandler::kPrefix
                << " (sign in with the token above)\n\n";
    }
  } else {
    std::cout << "Clients authenticate with the access token you configured.\n"
              << "From Deno: DENO_KV_ACCESS_TOKEN=<token> deno run --unstable-kv -A app.ts with "
                 "Deno.openKv(\""
              << url << "\")\n\n";
    if (app.console_enabled()) {
      std::cout << "Console: " << url << service::ConsoleHandler::kPrefix
                << " (sign in with that access token)\n\n";
    }
  }
  std::cout << "More databases and scoped tokens: kvconnect db create NAME; kvconnect token "
               "create --db NAME --scope write; then Deno.openKv(\""
            << url << "/databases/NAME/connect\").\n"
            << "Health: " << url << "/healthz, " << url
            << "/readyz; metrics: " << (app.metrics_url().empty() ? url : app.metrics_url())
            << "/metrics"
            << (app.config().metrics_public ? "" : " (Authorization: Bearer <bootstrap token>)")
            << "\n";
  const std::string exe = ExecutablePath();
  std::cout << "Binary: " << (exe.empty() ? std::string("kvconnect") : exe) << " (version "
            << BuildVersion() << ", commit " << BuildCommit() << ", allocator " << AllocatorInUse()
            << ")\n\n";
  const service::ServiceOptions& so = app.config().service;
  if (!so.public_url.empty()) {
    std::cout << "Metadata answers send clients to " << so.public_url << so.endpoint_path
              << " (--public-url).\n\n";
  }
  std::cout.flush();
}

}  // namespace

sigset_t BlockServeSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return set;
}

Status ParseListenAddresses(ServeConfig* c) {
  if (!ParseAddr(c->addr, &c->net.host, &c->net.port)) {
    return InvalidArgument("--addr must be HOST:PORT, got '" + c->addr + "'");
  }
  if (c->tls_cert.empty() != c->tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key go together");
  }
  if (!c->tls_addr.empty()) {
    if (c->tls_cert.empty()) return InvalidArgument("--tls-addr needs --tls-cert and --tls-key");
    if (!ParseAddr(c->tls_addr, &c->net.tls_host, &c->net.tls_port)) {
      return InvalidArgument("--tls-addr must be HOST:PORT, got '" + c->tls_addr + "'");
    }
  } else {
    c->net.tls = !c->tls_cert.empty();
  }
  c->net.tls_cert_file = c->tls_cert;
  c->net.tls_key_file = c->tls_key;
  if (!c->metrics_addr.empty()) {
    net::ServerOptions m;
    if (!ParseAddr(c->metrics_addr, &m.host, &m.port)) {
      return InvalidArgument("--metrics-addr must be HOST:PORT, got '" + c->metrics_addr + "'");
    }
    m.io_threads = 1;
    m.max_connections = 64;
    c->metrics_net = std::move(m);
  }
  return Status::Ok();
}

namespace {

// The flags RunServe checks before anything opens: listen addresses, the public URL. Errors:
// InvalidArgument.
Status PrepareServeConfig(ServeConfig* c) {
  KVC_RETURN_IF_ERROR(ParseListenAddresses(c));
  if (!c->service.public_url.empty()) {
    auto url = service::NormalizePublicUrl(c->service.public_url);
    if (!url.ok()) {
      return InvalidArgument("--public-url '" + c->service.public_url +
                             "': " + url.status().message());
    }
    c->service.public_url = std::move(*url);
  }
  const bool loopback =
      c->net.host == "localhost" || c->net.host == "::1" || c->net.host.rfind("127.", 0) == 0;
  if (c->service.public_url.empty() && c->service.allowed_hosts.empty() && !loopback) {
    spdlog::warn(
        "metadata answers build endpoint URLs from each request's Host header; set --public-url "
        "or --allowed-host NAME so a forged Host cannot send clients elsewhere");
  }
  return Status::Ok();
}

// Answers SIGHUP (reloads TLS) until SIGINT or SIGTERM arrives.
void WaitForShutdownSignal(Application& app, const sigset_t& set) {
  while (true) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGHUP) {
      Status r = app.ReloadTls();
      if (r.ok()) {
        spdlog::info("SIGHUP: reloaded the TLS certificate and key");
      } else {
        spdlog::info("SIGHUP: {}", r.message());
      }
      continue;
    }
    spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return;
  }
}

}  // namespace

int RunServe(ServeConfig c) {
  // Logs go to stderr; stdout carries only the start-up banner.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kvconnect"));
  spdlog::set_level(spdlog::level::from_str(c.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  if (Status s = PrepareServeConfig(&c); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  // A ready file left by an earlier run must not be taken for this one's.
  if (!c.ready_file.empty()) ::unlink(c.ready_file.c_str());

  BlockServeSignals();  // again, for a caller other than main(); before Open starts threads
  auto opened = Application::Open(c);
  if (!opened.ok()) {
    std::cerr << "error: " << opened.status().message() << "\n";
    return opened.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  Application& app = **opened;

  // The signals were blocked before the first thread started (main); only sigwait sees them,
  // and one that came during start-up waits here.
  const sigset_t set = BlockServeSignals();
  RaiseOpenFileLimit(c.net.max_connections);

  if (Status s = app.Start(); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  // Every listener is bound now: report the ports (the kernel's choice for port 0).
  const std::string ready = ReadyJson(app.listeners(), static_cast<long>(::getpid()));
  spdlog::info("ready {}", ready);
  if (!c.ready_file.empty()) {
    if (Status s = WriteFileAtomically(c.ready_file, ready + "\n"); !s.ok()) {
      std::cerr << "error: --ready-file: " << s.message() << "\n";
      app.Shutdown();
      return 1;
    }
  }
  PrintBanner(app);
  WaitForShutdownSignal(app, set);
  app.Shutdown();
  if (!c.ready_file.empty()) ::unlink(c.ready_file.c_str());
  spdlog::info("shutdown complete");
  return 0;
}

}  // namespace kvc::cli
