#include "cli/migrate.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/admin.h"
#include "cli/application.h"
#include "cli/flags.h"
#include "cli/kv_source.h"
#include "cli/migrate_url.h"
#include "codec/versionstamp.h"
#include "common/random.h"
#include "storage/private_file.h"

namespace kvc::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The secrets a server keeps beside its databases (cli/application.cc).
constexpr const char* kServerSecret = "server-secret";

// A storage opened for the migration, and the temporary data directory it lives in when it is
// a single database file (removed when this is destroyed, after the storage is closed).
class OpenedStorage {
 public:
  OpenedStorage() = default;
  OpenedStorage(const OpenedStorage&) = delete;
  OpenedStorage& operator=(const OpenedStorage&) = delete;
  ~OpenedStorage() {
    storage_.reset();
    if (!temp_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(temp_dir_, ec);
    }
  }

  storage::Storage& operator*() { return *storage_; }
  storage::Storage* operator->() { return storage_.get(); }

  // `from` as a source: it must exist; a SQLite file becomes the database "default" of a
  // temporary data directory.
  Status OpenSource(const storage::StorageOptions& from) {
    storage::StorageOptions o = from;
    if (o.kind == "sqlite") {
      std::error_code ec;
      const fs::file_status st = fs::status(o.location, ec);
      if (fs::is_regular_file(st)) {
        const fs::path temp =
            fs::temp_directory_path(ec) / ("kvconnect-migrate-" + HexEncode(RandomBytes(6)));
        KVC_RETURN_IF_ERROR(storage::MakeOwnedPrivateDirectory(temp.string()));
        temp_dir_ = temp;  // ours to remove at the end
        o.default_database_file = o.location;
        o.location = temp_dir_.string();
      } else if (!fs::is_directory(st)) {
        return NotFound("no data directory or database file at " + o.location + " (--from)");
      }
    }
    return Open(o);
  }

  // `to` as a destination: a SQLite data directory is made if missing (unless `must_exist`).
  Status OpenDestination(const storage::StorageOptions& to, bool must_exist) {
    if (to.kind == "sqlite") {
      std::error_code ec;
      const fs::file_status st = fs::status(to.location, ec);
      if (fs::exists(st) && !fs::is_directory(st)) {
        return InvalidArgument("the destination " + to.location +
                               " is not a directory: --to takes a data directory");
      }
      if (must_exist && !fs::exists(st)) {
        return NotFound("no data directory at " + to.location + " (--to)");
      }
    }
    return Open(to);
  }

 private:
  Status Open(const storage::StorageOptions& o) {
    KVC_ASSIGN_OR_RETURN(storage_, storage::OpenStorage(o));
    return Status::Ok();
  }

  std::unique_ptr<storage::Storage> storage_;
  fs::path temp_dir_;
};

// True if `a` and `b` name the same storage.
bool SameStorage(const storage::StorageOptions& a, const storage::StorageOptions& b) {
  if (a.kind != b.kind) return false;
  if (a.kind != "sqlite") return a.location == b.location;
  std::error_code ec1;
  std::error_code ec2;
  return fs::weakly_canonical(a.location, ec1) == fs::weakly_canonical(b.location, ec2);
}

Result<std::vector<storage::DatabaseRecord>> SelectDatabases(storage::Storage& from,
                                                             const MigrateOptions& o) {
  if (o.all == !o.dbs.empty()) {
    return InvalidArgument("name the databases with --db NAME (repeatable), or give --all");
  }
  if (o.all) return from.catalog().ListDatabases();
  std::vector<storage::DatabaseRecord> out;
  for (const std::string& name : o.dbs) {
    auto rec = from.catalog().FindDatabase(name);
    if (!rec.ok()) {
      return rec.status().code() == StatusCode::kNotFound
                 ? NotFound("no database named '" + name + "' in the source (" + from.Describe() +
                            ")")
                 : rec.status();
    }
    bool twice = false;
    for (const auto& r : out) twice = twice || r.id == rec->id;
    if (!twice) out.push_back(*rec);
  }
  return out;
}

