#include "cli/migrate_url.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <thread>

#include "cli/admin.h"
#include "cli/flags.h"
#include "cli/kv_source.h"
#include "cli/secrets.h"
#include "codec/v8/v8_json.h"
#include "codec/versionstamp.h"

namespace kvc::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Above every key: keys are at most 2048 bytes (reference §3.8), and a read key may be 2049.
const std::string& EndOfKeys() {
  static const std::string kEnd(2049, '\xff');
  return kEnd;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string KeyText(const std::string& key) { return codec::KeyToJson(key); }

// A token from `--X-token`, else `--X-token-file`, else the environment variable `env`.
Result<std::string> TokenFrom(const std::string& given, const std::string& file,
                              const std::string& file_flag, const char* env) {
  if (!given.empty() && !file.empty()) {
    return InvalidArgument("give a token or " + file_flag + ", not both");
  }
  if (!given.empty()) return given;
  if (!file.empty()) return ReadSecretFile(file, file_flag);
  if (const char* e = std::getenv(env); e != nullptr) return std::string(e);
  return std::string();
}

// Progress on stderr: on a terminal a line rewritten in place a few times a second, otherwise
// a line every `every`.
class Progress {
 public:
  Progress(std::ostream& log, std::chrono::milliseconds every)
      : log_(log), tty_(::isatty(STDERR_FILENO) == 1 && &log == &std::cerr), every_(every) {}

  void Update(int64_t entries, int64_t bytes) {
    const auto now = Clock::now();
    const auto interval = tty_ ? std::chrono::milliseconds(250) : every_;
    if (now - last_ < interval) return;
    last_ = now;
    const double s = std::max(SecondsSince(started_), 1e-9);
    const std::string text = "copied " + std::to_string(entries) + " entries, " +
                             Fixed(static_cast<double>(bytes) / 1e6, 1) + " MB, " +
                             Fixed(static_cast<double>(entries) / s, 0) + " entries/s, " +
                             Fixed(static_cast<double>(bytes) / 1e6 / s, 2) + " MB/s";
    if (tty_) {
      log_ << "\r" << text << "   " << std::flush;
      dirty_ = true;
    } else {
      log_ << text << std::endl;
    }
  }

  // Ends the in-place line, if any.
  void Done() {
    if (dirty_) log_ << "\n";
    dirty_ = false;
  }

 private:
  std::ostream& log_;
  const bool tty_;
  const std::chrono::milliseconds every_;
  const Clock::time_point started_ = Clock::now();
  Clock::time_point last_ = Clock::now();
  bool dirty_ = false;
};

struct CopyState {
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t max_version = 0;  // of the entries this run copied
};

// Pages the source from `start` into the sink until a page comes back empty.
Status CopyAll(KvSource& source, ImportSink& sink, const MigrateConfig& c, std::string start,
               std::ostream& log, CopyState* st) {
  Progress progress(log, std::chrono::milliseconds(c.progress_ms));
  const auto started = Clock::now();
  for (;;) {
    Result<std::vector<Entry>> page = source.Read(start, EndOfKeys(), c.page_entries);
    if (!page.ok()) {
      progress.Done();
      return page.status();
    }
    if (page->empty()) break;
    if (Status s = sink.Write(*page); !s.ok()) {
      progress.Done();
      return Status(s.code(), "writing to " + sink.Describe() + " failed: " + s.message());
    }
    for (const Entry& e : *page) {
      st->bytes += static_cast<int64_t>(e.key.size() + e.value.size());
      st->max_version = std::max(st->max_version, e.version);
    }
    st->entries += static_cast<int64_t>(page->size());
    start = page->back().key;
    start.push_back('\0');
    progress.Update(st->entries, st->bytes);
    if (c.max_rate > 0) {
      const auto due =
          started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                        static_cast<double>(st->entries) / c.max_rate));
      std::this_thread::sleep_until(due);
    }
  }
  progress.Done();
  return sink.Finish();
}

// Re-reads the whole source into a digest of `form`, counting entries newer than `seen`.
Status DigestSource(KvSource& source, DigestForm form, int32_t page, int64_t seen, EntryDigest* out,
                    int64_t* newer) {
  EntryHasher h(form);
  std::string start;
  for (;;) {
    KVC_ASSIGN_OR_RETURN(std::vector<Entry> entries, source.Read(start, EndOfKeys(), page));
    if (entries.empty()) break;
    for (const Entry& e : entries) {
      KVC_RETURN_IF_ERROR(h.Add(e));
      if (e.version > seen) ++*newer;
    }
    start = entries.back().key;
    start.push_back('\0');
  }
  KVC_ASSIGN_OR_RETURN(*out, h.Finish());
  return Status::Ok();
}

