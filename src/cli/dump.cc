#include "cli/dump.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>

#include "cli/admin.h"
#include "cli/admin_client.h"
#include "cli/flags.h"
#include "codec/admin_json.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "engine/engine.h"
#include "service/query.h"
#include "storage/private_file.h"
#include "storage/storage.h"

namespace kvc::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Megabytes(int64_t bytes) {
  if (bytes < 1000000) return Count(bytes, "byte", "bytes");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

StorageFlags StorageOf(const DumpConfig& c) { return {c.storage, c.data_dir, c.postgres}; }

Result<storage::DatabaseRecord> FindDatabase(storage::Storage& s, const DumpConfig& c) {
  auto rec = s.catalog().FindDatabase(c.db);
  if (!rec.ok() && rec.status().code() == StatusCode::kNotFound) {
    const std::string where = StorageFlagsHint(StorageOf(c));
    return NotFound("database '" + c.db + "' not found in " + s.Describe() +
                    "; create it with `kvconnect db create " + c.db + where +
                    "` (`kvconnect db list" + where + "` shows the databases)");
  }
  return rec;
}

// The admin client of --url, with the token of ResolveToken (flags.h).
Result<std::unique_ptr<AdminClient>> ConnectAdmin(const DumpConfig& c) {
  AdminClient::Options o;
  o.url = c.url;
  KVC_ASSIGN_OR_RETURN(o.token, ResolveToken(c.token, c.url, LocalDataDir(StorageOf(c))));
  o.db = c.db;
  o.ca_file = c.ca_file;
  o.connect_timeout = std::chrono::milliseconds(c.connect_timeout_ms);
  o.request_timeout = std::chrono::milliseconds(c.request_timeout_ms);
  return AdminClient::Connect(o);
}

// --- export -------------------------------------------------------------------------------------

Result<ExportSummary> ExportDirect(const DumpConfig& c, const codec::AdminRange& range,
                                   std::ostream& out) {
  const auto started = Clock::now();
  KVC_ASSIGN_OR_RETURN(auto storage, OpenStorageOf(StorageOf(c), DataDirUse::kMustExist));
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, FindDatabase(*storage, c));
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> backend, storage->OpenBackend(rec));
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Reader> reader, backend->OpenReader());
  // One snapshot for the whole dump: SQLite WAL readers never block the server's writer.
  KVC_RETURN_IF_ERROR(reader->Begin());
  ExportSummary summary;
  const auto page_size = static_cast<int32_t>(c.export_page_entries);
  auto run = [&]() -> Status {
    KVC_ASSIGN_OR_RETURN(const int64_t version, reader->DataVersion());
    summary.versionstamp = codec::VersionToHex(version);
    const int64_t now = NowUnixMs();
    std::string from = range.start;
    std::vector<Entry> page;
    std::string text;
    while (from < range.end) {
      page.clear();
      KVC_RETURN_IF_ERROR(reader->Scan(ReadRange{from, range.end, page_size, false}, now, &page));
      text.clear();
      for (const Entry& e : page) {
        KVC_ASSIGN_OR_RETURN(std::string line, service::DumpLine(e));
        text += line;
      }
      out.write(text.data(), static_cast<std::streamsize>(text.size()));
      if (!out) return IoError("writing the dump failed");
      summary.entries += static_cast<int64_t>(page.size());
      summary.bytes += static_cast<int64_t>(text.size());
      if (page.size() < static_cast<size_t>(page_size)) break;
      from = page.back().key;
      from.push_back('\0');
    }
    out.flush();
    if (!out) return IoError("writing the dump failed");
    return Status::Ok();
  };
  Status s = run();
  reader->End();
  KVC_RETURN_IF_ERROR(s);
  summary.seconds = SecondsSince(started);
  return summary;
}