void PrintDigest(std::ostream& log, const char* side, const storage::ContentDigest& d) {
  log << "  " << side << " version " << d.version << "  keys " << d.keys << "  bytes " << d.bytes
      << "  sha256 " << d.sha256 << "\n";
}

class Migration {
 public:
  Migration(storage::Storage& from, storage::Storage& to, const MigrateOptions& o,
            std::ostream& log, MigrationReport* report)
      : from_(from), to_(to), o_(o), log_(log), report_(report) {}

  Status Run(const std::vector<storage::DatabaseRecord>& databases) {
    if (!o_.verify_only) {
      // Every refusal before anything is written.
      for (const storage::DatabaseRecord& rec : databases) {
        KVC_RETURN_IF_ERROR(storage::CheckDestination(to_, rec));
      }
    }
    for (const storage::DatabaseRecord& rec : databases) {
      DatabaseMigration m;
      m.name = rec.name;
      m.id = rec.id;
      if (!o_.verify_only) {
        Status s = Copy(rec, &m);
        if (!s.ok()) {
          return Status(s.code(), "migrating '" + rec.name + "' failed: " + s.message());
        }
      }
      Status s = Verify(rec, &m);
      if (!s.ok()) return Status(s.code(), "verifying '" + rec.name + "' failed: " + s.message());
      report_->databases.push_back(std::move(m));
    }
    if (!o_.verify_only && o_.copy_secrets) KVC_RETURN_IF_ERROR(CopySecrets());
    return Status::Ok();
  }

 private:
  void Warn(const std::string& text) {
    log_ << "warning: " << text << "\n";
    report_->warnings.push_back(text);
  }

  Status Copy(const storage::DatabaseRecord& rec, DatabaseMigration* m) {
    const auto started = Clock::now();
    auto last = started;
    storage::CopyOptions co;
    co.batch_rows = o_.batch_rows;
    co.on_progress = [&](int64_t rows, int64_t bytes) {
      if (Clock::now() - last < std::chrono::milliseconds(o_.progress_ms)) return;
      last = Clock::now();
      log_ << "  '" << rec.name << "': " << rows << " keys (" << bytes << " bytes) copied, "
           << Seconds(SecondsSince(started)) << std::endl;
    };
    KVC_ASSIGN_OR_RETURN(m->copy, storage::CopyDatabase(from_, rec, to_, co));
    m->copied = true;
    m->copy_seconds = SecondsSince(started);
    const storage::ContentDigest& c = m->copy.copied;
    log_ << "copied '" << rec.name << "' (id " << rec.id << "): " << c.keys << " keys, " << c.bytes
         << " bytes at version " << c.version << " (versionstamp " << codec::VersionToHex(c.version)
         << ") in " << m->copy.batches << " transaction(s), " << Seconds(m->copy_seconds) << "\n";
    if (m->copy.replaced) {
      const storage::DatabaseRecord& old = *m->copy.replaced;
      log_ << "  replaced the destination's empty '" << old.name << "' (id " << old.id << ")\n";
      if (old.id != rec.id) WarnOrphanedTokens(old);
    }
    if (m->copy.queue_left) {
      const storage::QueueTableCounts& q = *m->copy.queue_left;
      const int64_t messages = q.ready + q.delayed + q.leased;
      if (messages + q.dead > 0) {
        Warn("'" + rec.name + "': " + std::to_string(messages) + " queue message(s) and " +
             std::to_string(q.dead) +
             " dead letter(s) were not copied (queues are not migrated: drain the queue first)");
      }
    } else {
      Warn("'" + rec.name +
           "': the source cannot count its queue; queue messages and dead letters, if any, were "
           "not copied");
    }
    KVC_ASSIGN_OR_RETURN(m->tokens_copied,
                         storage::CopyTokens(from_.catalog(), to_.catalog(), rec.id));
    log_ << "  access tokens: " << m->tokens_copied.copied << " copied";
    if (m->tokens_copied.present > 0) log_ << ", " << m->tokens_copied.present << " already there";
    log_ << "\n";
    if (m->tokens_copied.all_databases > 0) {
      Warn(std::to_string(m->tokens_copied.all_databases) +
           " access token(s) for all databases were copied: they open every database of the "
           "destination, not only the migrated ones (kvconnect token revoke to stop that)");
    }
    return Status::Ok();
  }