void PrintDigest(std::ostream& log, const char* side, const EntryDigest& d, DigestForm form) {
  log << "  " << side << "  entries " << d.entries << "  "
      << (form == DigestForm::kDumpLines ? "dump bytes " : "bytes ") << d.bytes << "  sha256 "
      << d.sha256 << "\n";
}

Result<KvSourceOptions> SourceOptions(const MigrateConfig& c) {
  KvSourceOptions so;
  KVC_ASSIGN_OR_RETURN(so.url, ParseKvConnectUrl(c.from));
  KVC_ASSIGN_OR_RETURN(so.token, TokenFrom(c.from_token, c.from_token_file, "--from-token-file",
                                           "DENO_KV_ACCESS_TOKEN"));
  so.http = c.from_http1 ? client::HttpVersion::kHttp1 : client::HttpVersion::kHttp2;
  so.ca_file = c.from_ca_file;
  so.insecure = c.from_insecure;
  so.call_timeout = std::chrono::milliseconds(c.from_timeout_ms);
  so.retry_for = std::chrono::milliseconds(c.from_retry_ms);
  return so;
}

Result<SinkOptions> DestinationOptions(const MigrateConfig& c) {
  SinkOptions o;
  o.to = c.to;
  if (c.dbs.size() > 1) {
    return InvalidArgument("--from URL imports one database: give at most one --db NAME");
  }
  if (!c.dbs.empty()) o.db = c.dbs[0];
  KVC_ASSIGN_OR_RETURN(
      o.token, TokenFrom(c.to_token, c.to_token_file, "--to-token-file", "KVCONNECT_ACCESS_TOKEN"));
  o.ca_file = c.to_ca_file;
  o.request_bytes = c.request_bytes;
  o.import_batch = c.import_batch;
  o.resume = c.resume;
  return o;
}

void PrintVerdict(const UrlImportReport& r, DigestForm form, const CopyState& st,
                  std::ostream& log) {
  log << "Digests ("
      << (form == DigestForm::kDumpLines ? "SHA-256 of the dump lines"
                                         : "keys, encodings and value bytes")
      << "):\n";
  PrintDigest(log, "source (re-read)", r.source, form);
  if (r.destination_read) {
    PrintDigest(log, "destination     ", r.destination, form);
  } else {
    log << "  destination       stdout cannot be read back: not compared\n";
  }
  if (r.match) {
    if (r.destination_read) log << "  match: the destination holds what the source holds now\n";
    return;
  }
  log << "  DIFFERS\n";
  if (r.newer > 0) {
    log << "The source changed during the copy: " << r.newer << " entr"
        << (r.newer == 1 ? "y has a versionstamp" : "ies have versionstamps")
        << " newer than any the copy saw (" << codec::VersionToHex(st.max_version)
        << "). Stop writes to the source, then import again into an empty destination.\n";
  } else {
    log << "The source and the destination differ (entries changed or deleted at the source "
           "during the copy, or the destination was written meanwhile). Stop writes to the "
           "source, then import again into an empty destination.\n";
  }
}

// What the copy did, how fast, and what it could not copy.
void PrintCopySummary(const UrlImportReport& r, KvSource& source, ImportSink& sink,
                      std::ostream& log) {
  const double s = std::max(r.copy_seconds, 1e-9);
  log << "Copied " << r.copied << " entries ("
      << Fixed(static_cast<double>(r.copied_bytes) / 1e6, 2) << " MB of keys and values) in "
      << Fixed(r.copy_seconds, 2) << " s: " << Fixed(static_cast<double>(r.copied) / s, 0)
      << " entries/s, " << Fixed(static_cast<double>(r.copied_bytes) / 1e6 / s, 2) << " MB/s";
  if (source.retries() > 0) log << ", " << source.retries() << " retried call(s)";
  if (source.metadata_exchanges() > 1) {
    log << ", " << source.metadata_exchanges() << " metadata exchanges";
  }
  log << "\n  " << sink.VersionNote() << ".\n"
      << "  Not copied: queue messages (KV Connect cannot list them) and expiry (KV Connect "
         "does not expose it: every entry was written without one).\n";
}

