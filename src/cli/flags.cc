#include "cli/flags.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/application.h"
#include "client/url.h"
#include "codec/key_text.h"
#include "storage/storage_spec.h"

namespace kvc::cli {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The bootstrap token `serve` keeps in the data directory, if there is one.
std::string ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

}  // namespace

CLI::Option* AddDbFlag(CLI::App* cmd, std::string* db) {
  return cmd->add_option("--db", *db, "Database name or id")->capture_default_str();
}

CLI::Option* AddUrlFlag(CLI::App* cmd, std::string* url, const std::string& what) {
  return cmd->add_option("--url", *url, what);
}

CLI::Option* AddTokenFlag(CLI::App* cmd, std::string* token) {
  return cmd->add_option("--token", *token,
                         "Access token (default: env KVCONNECT_ACCESS_TOKEN, then "
                         "DENO_KV_ACCESS_TOKEN, then for a server on this machine the "
                         "access-token file of --data-dir)");
}

CLI::Option* AddCaFileFlag(CLI::App* cmd, std::string* ca_file) {
  return cmd->add_option("--ca-file", *ca_file,
                         "With an https --url: a PEM CA certificate to trust besides the system's");
}

CLI::Option* AddDataDirFlag(CLI::App* cmd, std::string* data_dir, const std::string& what) {
  return cmd->add_option("--data-dir", *data_dir, what)->capture_default_str();
}

void AddStorageFlags(CLI::App* cmd, std::string* spec, std::string* data_dir, std::string* postgres,
                     const std::string& data_dir_help) {
  cmd->add_option("--storage", *spec,
                  "Where everything is kept: " + storage::StorageSpecForms() +
                      " (wins over --data-dir and --postgres, which are its short forms)");
  AddDataDirFlag(cmd, data_dir, data_dir_help);
  cmd->add_option("--postgres", *postgres,
                  "Keep everything in PostgreSQL instead of --data-dir: a libpq conninfo or "
                  "postgresql:// URI (as --storage postgres:CONNINFO)")
      ->envname("KVCONNECT_POSTGRES");
}

Result<storage::StorageOptions> ResolveStorage(const StorageFlags& flags,
                                               storage::StorageOptions base) {
  if (!flags.spec.empty()) return storage::ParseStorageSpec(flags.spec, std::move(base));
  if (!flags.postgres.empty()) {
    return storage::ParseStorageSpec("postgres:" + flags.postgres, std::move(base));
  }
  return storage::ParseStorageSpec("sqlite:" + flags.data_dir, std::move(base));
}

Result<std::unique_ptr<storage::WriterLock>> ClaimWriters(storage::Storage& storage,
                                                          std::string_view advice) {
  auto lock = storage.LockWriters();
  if (lock.ok()) return lock;
  return Status(lock.status().code(), lock.status().message() + std::string(advice));
}

Result<std::unique_ptr<storage::Storage>> OpenStorageOf(const StorageFlags& flags, DataDirUse use,
                                                        storage::StorageOptions base) {
  KVC_ASSIGN_OR_RETURN(storage::StorageOptions o, ResolveStorage(flags, std::move(base)));
  if (o.kind == "sqlite" && use == DataDirUse::kMustExist) {
    KVC_ASSIGN_OR_RETURN(o.location, RequireDataDir(o.location));
  }
  return storage::OpenStorage(o);
}

std::string StorageFlagsHint(const StorageFlags& flags) {
  auto o = ResolveStorage(flags);
  if (!o.ok()) return {};
  if (o->kind != "sqlite") {
    return flags.spec.empty() ? " --postgres CONNINFO" : " --storage " + o->kind + ":CONNINFO";
  }
  if (!flags.spec.empty()) return " --storage " + flags.spec;
  return flags.data_dir == kDefaultDataDir ? std::string() : " --data-dir " + flags.data_dir;
}

std::string LocalDataDir(const StorageFlags& flags) {
  auto o = ResolveStorage(flags);
  if (!o.ok()) return flags.data_dir;
  return o->kind == "sqlite" ? o->location : std::string();
}

CLI::Option* AddJsonFlag(CLI::App* cmd, bool* json) {
  return cmd->add_flag("--json", *json, "JSON for scripts instead of the table for people");
}

bool IsLocalUrl(const std::string& url) {
  auto u = client::ParseUrl(url);
  if (!u.ok()) return false;
  const std::string host = client::AsciiLower(u->host);
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Result<std::string> ResolveToken(const std::string& flag, const std::string& url,
                                 const std::string& data_dir, std::string* from) {
  auto found = [from](std::string token, std::string where) {
    if (from != nullptr) *from = std::move(where);
    return token;
  };
  if (!flag.empty()) return found(flag, "--token");
  for (const char* name : {"KVCONNECT_ACCESS_TOKEN", "DENO_KV_ACCESS_TOKEN"}) {
    std::string v = Env(name);
    if (!v.empty()) return found(std::move(v), name);
  }
  const bool local = IsLocalUrl(url);
  const std::string file = AbsolutePath((fs::path(data_dir) / kAccessTokenSecret).string());
  if (local && !data_dir.empty()) {
    std::string token = ReadTokenFile(file);
    if (!token.empty()) return found(std::move(token), file);
  }
  return InvalidArgument(
      "no access token: give --token TOKEN or set KVCONNECT_ACCESS_TOKEN (or "
      "DENO_KV_ACCESS_TOKEN)" +
      (local ? "; for a server on this machine, --data-dir may name its data directory (no "
               "token in " +
                   file + ")"
             : std::string()));
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) return path;
  return abs.lexically_normal().string();
}

Result<std::string> RequireDataDir(const std::string& dir) {
  const std::string abs = AbsolutePath(dir);
  std::error_code ec;
  if (fs::is_directory(abs, ec)) return abs;
  return NotFound("no data directory at " + abs +
                  " (--data-dir); give the --data-dir the server uses, or make a new one with "
                  "`kvconnect db create NAME --data-dir " +
                  dir + "` or `kvconnect serve --data-dir " + dir + "`");
}

Result<std::string> ParseKeyFlag(std::string_view flag, std::string_view text) {
  auto json = codec::KeyTextToJson(text);
  if (!json.ok()) {
    return InvalidArgument(std::string(flag) + ": " + json.status().message() +
                           " (write keys as Deno does, e.g. '[\"users\", 42, 7n]')");
  }
  return json;
}

std::string Thousands(int64_t n) {
  const uint64_t magnitude =
      n < 0 ? uint64_t{0} - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  const std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string Count(int64_t n, std::string_view one, std::string_view many) {
  return Thousands(n) + " " + std::string(n == 1 ? one : many);
}

std::string RelativeTime(int64_t unix_ms, int64_t now_ms) {
  const int64_t d = now_ms - unix_ms;
  const int64_t s = (d < 0 ? -d : d) / 1000;
  if (s < 1) return "just now";
  std::string amount;
  if (s < 60) {
    amount = std::to_string(s) + " s";
  } else if (s < 3600) {
    amount = std::to_string(s / 60) + " min";
  } else if (s < 86400) {
    amount = std::to_string(s / 3600) + " h";
  } else {
    amount = Count(s / 86400, "day", "days");
  }
  return d < 0 ? "in " + amount : amount + " ago";
}

std::string HumanTime(int64_t unix_ms, int64_t now_ms) {
  if (unix_ms == 0) return "never";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return std::string(buf) + " (" + RelativeTime(unix_ms, now_ms) + ")";
}

}  // namespace kvc::cli