Result<ExportSummary> ExportOverHttp(const DumpConfig& c, std::ostream& out) {
  const auto started = Clock::now();
  KVC_ASSIGN_OR_RETURN(auto client, ConnectAdmin(c));
  ExportSummary summary;
  bool write_failed = false;
  Status s = client->PostStreaming(
      "export", c.prefix.empty() ? std::string() : "{\"prefix\":" + c.prefix + "}",
      [&](std::string_view data) {
        if (write_failed) return;
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
        write_failed = !out;
        summary.bytes += static_cast<int64_t>(data.size());
        for (char ch : data) summary.entries += ch == '\n' ? 1 : 0;
      },
      &summary.versionstamp);
  KVC_RETURN_IF_ERROR(s);
  out.flush();
  if (write_failed || !out) return IoError("writing the dump failed");
  summary.seconds = SecondsSince(started);
  return summary;
}

// --- import -------------------------------------------------------------------------------------

// Prints a progress line every c.progress_lines lines or c.progress_ms, whichever first.
class ProgressLog {
 public:
  ProgressLog(const DumpConfig& c, std::ostream* log) : c_(c), log_(log) {}
  void Update(const service::ImportStats& st) {
    if (c_.quiet) return;
    const auto now = Clock::now();
    if (st.last_line - last_line_ < c_.progress_lines &&
        now - last_ < std::chrono::milliseconds(c_.progress_ms)) {
      return;
    }
    last_line_ = st.last_line;
    last_ = now;
    *log_ << "import: " << Count(st.entries, "entry", "entries") << ", " << Megabytes(st.bytes)
          << ", " << Seconds(st.seconds) << " (through line " << st.last_line << ")" << std::endl;
  }

 private:
  const DumpConfig& c_;
  std::ostream* const log_;
  int64_t last_line_ = 0;
  Clock::time_point last_ = Clock::now();
};

Result<service::ImportStats> ImportDirect(const DumpConfig& c, service::ImportOptions o,
                                          std::istream& in, std::ostream& log) {
  KVC_ASSIGN_OR_RETURN(auto storage, OpenStorageOf(StorageOf(c), DataDirUse::kMustExist));
  // Only one process may write a database: refuse if a server (or another import) has it.
  KVC_ASSIGN_OR_RETURN(auto lock, ClaimWriters(*storage,
                                               ". Import through that server instead: kvconnect "
                                               "import --url http://HOST:PORT --token "
                                               "ADMIN_TOKEN ...; or stop it first"));
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, FindDatabase(*storage, c));
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Backend> backend, storage->OpenBackend(rec));
  engine::EngineOptions eo;
  eo.reader_threads = 1;
  eo.read_cache_bytes = 0;
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> opened,
                       engine::Engine::Open(std::move(backend), eo));
  std::shared_ptr<engine::Engine> engine = std::move(opened);
  ProgressLog progress(c, &log);
  std::promise<service::ImportOutcome> promise;
  auto future = promise.get_future();
  // The engine is ours alone, so reading the next lines on its writer thread (between our own
  // batches) delays nobody.
  service::BulkImport::Start(
      engine, std::move(o), service::StreamDumpReader(&in, c.max_line_bytes),
      [](const std::function<void()>& step) {
        step();
        return Status::Ok();
      },
      [&progress](const service::ImportStats& st) { progress.Update(st); },
      [&promise](service::ImportOutcome out) { promise.set_value(std::move(out)); });
  service::ImportOutcome out = future.get();
  engine->Shutdown();
  KVC_RETURN_IF_ERROR(out.status);
  return out.stats;
}