// Reads the source again and the destination back (if it can be read), compares their digests
// into *r and prints the verdict.
Status Verify(KvSource& source, ImportSink& sink, int32_t page_entries, const CopyState& st,
              UrlImportReport* r, std::ostream& log) {
  log << "Verifying: reading the source again and the destination back ..." << std::endl;
  const DigestForm form = sink.digest_form();
  const int64_t seen = st.entries > 0 ? st.max_version : std::numeric_limits<int64_t>::max();
  KVC_RETURN_IF_ERROR(DigestSource(source, form, page_entries, seen, &r->source, &r->newer));
  KVC_ASSIGN_OR_RETURN(std::optional<EntryDigest> dest, sink.DigestDestination());
  if (dest) {
    r->destination = *dest;
    r->destination_read = true;
  }
  if (!r->destination_read) r->newer = 0;
  r->verified = true;
  r->match = r->destination_read && r->source.sha256 == r->destination.sha256 &&
             r->source.entries == r->destination.entries;
  if (!r->destination_read) r->match = true;  // nothing to compare with: said in the output
  PrintVerdict(*r, form, st, log);
  return Status::Ok();
}

}  // namespace

Result<UrlImportReport> ImportFromUrl(const MigrateConfig& c, std::ostream& log) {
  if (c.all || c.verify_only || c.no_secrets) {
    return InvalidArgument(
        "--all, --verify-only and --no-secrets are for storage sources, not "
        "--from URL");
  }
  if (c.page_entries < 1 || c.page_entries > kMaxReadEntries) {
    return InvalidArgument("--page must be 1 to 1000 (KV Connect's limit per read)");
  }
  KVC_ASSIGN_OR_RETURN(KvSourceOptions so, SourceOptions(c));
  KVC_ASSIGN_OR_RETURN(SinkOptions sink_options, DestinationOptions(c));
  // The source first: a URL or token that does not work touches no destination.
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<KvSource> source, KvSource::Open(so, &log));
  const loadgen::DataPath& path = source->data_path();
  sink_options.source_database_id = path.database_id;
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<ImportSink> sink, OpenSink(sink_options));
  KVC_ASSIGN_OR_RETURN(std::optional<std::string> last, sink->LastKey());
  if (last && !c.resume) {
    return AlreadyExists(sink->Describe() + " already holds entries (the last is " +
                         KeyText(*last) +
                         "): continue an interrupted import with --resume, or import into an "
                         "empty database or a new file");
  }
  UrlImportReport r;
  std::string start;
  log << "Importing from " << so.url.ToString() << " (KV Connect protocol " << path.version
      << ", database " << path.database_id << ", endpoint " << path.endpoint.ToString() << ", "
      << (c.from_http1 ? "HTTP/1.1" : "HTTP/2") << ") into " << sink->Describe() << "\n";
  if (last) {
    r.resumed = true;
    start = *last;
    start.push_back('\0');
    log << "Resuming after the last key the destination holds: " << KeyText(*last) << "\n";
  } else if (c.resume) {
    log << "The destination holds no entry: starting from the first key\n";
  }
  CopyState st;
  const auto started = Clock::now();
  if (Status copied = CopyAll(*source, *sink, c, start, log, &st); !copied.ok()) {
    if (st.entries == 0 && !r.resumed) return copied;
    return Status(copied.code(), copied.message() + ". The " + std::to_string(st.entries) +
                                     " entries of whole pages written before stay; run the "
                                     "same command with --resume to continue");
  }
  r.copied = st.entries;
  r.copied_bytes = st.bytes;
  r.copy_seconds = SecondsSince(started);
  PrintCopySummary(r, *source, *sink, log);
  if (c.no_verify) {
    log << "Not verified (--no-verify): no digest was compared, and whether the source changed "
           "during the copy is not known.\n";
    return r;
  }
  KVC_RETURN_IF_ERROR(Verify(*source, *sink, c.page_entries, st, &r, log));
  return r;
}

int RunMigrateFromUrl(const MigrateConfig& c) {
  auto report = ImportFromUrl(c, std::cerr);
  if (!report.ok()) return PrintError(report.status());
  return !report->verified || report->match ? 0 : 1;
}

}  // namespace kvc::cli
