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
#include <sstream>

#include "cli/data_dir.h"
#include "codec/config_json.h"
#include "common/random.h"

namespace kvc::cli {
namespace fs = std::filesystem;

CLI::App* AddServeCommand(CLI::App& app, ServeConfig* c) {
  CLI::App* s = app.add_subcommand("serve", "Run the KV Connect server");
  // A flag given twice takes its last value, so wrappers (a container's entrypoint, a unit
  // file) can set defaults that arguments appended later override.
  s->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
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
  s->add_option("--data-dir", c->data_dir, "Data directory (databases, token, server secret)")
      ->capture_default_str();
  s->add_option("--sqlite-path", c->sqlite_path,
                "Serve this SQLite file as the default database (e.g. one made by "
                "Deno.openKv(\"./x.sqlite\"))");
  s->add_option("--access-token", c->access_token,
                "Access token clients send (>= 12 characters); also from "
                "KVCONNECT_ACCESS_TOKEN or DENO_KV_ACCESS_TOKEN; generated if absent");
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
  s->add_option("--max-queued-writes", c->engine.max_queued_writes,
                "Writes waiting for the writer before new ones get 503")
      ->capture_default_str();
  s->add_option("--read-cache-bytes", c->engine.read_cache_bytes,
                "Memory for cached point reads per database (0: no cache)")
      ->capture_default_str();
  s->add_option("--sqlite-mmap-bytes", c->sqlite_mmap_bytes,
                "Bytes of each database file SQLite reader connections memory-map (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
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
  s->add_option("--rate-limit-rps", c->service.rate_limit_rps,
                "Requests per second per access token unless the token sets its own (0: off)")
      ->capture_default_str();
  s->add_option("--rate-limit-burst", c->service.rate_limit_burst,
                "Requests an access token may make at once (token bucket size)")
      ->capture_default_str();
  s->add_option("--bootstrap-rate-limit-rps", c->service.bootstrap_rate_limit_rps,
                "Requests per second for the bootstrap token (0: unlimited)")
      ->capture_default_str();
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

}  // namespace

int RunServe(ServeConfig c) {
  // Logs go to stderr; stdout carries only the start-up banner.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kvconnect"));
  spdlog::set_level(spdlog::level::from_str(c.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  if (!ParseAddr(c.addr, &c.net.host, &c.net.port)) {
    std::cerr << "error: --addr must be HOST:PORT, got '" << c.addr << "'\n";
    return 2;
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    std::cerr << "error: --tls-cert and --tls-key go together\n";
    return 2;
  }
  if (!c.tls_addr.empty()) {
    if (c.tls_cert.empty()) {
      std::cerr << "error: --tls-addr needs --tls-cert and --tls-key\n";
      return 2;
    }
    if (!ParseAddr(c.tls_addr, &c.net.tls_host, &c.net.tls_port)) {
      std::cerr << "error: --tls-addr must be HOST:PORT, got '" << c.tls_addr << "'\n";
      return 2;
    }
  } else {
    c.net.tls = !c.tls_cert.empty();
  }
  c.net.tls_cert_file = c.tls_cert;
  c.net.tls_key_file = c.tls_key;

  storage::SqliteOptions so;
  so.sync = c.sync == "full"     ? storage::SyncMode::kFull
            : c.sync == "normal" ? storage::SyncMode::kNormal
                                 : storage::SyncMode::kOff;
  so.reader_mmap_bytes = c.sqlite_mmap_bytes;
  auto dd = OpenDataDir(c.data_dir, so);
  if (!dd.ok()) {
    std::cerr << "error: " << dd.status().message() << "\n";
    return 1;
  }
  if (!c.sqlite_path.empty()) {
    Status s = PointDefaultAt(*dd, c.sqlite_path, so);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 1;
    }
  }

  // Bootstrap access token: flag, then environment, then the data directory (generated on
  // first start).
  bool token_from_file = false, token_created = false;
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("KVCONNECT_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("DENO_KV_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  const fs::path token_path = dd->root / "access-token";
  if (c.access_token.empty()) {
    auto t = LoadOrCreateSecret(
        token_path, [] { return "kvc_" + HexEncode(RandomBytes(24)); }, &token_created);
    if (!t.ok()) {
      std::cerr << "error: " << t.status().message() << "\n";
      return 1;
    }
    c.access_token = *t;
    token_from_file = true;
  }
  if (c.access_token.size() < 12) {
    std::cerr << "error: the access token must be at least 12 characters long\n";
    return 2;
  }
  bool secret_created = false;
  auto secret = LoadOrCreateSecret(
      dd->root / "server-secret", [] { return HexEncode(RandomBytes(32)); }, &secret_created);
  if (!secret.ok()) {
    std::cerr << "error: " << secret.status().message() << "\n";
    return 1;
  }

  c.directory.engine = c.engine;
  storage::SqliteOptions open_existing = so;
  open_existing.create_if_missing = false;
  DataDir* data = &*dd;
  service::Directory directory(
      data->catalog.get(),
      [data, open_existing](
          const storage::DatabaseRecord& rec) -> Result<std::unique_ptr<storage::Backend>> {
        KVC_ASSIGN_OR_RETURN(auto b,
                             storage::SqliteBackend::Open(data->Resolve(rec.path), open_existing));
        return std::unique_ptr<storage::Backend>(std::move(b));
      },
      c.directory);
  if (Status s = directory.Start(); !s.ok()) {
    std::cerr << "error: cannot open the databases: " << s.message() << "\n";
    return 1;
  }
  c.service.access_token = c.access_token;
  service::KvService service(c.service, *secret, &directory);

  // Block the signals before starting threads so only sigwait sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Every connection and every database file needs descriptors: use what the hard limit allows.
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    const rlim_t before = nofile.rlim_cur;
    nofile.rlim_cur = nofile.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &nofile) == 0) {
      spdlog::debug("raised the open-file limit from {} to {}", before, nofile.rlim_cur);
    }
  }
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
      nofile.rlim_cur < static_cast<rlim_t>(c.net.max_connections) + 64) {
    spdlog::warn(
        "the open-file limit ({}) is below --max-connections ({}); raise it (e.g. "
        "LimitNOFILE= in the systemd unit)",
        nofile.rlim_cur, c.net.max_connections);
  }