  // Tokens of the destination that opened a database the copy replaced do not open it now (nor
  // the copy, which has another id).
  void WarnOrphanedTokens(const storage::DatabaseRecord& old) {
    auto tokens = to_.catalog().ListTokens();
    if (!tokens.ok()) return;
    int64_t n = 0;
    for (const storage::AccessTokenRecord& t : *tokens) {
      n += !t.all_databases && storage::TokenOpensDatabase(t, old.id) ? 1 : 0;
    }
    if (n > 0) {
      Warn(std::to_string(n) + " access token(s) of the destination were bound to its former '" +
           old.name + "' (id " + old.id + ") and do not open it now");
    }
  }

  Status Verify(const storage::DatabaseRecord& rec, DatabaseMigration* m) {
    const auto started = Clock::now();
    auto dest = to_.catalog().FindDatabase(rec.id);
    if (!dest.ok()) {
      if (dest.status().code() != StatusCode::kNotFound) return dest.status();
      m->verdict = "the destination has no database with id " + rec.id;
      log_ << "'" << rec.name << "' (id " << rec.id << "): DIFFERS: " << m->verdict << "\n";
      return Status::Ok();
    }
    storage::ContentDigest fresh;
    {
      KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> b, from_.OpenBackend(rec));
      KVC_ASSIGN_OR_RETURN(fresh, storage::DigestDatabase(*b, o_.batch_rows));
    }
    {
      KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> b, to_.OpenBackend(*dest));
      KVC_ASSIGN_OR_RETURN(m->destination, storage::DigestDatabase(*b, o_.batch_rows));
    }
    KVC_ASSIGN_OR_RETURN(m->tokens, storage::CompareTokens(from_.catalog(), to_.catalog(), rec.id));
    m->source = fresh;
    std::string note;
    if (m->copied && fresh.version != m->copy.copied.version) {
      // A server wrote the source since the copy's snapshot: compare with what was copied.
      m->source = m->copy.copied;
      note = "the source moved on from version " + std::to_string(m->copy.copied.version) + " to " +
             std::to_string(fresh.version) +
             " during the migration (a server writes it); the destination was compared with the "
             "copied snapshot, and the later writes are not in it";
      Warn("'" + rec.name + "': " + note);
    }
    const bool same = storage::SameContent(m->source, m->destination);
    const bool name_ok = dest->name == rec.name;
    const bool tokens_ok = m->tokens.differing.empty();
    m->match = same && name_ok && tokens_ok;
    if (!same) {
      m->verdict = "the contents differ";
      if (!m->copied && fresh.version > m->destination.version) {
        m->verdict += " (the source is at a later version: it was written after the copy)";
      }
    } else if (!name_ok) {
      m->verdict = "the destination calls it '" + dest->name + "'";
    } else if (!tokens_ok) {
      m->verdict = std::to_string(m->tokens.differing.size()) +
                   " access token(s) are missing or different in the destination (e.g. " +
                   m->tokens.differing.front() + ")";
    } else {
      m->verdict = note.empty() ? "match" : "match (as of the copied snapshot)";
    }
    m->check_seconds = SecondsSince(started);
    if (o_.verify_only) log_ << "'" << rec.name << "' (id " << rec.id << ")\n";
    PrintDigest(log_, "source     ", m->source);
    PrintDigest(log_, "destination", m->destination);
    log_ << "  access tokens: " << m->tokens.matching << " of " << m->tokens.source
         << " in the destination\n";
    log_ << "  " << (m->match ? "" : "DIFFERS: ") << m->verdict << " (checked in "
         << Seconds(m->check_seconds) << ")\n";
    return Status::Ok();
  }

  Status CopySecrets() {
    for (const char* name : {kServerSecret, kAccessTokenSecret}) {
      KVC_ASSIGN_OR_RETURN(storage::SecretCopy c, storage::CopySecret(from_, to_, name));
      switch (c) {
        case storage::SecretCopy::kAbsent:
          break;
        case storage::SecretCopy::kCopied:
          log_ << "copied the secret '" << name << "' to " << to_.SecretLocation(name) << "\n";
          break;
        case storage::SecretCopy::kSame:
          log_ << "the secret '" << name << "' is the same on both sides\n";
          break;
        case storage::SecretCopy::kDiffers:
          Warn(std::string("the destination has a secret '") + name + "' of its own (" +
               to_.SecretLocation(name) + "), which is kept: " +
               (std::string(name) == kServerSecret
                    ? "data-path tokens the old server issued will not be accepted (clients get "
                      "new ones on their next metadata exchange)"
                    : "the old server's bootstrap access token will not work unless it is given "
                      "to serve again (--access-token or KVCONNECT_ACCESS_TOKEN)"));
          break;
      }
    }
    return Status::Ok();
  }

  storage::Storage& from_;
  storage::Storage& to_;
  const MigrateOptions& o_;
  std::ostream& log_;
  MigrationReport* const report_;
};

