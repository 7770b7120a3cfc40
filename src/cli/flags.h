// The CLI's one vocabulary: the flags every command that takes them declares the same way
// (`--db`, `--url`, `--token`, `--ca-file`, `--data-dir`, `--json`), what they resolve to (the
// access token's fallbacks, a data directory that must exist, a key in the console's syntax),
// and the small text helpers of human output (counts with plurals, dates with relative times).
//
// Thread-safety: functions of one command's thread; ResolveToken reads the environment.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

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

// "1 entry", "2 entries", "10,000 entries": `n` with thousands separators and the right form.
std::string Count(int64_t n, std::string_view one, std::string_view many);
// `n` with thousands separators ("10,000").
std::string Thousands(int64_t n);
// A moment for people: "2026-11-27 14:03:11 UTC (3 min ago)"; "never" for 0.
std::string HumanTime(int64_t unix_ms, int64_t now_ms);
// "just now", "42 s ago", "3 min ago", "5 h ago", "2 days ago", or "in 3 min" ahead of now.
std::string RelativeTime(int64_t unix_ms, int64_t now_ms);

}  // namespace kvc::cli