  net::Server server(c.net, &service);
  Status s = server.Start();
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    directory.Stop();
    return 1;
  }
  auto url_of = [](bool tls, const std::string& host, uint16_t port) {
    return std::string(tls ? "https://" : "http://") +
           (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
           std::to_string(port);
  };
  const std::string url = url_of(c.net.tls, c.net.host, server.bound_port());
  const std::string tls_url =
      c.net.tls_host.empty() ? "" : url_of(true, c.net.tls_host, server.bound_tls_port());
  auto snap = directory.snapshot();
  spdlog::info("kvconnect listening on {}{}; {} database(s) in {}", url,
               tls_url.empty() ? "" : " and " + tls_url, snap->by_id.size(), dd->root.string());
  std::cout << "\nkvconnect is serving " << snap->by_id.size() << " database(s) from "
            << dd->root.string() << " at " << url << (tls_url.empty() ? "" : " and " + tls_url)
            << "\n";
  if (token_from_file) {
    std::cout << "Bootstrap access token (kept in " << token_path.string() << ", mode 0600"
              << (token_created ? ", generated now" : "") << "):\n\n  " << c.access_token
              << "\n\nUse it from Deno:\n\n  DENO_KV_ACCESS_TOKEN=" << c.access_token
              << " deno run --unstable-kv -A app.ts\n\n  // app.ts\n  const kv = await "
                 "Deno.openKv(\""
              << url
              << "\");\n  await kv.set([\"hello\"], \"world\");\n  console.log((await "
                 "kv.get([\"hello\"])).value);\n\n";
  } else {
    std::cout << "Clients authenticate with the access token you configured.\n"
              << "From Deno: DENO_KV_ACCESS_TOKEN=<token> deno run --unstable-kv -A app.ts with "
                 "Deno.openKv(\""
              << url << "\")\n\n";
  }
  std::cout << "More databases and scoped tokens: kvconnect db create NAME; kvconnect token "
               "create --db NAME --scope write; then Deno.openKv(\""
            << url << "/databases/NAME/connect\").\n\n";
  std::cout.flush();

  while (true) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGHUP) {
      if (c.net.tls || !c.net.tls_host.empty()) {
        Status r = server.ReloadTls();
        if (r.ok()) {
          spdlog::info("SIGHUP: reloaded the TLS certificate and key");
        } else {
          spdlog::error("SIGHUP: keeping the old TLS certificate: {}", r.message());
        }
      } else {
        spdlog::info("SIGHUP: nothing to reload (no TLS)");
      }
      continue;
    }
    spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    break;
  }
  (void)server.Stop(std::chrono::milliseconds(c.shutdown_grace_ms));
  directory.Stop();
  spdlog::info("shutdown complete");
  return 0;
}

}  // namespace kvc::cli
