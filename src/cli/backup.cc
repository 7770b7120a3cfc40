#include "cli/backup.h"

#include <filesystem>
#include <iostream>

#include "backup/operations.h"
#include "backup/restore.h"
#include "cli/admin.h"
#include "cli/flags.h"
#include "codec/backup_manifest.h"
#include "codec/json_text.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "storage/storage.h"

namespace kvc::cli {
namespace {

StorageFlags StorageOf(const BackupConfig& c) { return {c.storage, c.data_dir, c.postgres}; }

// A backup target to read from (--from): opening a directory target makes it, so a mistyped
// path would look like an empty target. Errors: NotFound naming the absolute path tried.
Status RequireBackupSource(const std::string& from) {
  if (from.starts_with("s3://")) return Status::Ok();
  const std::string path = from.starts_with("file://") ? from.substr(7) : from;
  if (path.empty() || (from.find("://") != std::string::npos && !from.starts_with("file://"))) {
    return Status::Ok();  // OpenTarget says what is wrong with it
  }
  std::error_code ec;
  const std::string abs = AbsolutePath(path);
  if (std::filesystem::is_directory(abs, ec)) return Status::Ok();
  return NotFound("no backup target at " + abs +
                  " (--from); give the directory `kvconnect serve --backup-to` or `kvconnect "
                  "backup --to` wrote, or s3://bucket/prefix");
}

int Backup(const BackupConfig& c) {
  if (c.to.empty()) return PrintError(InvalidArgument("backup needs --to DIR|s3://bucket/prefix"));
  if (c.all == !c.dbs.empty()) {
    return PrintError(InvalidArgument("name the databases with --db NAME, or give --all"));
  }
  auto storage = OpenStorageOf(StorageOf(c), DataDirUse::kMustExist);
  if (!storage.ok()) return PrintError(storage.status());
  auto target = backup::OpenTarget(c.to, backup::TargetOptions{});
  if (!target.ok()) return PrintError(target.status());
  std::vector<storage::DatabaseRecord> records;
  if (c.all) {
    auto all = (*storage)->catalog().ListDatabases();
    if (!all.ok()) return PrintError(all.status());
    records = *all;
  } else {
    for (const std::string& name : c.dbs) {
      auto rec = (*storage)->catalog().FindDatabase(name);
      if (!rec.ok()) {
        return PrintError(rec.status().code() == StatusCode::kNotFound
                              ? NotFound("no database named '" + name + "' in " +
                                         (*storage)->Describe() +
                                         "; `kvconnect db list` shows the databases")
                              : rec.status());
      }
      records.push_back(*rec);
    }
  }
  for (const storage::DatabaseRecord& rec : records) {
    auto out = backup::SnapshotDatabase(**storage, rec, **target);
    if (!out.ok()) {
      return PrintError(Status(out.status().code(),
                               "backup of '" + rec.name + "' failed: " + out.status().message()));
    }
    const codec::SnapshotManifest& m = out->manifest;
    std::cout << "backed up '" << rec.name << "' at versionstamp " << codec::VersionToHex(m.version)
              << " (" << Count(m.key_count, "key", "keys") << ", "
              << Count(m.bytes, "byte", "bytes") << "; copy " << out->copy_ms << " ms, upload "
              << out->upload_ms << " ms) to " << (*target)->Describe() << "/" << out->data_object
              << "\n";
  }
  return 0;
}

int List(const BackupConfig& c) {
  if (c.from.empty()) return PrintError(InvalidArgument("backup list needs --from DIR|s3://..."));
  if (Status s = RequireBackupSource(c.from); !s.ok()) return PrintError(s);
  auto target = backup::OpenTarget(c.from, backup::TargetOptions{});
  if (!target.ok()) return PrintError(target.status());
  auto ranges = backup::ListRestorable(**target);
  if (!ranges.ok()) return PrintError(ranges.status());
  if (c.json) {
    std::cout << "[";
    for (size_t i = 0; i < ranges->size(); ++i) {
      const backup::RestorableRange& r = (*ranges)[i];
      std::cout << (i ? "," : "") << "\n  {\"database\":" << codec::JsonQuote(r.database)
                << ",\"snapshot_versionstamp\":\"" << codec::VersionToHex(r.snapshot.version)
                << "\",\"snapshot_time\":\"" << FormatRfc3339Utc(r.snapshot.time_ms)
                << "\",\"latest_versionstamp\":\"" << codec::VersionToHex(r.head.version)
                << "\",\"latest_time\":\"" << FormatRfc3339Utc(r.head.time_ms)
                << "\",\"segments\":" << r.segments << ",\"log_bytes\":" << r.log_bytes << "}";
    }
    std::cout << (ranges->empty() ? "]\n" : "\n]\n");
    return 0;
  }
  if (ranges->empty()) {
    std::cout << "no backups in " << (*target)->Describe() << "\n";
    return 0;
  }
  std::cout << "database\tfrom (snapshot)\t\t\t\t\tthrough (latest commit in the log)\n";
  for (const backup::RestorableRange& r : *ranges) {
    std::cout << r.database << "\t" << codec::VersionToHex(r.snapshot.version) << " "
              << FormatRfc3339Utc(r.snapshot.time_ms) << "\t" << codec::VersionToHex(r.head.version)
              << " " << FormatRfc3339Utc(r.head.time_ms) << "\t("
              << Count(r.segments, "segment", "segments") << ", "
              << Count(r.log_bytes, "byte", "bytes") << ")\n";
  }
  return 0;
}

int Restore(const BackupConfig& c) {
  if (c.from.empty() || c.db.empty()) {
    return PrintError(InvalidArgument("restore needs --from DIR|s3://... and --db NAME"));
  }
  auto point = backup::ParseRestorePoint(c.at);
  if (!point.ok()) return PrintError(point.status());
  if (Status s = RequireBackupSource(c.from); !s.ok()) return PrintError(s);
  auto target = backup::OpenTarget(c.from, backup::TargetOptions{});
  if (!target.ok()) return PrintError(target.status());
  // Restore is, with serve and db create, a command that may make its data directory: restoring
  // onto a fresh machine is what backups are for. It says so when it does.
  auto where = ResolveStorage(StorageOf(c));
  if (!where.ok()) return PrintError(where.status());
  std::error_code ec;
  const std::string abs = where->kind == "sqlite" ? AbsolutePath(where->location) : "";
  const bool created = !abs.empty() && !std::filesystem::exists(abs, ec);
  if (!abs.empty()) where->location = abs;
  auto storage = storage::OpenStorage(*where);
  if (!storage.ok()) return PrintError(storage.status());
  if (created) std::cout << "created the data directory " << abs << "\n";
  auto r = backup::RestoreIntoCatalog(**storage, **target, c.db, c.as, *point);
  if (!r.ok()) return PrintError(r.status());
  const backup::RestoreOutcome& o = r->outcome;
  std::cout << "restored '" << c.db << "' from " << (*target)->Describe() << " as '"
            << o.record.name << "' at versionstamp " << codec::VersionToHex(o.restored.version)
            << " (committed " << FormatRfc3339Utc(o.restored.time_ms) << "): snapshot "
            << codec::VersionToHex(o.snapshot.version) << " + "
            << Count(o.entries_applied, "logged commit", "logged commits") << " from "
            << Count(o.segments_read, "segment", "segments") << ", "
            << Count(o.key_count, "key", "keys") << ", in " << o.elapsed_ms << " ms\n";
  if (r->replaced) {
    std::cout << "replaced the database in place (same id and tokens); a running server "
                 "switches to it within its catalog poll. The replaced data is kept in "
              << r->previous_location << " until you delete it.\n";
  }
  return 0;
}

}  // namespace

void AddBackupCommands(CLI::App& app, BackupConfig* c) {
  CLI::App* b = app.add_subcommand(
      "backup", "Snapshot databases into a backup target, online (also while serve runs)");
  AddStorageFlags(b, &c->storage, &c->data_dir, &c->postgres, "Data directory (must exist)");
  b->add_option("--db", c->dbs, "Database to back up (repeatable)");
  b->add_flag("--all", c->all, "Back up every database");
  b->add_option("--to", c->to, "Target: a directory or s3://bucket/prefix (AWS_* variables)");
  CLI::App* list = b->add_subcommand("list", "What a backup target can restore, with times");
  list->add_option("--from", c->from, "Target: a directory or s3://bucket/prefix")->required();
  AddJsonFlag(list, &c->json);
  CLI::App* r = app.add_subcommand(
      "restore", "Restore a database from a backup target, to its latest state or --at a point");
  AddStorageFlags(r, &c->storage, &c->data_dir, &c->postgres, "Data directory (made if missing)");
  r->add_option("--from", c->from, "Target: a directory or s3://bucket/prefix")->required();
  r->add_option("--db", c->db, "The database's name in the backup")->required();
  r->add_option("--as", c->as,
                "Restore under this name (default: --db; an existing database of that name is "
                "replaced in place)");
  r->add_option("--at", c->at,
                "A versionstamp (20 hex digits), a version number, or an RFC 3339 time; "
                "default: the latest backed-up commit");
}

int RunBackup(CLI::App& app, const BackupConfig& c) {
  if (app.got_subcommand("restore")) return Restore(c);
  CLI::App* b = app.get_subcommand("backup");
  if (b->got_subcommand("list")) return List(c);
  return Backup(c);
}

}  // namespace kvc::cli