// --SIDE-token, --SIDE-token-file and --SIDE-ca-file: how to reach the server at --SIDE URL.
void AddRemoteFlags(CLI::App* m, const std::string& side, const std::string& token_help,
                    std::string* token, std::string* token_file, std::string* ca_file) {
  const std::string url = "--" + side + " URL: ";
  m->add_option("--" + side + "-token", *token, url + token_help);
  m->add_option("--" + side + "-token-file", *token_file,
                url + "read that token from this file (not world-readable)");
  m->add_option("--" + side + "-ca-file", *ca_file,
                "--" + side + " https://...: a CA certificate to trust besides the system's");
}

}  // namespace

bool MigrationReport::ok() const {
  for (const DatabaseMigration& m : databases) {
    if (!m.match) return false;
  }
  return true;
}

Result<MigrationReport> Migrate(const storage::StorageOptions& from,
                                const storage::StorageOptions& to, const MigrateOptions& o,
                                std::ostream& log) {
  if (o.batch_rows < 1) return InvalidArgument("--batch must be at least 1");
  if (SameStorage(from, to)) {
    return InvalidArgument("the source and the destination are the same storage");
  }
  OpenedStorage source;
  KVC_RETURN_IF_ERROR(source.OpenSource(from));
  KVC_ASSIGN_OR_RETURN(std::vector<storage::DatabaseRecord> databases, SelectDatabases(*source, o));
  OpenedStorage dest;
  KVC_RETURN_IF_ERROR(dest.OpenDestination(to, o.verify_only));
  std::unique_ptr<storage::WriterLock> lock;
  if (!o.verify_only) {
    KVC_ASSIGN_OR_RETURN(lock, ClaimWriters(*dest,
                                            "; the destination must not be written by anyone "
                                            "else during a migration: stop that server first"));
  }
  MigrationReport report;
  report.from = source->Describe();
  report.to = dest->Describe();
  log << (o.verify_only ? "Comparing " : "Migrating ") << databases.size() << " database(s) from "
      << report.from << " to " << report.to << "\n";
  Migration m(*source, *dest, o, log, &report);
  KVC_RETURN_IF_ERROR(m.Run(databases));
  int64_t differing = 0;
  for (const DatabaseMigration& d : report.databases) differing += d.match ? 0 : 1;
  const std::string warned =
      report.warnings.empty()
          ? std::string()
          : " (" + std::to_string(report.warnings.size()) + " warning(s) above)";
  if (differing == 0) {
    log << (o.verify_only ? "All " : "Done: all ") << report.databases.size()
        << " database(s) match" << warned << ".\n";
  } else {
    log << differing << " of " << report.databases.size() << " database(s) DIFFER" << warned
        << ".\n";
  }
  return report;
}

