#include "cli/serve.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/random.h"

namespace kvc::cli {
namespace fs = std::filesystem;

void AddServeCommand(CLI::App& app, ServeConfig* c) {
  CLI::App* s = app.add_subcommand("serve", "Run the KV Connect server");
  s->add_option("--addr", c->addr, "Listen address HOST:PORT")->capture_default_str();
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
}

namespace {

// Reads a secret file, or creates it with `make()` and mode 0600.
Result<std::string> LoadOrCreateSecret(const fs::path& path,
                                       const std::function<std::string()>& make, bool* created) {
  *created = false;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string v = ss.str();
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
    if (v.empty()) return Internal("secret file " + path.string() + " is empty");
    return v;
  }
  std::string v = make();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Internal("cannot create " + path.string() + ": " + std::strerror(errno));
  std::string line = v + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  if (!ok) return Internal("cannot write " + path.string());
  *created = true;
  return v;
}

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
  std::error_code ec;
  fs::create_directories(c.data_dir, ec);
  if (ec) {
    std::cerr << "error: cannot create data directory " << c.data_dir << ": " << ec.message()
              << "\n";
    return 1;
  }
  fs::permissions(c.data_dir, fs::perms::owner_all, fs::perm_options::replace, ec);

  // Access token: flag, then environment, then the data directory (generated on first start).
  bool token_from_file = false, token_created = false;
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("KVCONNECT_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  if (c.access_token.empty()) {
    if (const char* e = std::getenv("DENO_KV_ACCESS_TOKEN"); e && *e) c.access_token = e;
  }
  const fs::path token_path = fs::path(c.data_dir) / "access-token";
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
      fs::path(c.data_dir) / "server-secret", [] { return HexEncode(RandomBytes(32)); },
      &secret_created);
  if (!secret.ok()) {
    std::cerr << "error: " << secret.status().message() << "\n";
    return 1;
  }

  const std::string db_path =
      c.sqlite_path.empty() ? (fs::path(c.data_dir) / "default.sqlite3").string() : c.sqlite_path;
  storage::SqliteOptions so;
  so.sync = c.sync == "full"     ? storage::SyncMode::kFull
            : c.sync == "normal" ? storage::SyncMode::kNormal
                                 : storage::SyncMode::kOff;
  auto backend = storage::SqliteBackend::Open(db_path, so);
  if (!backend.ok()) {
    std::cerr << "error: cannot open database " << db_path << ": " << backend.status().message()
              << "\n";
    return 1;
  }
  auto engine = engine::Engine::Open(std::move(*backend), c.engine);
  if (!engine.ok()) {
    std::cerr << "error: cannot start the engine: " << engine.status().message() << "\n";
    return 1;
  }
  c.service.access_token = c.access_token;
  service::KvService service(c.service, *secret, engine->get());

  // Block the termination signals before starting threads so only sigwait sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  net::Server server(c.net, &service);
  Status s = server.Start();
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  const std::string url =
      "http://" +
      (c.net.host.find(':') != std::string::npos ? "[" + c.net.host + "]" : c.net.host) + ":" +
      std::to_string(server.bound_port());
  spdlog::info("kvconnect listening on {} (database {} at {})", url, (*engine)->database_id(),
               db_path);
  std::cout << "\nkvconnect is serving " << db_path << " at " << url << "\n";
  if (token_from_file) {
    std::cout << "Access token (kept in " << token_path.string() << ", mode 0600"
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
  std::cout.flush();

  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (void)server.Stop(std::chrono::milliseconds(c.shutdown_grace_ms));
  (*engine)->Shutdown();
  spdlog::info("shutdown complete");
  return 0;
}

}  // namespace kvc::cli
