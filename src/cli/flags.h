// The CLI's one vocabulary: the flags every command that takes them declares the same way
// (`--db`, `--url`, `--token`, `--ca-file`, `--data-dir`, `--storage`, `--postgres`, `--json`),
// what they resolve to (the access token's fallbacks, the storage a command works on, parsed by
// the storage kind table of storage/storage_spec.h, a data directory that must exist, a key in
// the console's syntax),
// and the small text helpers of human output (counts with plurals, dates with relative times).
//
// Thread-safety: functions of one command's thread; ResolveToken reads the environment.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "storage/storage.h"

namespace kvc::cli {

inline constexpr const char* kDefaultDataDir = "./kvconnect-data";
inline constexpr const char* kDefaultServerUrl = "http://127.0.0.1:4512";

// --db NAME: a database by name or id.
CLI::Option* AddDbFlag(CLI::App* cmd, std::string* db);
// --url URL: a running server (its origin, as clients connect to it). `what` says what the
// command does with it.
CLI::Option* AddUrlFlag(CLI::App* cmd, std::string* url, const std::string& what);
// --token TOKEN, with the fallbacks of ResolveToken in its help.
CLI::Option* AddTokenFlag(CLI::App* cmd, std::string* token);
// --ca-file FILE: a CA certificate to trust for an https --url.
CLI::Option* AddCaFileFlag(CLI::App* cmd, std::string* ca_file);
// --data-dir DIR (default ./kvconnect-data).
CLI::Option* AddDataDirFlag(CLI::App* cmd, std::string* data_dir, const std::string& what);
// Where a command's storage is: --storage SPEC (storage/storage_spec.h: sqlite:DIR,
// postgres:CONNINFO), or its aliases --postgres CONNINFO (env KVCONNECT_POSTGRES) and --data-dir
// DIR. The fields are the command's own config fields.
struct StorageFlags {
  std::string spec;      // --storage; wins over both aliases
  std::string data_dir;  // --data-dir: sqlite:DIR when neither --storage nor --postgres is given
  std::string postgres;  // --postgres: postgres:CONNINFO unless --storage is given
};
// Declares --storage, --data-dir (capturing its default) and --postgres on `cmd`, writing to the
// three strings. `data_dir_help` says what --data-dir is for this command.
void AddStorageFlags(CLI::App* cmd, std::string* spec, std::string* data_dir, std::string* postgres,
                     const std::string& data_dir_help);
// The storage `flags` name, parsed by the storage kind table (storage::ParseStorageSpec):
// --storage, else --postgres, else --data-dir; `base` holds the options a spec does not set.
// Errors: InvalidArgument (a bad spec, naming the accepted forms).
Result<storage::StorageOptions> ResolveStorage(const StorageFlags& flags,
                                               storage::StorageOptions base = {});
// Whether a command may make the SQLite data directory it names (only `serve`, `db create` and
// `restore` may: a mistyped path must not become an empty catalog).
enum class DataDirUse { kMustExist, kMayCreate };
// Opens the storage of ResolveStorage. A SQLite data directory must exist unless kMayCreate
// (RequireDataDir; its absolute path is used then). Errors: as ResolveStorage, NotFound (no data
// directory), the storage's own (IoError, a PostgreSQL server that cannot be reached).
Result<std::unique_ptr<storage::Storage>> OpenStorageOf(const StorageFlags& flags, DataDirUse use,
                                                        storage::StorageOptions base = {});
// The writer claim on `storage` (Storage::LockWriters). A refusal keeps its code and gets
// `advice` (what to do instead, with its leading punctuation) appended to its message.
Result<std::unique_ptr<storage::WriterLock>> ClaimWriters(storage::Storage& storage,
                                                          std::string_view advice);
// The flags that name the same storage again, for a hint such as "`kvconnect db create NAME
// <these>`": empty for the default data directory; never a conninfo (it may hold a password).
std::string StorageFlagsHint(const StorageFlags& flags);
// The data directory whose access-token file a local command may read (ResolveToken): the
// SQLite directory the flags name, or empty for PostgreSQL.
std::string LocalDataDir(const StorageFlags& flags);

// --json: the machine form instead of the human one.
CLI::Option* AddJsonFlag(CLI::App* cmd, bool* json);

// Where a command's access token comes from, first found wins: `flag` (--token), the
// environment variable KVCONNECT_ACCESS_TOKEN, then DENO_KV_ACCESS_TOKEN, then, when the command
// is local (`url` names this machine: localhost, 127.0.0.0/8 or ::1), the file access-token of
// the data directory `data_dir` (the bootstrap token `serve` keeps there). `*from` (if given)
// gets where it came from ("--token", "KVCONNECT_ACCESS_TOKEN", ..., or the file's path).
// Errors: InvalidArgument naming every place looked at.
Result<std::string> ResolveToken(const std::string& flag, const std::string& url,
                                 const std::string& data_dir, std::string* from = nullptr);

// Whether `url` names this machine (localhost, 127.0.0.0/8, ::1); false for a bad URL.
bool IsLocalUrl(const std::string& url);

// The absolute path of the data directory `dir`, which must exist: only `serve` and `db create`
// make one, so a mistyped --data-dir is refused instead of starting an empty one. Errors:
// NotFound naming the absolute path tried and what to do.
Result<std::string> RequireDataDir(const std::string& dir);

// The absolute form of `path` (as given when it cannot be made absolute).
std::string AbsolutePath(const std::string& path);

// The key or prefix of a flag, in the console's key syntax or as KvKeyJSON (codec/key_text.h),
// as KvKeyJSON. Errors: InvalidArgument "<flag>: <why>".
Result<std::string> ParseKeyFlag(std::string_view flag, std::string_view text);

// Seconds on the steady clock since `start`.
double SecondsSince(std::chrono::steady_clock::time_point start);
// A duration for people: "1.25 s".
std::string Seconds(double s);
// "1 entry", "2 entries", "10,000 entries": `n` with thousands separators and the right form.
std::string Count(int64_t n, std::string_view one, std::string_view many);
// `n` with thousands separators ("10,000").
std::string Thousands(int64_t n);
// A moment for people: "2026-11-27 14:03:11 UTC (3 min ago)"; "never" for 0.
std::string HumanTime(int64_t unix_ms, int64_t now_ms);
// "just now", "42 s ago", "3 min ago", "5 h ago", "2 days ago", or "in 3 min" ahead of now.
std::string RelativeTime(int64_t unix_ms, int64_t now_ms);

}  // namespace kvc::cli