Result<service::ImportStats> ImportOverHttp(const DumpConfig& c, std::istream& in,
                                            std::ostream& log) {
  const auto started = Clock::now();
  KVC_ASSIGN_OR_RETURN(auto client, ConnectAdmin(c));
  auto reader = service::StreamDumpReader(&in, c.max_line_bytes);
  ProgressLog progress(c, &log);
  service::ImportStats total;
  int64_t line_no = 1;
  bool first = true;
  bool eof = false;
  std::string body;
  while (!eof) {
    body.clear();
    const int64_t first_line = line_no;
    while (body.size() < c.request_bytes) {
      auto line = reader->Next();
      if (!line.ok()) {
        return Status(line.status().code(),
                      "line " + std::to_string(line_no) + ": " + line.status().message() +
                          ". Stopped there: " + Count(total.entries, "entry was", "entries were") +
                          " imported before it.");
      }
      if (!line->has_value()) {
        eof = true;
        break;
      }
      body.append(**line);
      body.push_back('\n');
      ++line_no;
    }
    // An empty dump still replaces: the first request deletes.
    if (body.empty() && !first) break;
    std::string what = "import?mode=" + (first ? c.mode : std::string("merge")) +
                       "&batch=" + std::to_string(c.batch_entries) +
                       "&first_line=" + std::to_string(first_line);
    if (!c.prefix.empty()) what += "&prefix=" + service::EncodeQueryValue(c.prefix);
    KVC_ASSIGN_OR_RETURN(client::Response r,
                         client->Post(what, std::move(body), "application/x-ndjson"));
    auto answer = codec::ParseAdminImportAnswer(r.body);
    if (r.status != 200) {
      Status s = AdminHttpError(r.status, r.body);
      if (s.code() == StatusCode::kNotFound && s.message().starts_with("Database '")) {
        s = NotFound(s.message() + " Create it with `kvconnect db create " + c.db +
                     "` (or POST /admin/v1/databases), then import again.");
      }
      if (total.entries > 0) {
        return Status(s.code(), s.message() + " Earlier requests had imported " +
                                    Count(total.entries, "entry", "entries") + " (through line " +
                                    std::to_string(total.last_line) + ").");
      }
      return s;
    }
    if (!answer.ok()) return Internal("the server's answer is not JSON: " + r.body);
    const service::ImportStats& part = answer->stats;
    total.entries += part.entries;
    total.bytes += part.bytes;
    total.batches += part.batches;
    total.deleted += part.deleted;
    total.skipped += part.skipped;
    if (part.last_line > 0) total.last_line = part.last_line;
    total.seconds = SecondsSince(started);
    progress.Update(total);
    first = false;
    body = std::string();
  }
  total.seconds = SecondsSince(started);
  return total;
}

}  // namespace

Result<ExportSummary> RunExport(const DumpConfig& config, std::ostream& out) {
  DumpConfig c = config;
  if (!c.prefix.empty()) {
    KVC_ASSIGN_OR_RETURN(c.prefix, ParseKeyFlag("--prefix", c.prefix));
  }
  codec::AdminRange range{std::string(1, '\x00'), std::string(1, '\xff')};
  if (!c.prefix.empty()) {
    auto r = codec::AdminPrefixRange(c.prefix);
    if (!r.ok()) return InvalidArgument("--prefix: " + r.status().message());
    range = std::move(*r);
  }
  return c.url.empty() ? ExportDirect(c, range, out) : ExportOverHttp(c, out);
}

Result<service::ImportStats> RunImport(const DumpConfig& config, std::istream& in,
                                       std::ostream& log) {
  DumpConfig c = config;
  if (!c.prefix.empty()) {
    KVC_ASSIGN_OR_RETURN(c.prefix, ParseKeyFlag("--prefix", c.prefix));
  }
  if (c.mode != "merge" && c.mode != "replace") {
    return InvalidArgument("--mode must be merge or replace, not '" + c.mode + "'");
  }
  service::ImportOptions o;
  o.mode = c.mode == "replace" ? service::ImportMode::kReplace : service::ImportMode::kMerge;
  o.batch.max_entries = c.batch_entries;
  if (!c.prefix.empty()) {
    auto r = codec::AdminPrefixRange(c.prefix, &o.batch.prefix);
    if (!r.ok()) return InvalidArgument("--prefix: " + r.status().message());
    o.replace_start = std::move(r->start);
    o.replace_end = std::move(r->end);
  }
  return c.url.empty() ? ImportDirect(c, std::move(o), in, log) : ImportOverHttp(c, in, log);
}