void AddMigrateCommand(CLI::App& app, MigrateConfig* c) {
  CLI::App* m = app.add_subcommand(
      "migrate",
      "Copy databases (rows, versions, access tokens, secrets) to another storage, e.g. SQLite to "
      "PostgreSQL, and verify the copy; the source may keep serving. With --from URL: import one "
      "database from any KV Connect server (Deno Deploy included)");
  m->add_option("--from", c->from,
                "Source: sqlite:DATA_DIR, sqlite:FILE.sqlite3 (a Deno KV file), "
                "postgres:CONNINFO or postgres://...; or a KV Connect URL as given to "
                "Deno.openKv (http(s)://HOST, .../databases/NAME/connect, "
                "https://api.deno.com/v2/databases/ID/connect)")
      ->required();
  m->add_option("--to", c->to,
                "Destination: sqlite:DATA_DIR or postgres:CONNINFO (no server may run on it); "
                "with --from URL also http(s)://HOST (a running kvconnect, --to-token) or "
                "ndjson:FILE (ndjson:- for stdout)")
      ->required();
  m->add_option("--db", c->dbs,
                "A database to migrate, by name or id (repeatable); with --from URL the one "
                "destination database (default: default), created if missing");
  m->add_flag("--all", c->all, "Migrate every database of the source");
  m->add_flag("--verify-only", c->verify_only,
              "Copy nothing: compare contents, versions and access tokens of both sides");
  m->add_flag("--no-secrets", c->no_secrets,
              "Do not copy the secrets server-secret and access-token (the old server's "
              "bootstrap token and data-path tokens then stop working)");
  m->add_option("--batch", c->batch_rows, "Rows per destination transaction and per read")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  // --from URL.
  AddRemoteFlags(m, "from", "the source's access token (default: env DENO_KV_ACCESS_TOKEN)",
                 &c->from_token, &c->from_token_file, &c->from_ca_file);
  m->add_flag("--from-insecure", c->from_insecure,
              "--from https://...: do not verify the source's certificate");
  m->add_flag("--from-http1", c->from_http1,
              "--from URL: speak HTTP/1.1 to the source (default HTTP/2 as Deno: ALPN h2, or h2c "
              "with prior knowledge for http://)");
  m->add_option("--from-retry-ms", c->from_retry_ms,
                "--from URL: retry 5xx answers and lost connections this long before giving up")
      ->capture_default_str();
  m->add_option("--from-timeout-ms", c->from_timeout_ms, "--from URL: one call to the source")
      ->capture_default_str();
  m->add_option("--page", c->page_entries,
                "--from URL: entries per snapshot_read and per destination write (1-1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  m->add_option("--max-rate", c->max_rate,
                "--from URL: copy at most this many entries per second (0: no limit)")
      ->capture_default_str();
  AddRemoteFlags(m, "to", "an admin token of that server (default: env KVCONNECT_ACCESS_TOKEN)",
                 &c->to_token, &c->to_token_file, &c->to_ca_file);
  m->add_option("--request-bytes", c->request_bytes,
                "--to URL: dump bytes per import request at most (below the server's "
                "--max-body-bytes)")
      ->capture_default_str();
  m->add_flag("--resume", c->resume,
              "--from URL: continue an interrupted import after the last key the destination "
              "holds (without it a non-empty destination is refused)");
  m->add_flag("--no-verify", c->no_verify,
              "--from URL: skip the final re-read of the source and the digests");
}

int RunMigrate(const MigrateConfig& c) {
  if (IsHttpUrl(c.from)) return RunMigrateFromUrl(c);
  auto from = ParseStorageSpec(c.from);
  if (!from.ok()) return PrintError(from.status());
  auto to = ParseStorageSpec(c.to);
  if (!to.ok()) return PrintError(to.status());
  MigrateOptions o;
  o.dbs = c.dbs;
  o.all = c.all;
  o.verify_only = c.verify_only;
  o.copy_secrets = !c.no_secrets;
  o.batch_rows = c.batch_rows;
  o.progress_ms = c.progress_ms;
  auto report = Migrate(*from, *to, o, std::cout);
  if (!report.ok()) return PrintError(report.status());
  return report->ok() ? 0 : 1;
}

}  // namespace kvc::cli