void AddDumpCommands(CLI::App& app, DumpConfig* c) {
  auto common = [c](CLI::App* s) {
    AddDbFlag(s, &c->db);
    AddStorageFlags(s, &c->storage, &c->data_dir, &c->postgres,
                    "Data directory (as for serve), when not --url; must exist");
    AddUrlFlag(s, &c->url,
               "Go through this running server's admin API (admin token), e.g. "
               "http://127.0.0.1:4512");
    AddTokenFlag(s, &c->token);
    AddCaFileFlag(s, &c->ca_file);
  };
  CLI::App* ex = app.add_subcommand(
      "export", "Write a database (or the keys under --prefix) as NDJSON, one snapshot");
  common(ex);
  ex->add_option("--prefix", c->prefix,
                 "Only keys under this key, as Deno writes keys ('[\"users\"]') or KvKeyJSON");
  ex->add_option("-o,--output", c->file, "Write here instead of stdout");
  ex->add_flag("-q,--quiet", c->quiet, "No summary on stderr");

  CLI::App* im = app.add_subcommand(
      "import", "Apply an NDJSON dump (as export writes it) to a database in atomic batches");
  common(im);
  im->add_option("--mode", c->mode, "merge: add and overwrite; replace: delete everything first")
      ->check(CLI::IsMember({"merge", "replace"}))
      ->capture_default_str();
  im->add_option("--prefix", c->prefix,
                 "Keys must be under this key ('[\"users\"]' or KvKeyJSON); replace deletes only "
                 "under it");
  im->add_option("-i,--input", c->file, "Read here instead of stdin");
  im->add_option("--batch", c->batch_entries, "Entries per atomic write (at most 1000)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  im->add_option("--request-bytes", c->request_bytes,
                 "With --url: dump bytes per request (keep below the server's --max-body-bytes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  im->add_flag("-q,--quiet", c->quiet, "No progress or summary on stderr");
}

int RunDump(CLI::App& app, const DumpConfig& config) {
  std::ios::sync_with_stdio(false);
  const bool to_file = config.file != "-";
  if (app.got_subcommand("export")) {
    std::ofstream file;
    if (to_file) {
      // A dump holds every value: mode 0600 before anything is written to it.
      if (Status s = storage::PreparePrivateFile(config.file, true); !s.ok()) return PrintError(s);
      file.open(config.file, std::ios::binary | std::ios::trunc);
      if (!file) return PrintError(IoError("cannot write " + config.file));
    }
    auto summary = RunExport(config, to_file ? static_cast<std::ostream&>(file) : std::cout);
    if (!summary.ok()) {
      if (to_file) {
        file.close();
        std::error_code ec;
        fs::remove(config.file, ec);  // never leave a partial dump behind under its name
      }
      return PrintError(summary.status());
    }
    if (!config.quiet) {
      std::cerr << "Exported " << Count(summary->entries, "entry", "entries") << " ("
                << Megabytes(summary->bytes) << ") of '" << config.db << "'"
                << (summary->versionstamp.empty() ? ""
                                                  : " at versionstamp " + summary->versionstamp)
                << " in " << Seconds(summary->seconds) << ".\n";
    }
    return 0;
  }
  std::ifstream file;
  if (to_file) {
    file.open(config.file, std::ios::binary);
    if (!file) return PrintError(NotFound("cannot read " + config.file));
  }
  auto stats = RunImport(config, to_file ? static_cast<std::istream&>(file) : std::cin, std::cerr);
  if (!stats.ok()) return PrintError(stats.status());
  if (!config.quiet) {
    std::cerr << "Imported " << Count(stats->entries, "entry", "entries") << " ("
              << Megabytes(stats->bytes) << " of dump) into '" << config.db << "' in "
              << Count(stats->batches, "atomic write", "atomic writes") << " in "
              << Seconds(stats->seconds)
              << (stats->deleted > 0 ? " (replace: deleted " +
                                           Count(stats->deleted, "entry", "entries") + " first)"
                                     : std::string())
              << ". Imported entries carry new versionstamps.\n";
    if (stats->skipped > 0) {
      std::cerr << "Skipped " << stats->skipped << (stats->skipped == 1 ? " entry" : " entries")
                << " whose expires_at had already passed.\n";
    }
  }
  return 0;
}

}  // namespace kvc::cli
