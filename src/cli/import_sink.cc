#include "cli/import_sink.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "cli/admin_client.h"
#include "cli/kv_source.h"
#include "cli/migrate.h"
#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "codec/v8/v8_json.h"
#include "common/clock.h"
#include "common/random.h"
#include "service/admin/dump.h"
#include "storage/migration.h"
#include "storage/storage.h"

namespace kvc::cli {

// --- digests ------------------------------------------------------------------------------------

struct EntryHasher::Ctx {
  EVP_MD_CTX* md = nullptr;
  bool ok = false;
  ~Ctx() {
    if (md != nullptr) EVP_MD_CTX_free(md);
  }
};

EntryHasher::EntryHasher(DigestForm form) : form_(form), ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  ctx_->ok = ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1;
}

EntryHasher::~EntryHasher() = default;

void EntryHasher::Update(std::string_view bytes) {
  if (ctx_->ok && !bytes.empty()) {
    ctx_->ok = EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size()) == 1;
  }
}

void EntryHasher::UpdateNumber(uint64_t n) {
  char be[8];
  for (int i = 7; i >= 0; --i) {
    be[i] = static_cast<char>(n & 0xff);
    n >>= 8;
  }
  Update(std::string_view(be, 8));
}

Status EntryHasher::Add(const Entry& entry) {
  if (form_ == DigestForm::kDumpLines) {
    KVC_ASSIGN_OR_RETURN(const std::string line, service::DumpLine(entry));
    AddLine(line);
    return Status::Ok();
  }
  UpdateNumber(entry.key.size());
  Update(entry.key);
  UpdateNumber(static_cast<uint64_t>(entry.encoding));
  UpdateNumber(entry.value.size());
  Update(entry.value);
  ++digest_.entries;
  digest_.bytes += static_cast<int64_t>(entry.key.size() + entry.value.size());
  return Status::Ok();
}

void EntryHasher::AddLine(std::string_view line) {
  Update(line);
  for (char c : line) digest_.entries += c == '\n' ? 1 : 0;
  digest_.bytes += static_cast<int64_t>(line.size());
}

Result<EntryDigest> EntryHasher::Finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!ctx_->ok || EVP_DigestFinal_ex(ctx_->md, out, &n) != 1) {
    return Internal("SHA-256 failed (OpenSSL)");
  }
  ctx_->ok = false;
  digest_.sha256 = HexEncode(std::string(reinterpret_cast<const char*>(out), n));
  return digest_;
}

namespace {

// --- ndjson:FILE
// ----------------------------------------------------------------------------------

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

class NdjsonSink : public ImportSink {
 public:
  static Result<std::unique_ptr<ImportSink>> Open(const std::string& path, bool resume) {
    std::unique_ptr<NdjsonSink> sink(new NdjsonSink(path));
    if (path == "-") {
      if (resume) return InvalidArgument("--resume needs a file: ndjson:FILE, not ndjson:-");
      sink->fd_ = STDOUT_FILENO;
      return std::unique_ptr<ImportSink>(std::move(sink));
    }
    sink->fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (sink->fd_ < 0) return Errno("cannot open " + path);
    sink->owned_ = true;
    sink->resume_ = resume;
    return std::unique_ptr<ImportSink>(std::move(sink));
  }

  ~NdjsonSink() override {
    if (owned_ && fd_ >= 0) ::close(fd_);
  }

  std::string Describe() const override {
    return path_ == "-" ? "NDJSON on stdout" : "NDJSON file " + path_;
  }
  DigestForm digest_form() const override { return DigestForm::kDumpLines; }
  std::string VersionNote() const override {
    return "the dump carries the source's versionstamps; `kvconnect import` gives new ones";
  }

  Result<std::optional<std::string>> LastKey() override {
    if (!owned_) return std::optional<std::string>();
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Errno("cannot stat " + path_);
    const auto size = static_cast<int64_t>(st.st_size);
    KVC_ASSIGN_OR_RETURN(const int64_t end, FindNewlineBefore(size));  // -1: none
    const int64_t complete = end + 1;                                  // bytes of complete lines
    if (complete < size) {
      if (!resume_) {
        return AlreadyExists(path_ + " is not empty (it ends in a partial line)");
      }
      if (::ftruncate(fd_, complete) != 0) return Errno("cannot truncate " + path_);
      cut_ = size - complete;
    }
    if (complete == 0) return std::optional<std::string>();
    KVC_ASSIGN_OR_RETURN(const int64_t before, FindNewlineBefore(end));
    KVC_ASSIGN_OR_RETURN(std::string line, ReadAt(before + 1, end - before - 1));
    Result<Entry> entry = codec::EntryFromJson(line);
    if (!entry.ok()) {
      return InvalidArgument(path_ + " is not a dump: its last line does not parse (" +
                             entry.status().message() + ")");
    }
    return std::optional<std::string>(std::move(entry->key));
  }

  Status Write(const std::vector<Entry>& entries) override {
    std::string text;
    for (const Entry& e : entries) {
      KVC_ASSIGN_OR_RETURN(std::string line, service::DumpLine(e));
      text += line;
    }
    if (owned_ && ::lseek(fd_, 0, SEEK_END) < 0) return Errno("cannot seek in " + path_);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("writing " + path_);
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status Finish() override {
    if (owned_ && ::fsync(fd_) != 0) return Errno("cannot fsync " + path_);
    return Status::Ok();
  }

  Result<std::optional<EntryDigest>> DigestDestination() override {
    if (!owned_) return std::optional<EntryDigest>();
    EntryHasher h(DigestForm::kDumpLines);
    std::string buf(size_t{1} << 20, '\0');
    for (int64_t off = 0;;) {
      const ssize_t n = ::pread(fd_, buf.data(), buf.size(), off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("reading " + path_);
      if (n == 0) break;
      h.AddLine(std::string_view(buf.data(), static_cast<size_t>(n)));
      off += n;
    }
    KVC_ASSIGN_OR_RETURN(EntryDigest d, h.Finish());
    return std::optional<EntryDigest>(d);
  }

  int64_t cut() const { return cut_; }

 private:
  explicit NdjsonSink(std::string path) : path_(std::move(path)) {}

  Result<std::string> ReadAt(int64_t off, int64_t len) {
    std::string out(static_cast<size_t>(len), '\0');
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n =
          ::pread(fd_, out.data() + done, out.size() - done, off + static_cast<int64_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("reading " + path_);
      if (n == 0) return IoError(path_ + " changed while it was read");
      done += static_cast<size_t>(n);
    }
    return out;
  }

  // The offset of the last '\n' before `limit`, or -1.
  Result<int64_t> FindNewlineBefore(int64_t limit) {
    constexpr int64_t kChunk = 64 << 10;
    while (limit > 0) {
      const int64_t from = std::max<int64_t>(0, limit - kChunk);
      KVC_ASSIGN_OR_RETURN(const std::string chunk, ReadAt(from, limit - from));
      const size_t i = chunk.rfind('\n');
      if (i != std::string::npos) return from + static_cast<int64_t>(i);
      limit = from;
    }
    return int64_t{-1};
  }

  const std::string path_;
  int fd_ = -1;
  bool owned_ = false;
  bool resume_ = false;
  int64_t cut_ = 0;
};

// --- sqlite:DIR, postgres:CONNINFO --------------------------------------------------------------

class StorageSink : public ImportSink {
 public:
  static Result<std::unique_ptr<ImportSink>> Open(const storage::StorageOptions& so,
                                                  const std::string& db,
                                                  const std::string& source_id) {
    std::unique_ptr<StorageSink> sink(new StorageSink());
    KVC_ASSIGN_OR_RETURN(sink->storage_, storage::OpenStorage(so));
    auto claimed = sink->storage_->LockWriters();
    if (!claimed.ok()) {
      return Status(claimed.status().code(),
                    claimed.status().message() +
                        "; the destination must not be written by anyone else during an import: "
                        "stop that server first, or import through it with --to http://HOST");
    }
    sink->lock_ = std::move(*claimed);
    auto rec = sink->storage_->catalog().FindDatabase(db);
    if (!rec.ok() && rec.status().code() == StatusCode::kNotFound) {
      if (!storage::IsValidDatabaseName(db)) {
        return InvalidArgument("--db: '" + db + "' is not a valid database name");
      }
      // The source's id when it is free here, so the database answers to the same id.
      bool keep_id = storage::LooksLikeUuid(source_id);
      if (keep_id) {
        auto taken = sink->storage_->catalog().FindDatabase(source_id);
        if (taken.ok()) keep_id = false;
        if (!taken.ok() && taken.status().code() != StatusCode::kNotFound) return taken.status();
      }
      KVC_ASSIGN_OR_RETURN(
          storage::DatabaseRecord made,
          keep_id ? sink->storage_->CreateWithId(db, source_id) : sink->storage_->Create(db));
      made.name = db;
      made.created_ms = NowUnixMs();
      if (Status s = sink->storage_->catalog().AddDatabase(made); !s.ok()) {
        (void)sink->storage_->Destroy(made);
        return s;
      }
      sink->created_ = true;
      rec = made;
    }
    if (!rec.ok()) return rec.status();
    sink->record_ = *rec;
    KVC_ASSIGN_OR_RETURN(sink->backend_, sink->storage_->OpenBackend(*rec));
    KVC_ASSIGN_OR_RETURN(sink->writer_, sink->backend_->OpenWriter());
    return std::unique_ptr<ImportSink>(std::move(sink));
  }

  ~StorageSink() override {
    writer_.reset();
    backend_.reset();
  }

  std::string Describe() const override {
    return "database '" + record_.name + "' (id " + record_.id + (created_ ? ", new" : "") +
           ") of " + storage_->Describe();
  }
  std::string VersionNote() const override {
    return "entries keep the source's versionstamps (their first 8 bytes)";
  }

  Result<std::optional<std::string>> LastKey() override {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Reader> reader, backend_->OpenReader());
    std::vector<Entry> last;
    KVC_RETURN_IF_ERROR(reader
                            ->ScanAlone(ReadRange{"", storage::EndOfKeySpace(), 1, true},
                                        std::numeric_limits<int64_t>::min(), &last)
                            .status());
    if (last.empty()) return std::optional<std::string>();
    return std::optional<std::string>(std::move(last[0].key));
  }

  Status Write(const std::vector<Entry>& entries) override {
    KVC_ASSIGN_OR_RETURN(const int64_t base, writer_->Begin());
    auto fill = [&]() -> Status {
      int64_t version = base;
      for (const Entry& e : entries) {
        KVC_RETURN_IF_ERROR(writer_->Put(e.key, storage::StoredRow{e.value, e.encoding, e.version,
                                                                   /*expire_at_ms=*/-1}));
        version = std::max(version, e.version);
      }
      if (version != base) KVC_RETURN_IF_ERROR(writer_->SetDataVersion(version));
      return writer_->Commit();
    };
    Status s = fill();
    if (!s.ok()) writer_->Rollback();
    return s;
  }

  Status Finish() override { return Status::Ok(); }

  Result<std::optional<EntryDigest>> DigestDestination() override {
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Reader> reader, backend_->OpenReader());
    KVC_RETURN_IF_ERROR(reader->Begin());
    EntryHasher h(DigestForm::kEntries);
    auto run = [&]() -> Status {
      std::string from;
      const std::string end = storage::EndOfKeySpace();
      for (;;) {
        std::vector<storage::KeyedRow> rows;
        KVC_RETURN_IF_ERROR(reader->ScanRows(ReadRange{from, end, kMaxReadEntries, false}, &rows));
        for (const storage::KeyedRow& r : rows) {
          KVC_RETURN_IF_ERROR(h.Add(Entry{r.key, r.row.value, r.row.encoding, r.row.version}));
        }
        if (rows.size() < static_cast<size_t>(kMaxReadEntries)) return Status::Ok();
        from = rows.back().key;
        from.push_back('\0');
      }
    };
    Status s = run();
    reader->End();
    KVC_RETURN_IF_ERROR(s);
    KVC_ASSIGN_OR_RETURN(EntryDigest d, h.Finish());
    return std::optional<EntryDigest>(d);
  }

 private:
  StorageSink() = default;

  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<storage::WriterLock> lock_;
  storage::DatabaseRecord record_;
  std::unique_ptr<storage::Backend> backend_;
  std::unique_ptr<storage::Writer> writer_;
  bool created_ = false;
};

// --- http(s)://HOST: a running kvconnect
// ----------------------------------------------------------

class ServerSink : public ImportSink {
 public:
  static Result<std::unique_ptr<ImportSink>> Open(const SinkOptions& o) {
    if (o.token.empty()) {
      return InvalidArgument(
          "--to URL needs an admin token of that server: --to-token TOKEN, --to-token-file PATH "
          "or the environment variable KVCONNECT_ACCESS_TOKEN");
    }
    std::unique_ptr<ServerSink> sink(new ServerSink(o));
    KVC_ASSIGN_OR_RETURN(sink->admin_, AdminClient::Connect({.url = o.to,
                                                             .token = o.token,
                                                             .db = o.db,
                                                             .ca_file = o.ca_file,
                                                             .request_timeout = o.timeout}));
    // Does the database exist? Create it if not.
    Result<codec::AdminEntryListAnswer> probe =
        sink->List(R"({"limit":1,"reverse":true,"raw":true})");
    if (!probe.ok() && probe.status().code() == StatusCode::kNotFound) {
      KVC_ASSIGN_OR_RETURN(
          client::Response r,
          sink->admin_->PostAdmin("databases", "{\"name\":" + codec::JsonQuote(o.db) + "}",
                                  "application/json"));
      if (r.status != 200 && r.status != 201) {
        Status s = AdminHttpError(r.status, r.body);
        return Status(s.code(), "creating the database '" + o.db + "' at " + o.to +
                                    " failed: " + s.message());
      }
      sink->created_ = true;
      probe = sink->List(R"({"limit":1,"reverse":true,"raw":true})");
    }
    KVC_RETURN_IF_ERROR(probe.status());
    return std::unique_ptr<ImportSink>(std::move(sink));
  }

  std::string Describe() const override {
    return "database '" + o_.db + "'" + (created_ ? " (new)" : "") + " of the server " + o_.to;
  }
  std::string VersionNote() const override {
    return "the server's engine gave every entry a new versionstamp (a KV Connect write cannot "
           "choose one)";
  }

  Result<std::optional<std::string>> LastKey() override {
    KVC_ASSIGN_OR_RETURN(codec::AdminEntryListAnswer a,
                         List(R"({"limit":1,"reverse":true,"raw":true})"));
    if (a.entries.empty()) return std::optional<std::string>();
    return std::optional<std::string>(std::move(a.entries[0].key));
  }

  Status Write(const std::vector<Entry>& entries) override {
    std::string body;
    int64_t lines = 0;
    for (const Entry& e : entries) {
      KVC_ASSIGN_OR_RETURN(std::string line, codec::AdminExactImportLine(e));
      if (!body.empty() && body.size() + line.size() > o_.request_bytes) {
        KVC_RETURN_IF_ERROR(Send(std::move(body), lines));
        body.clear();
        lines = 0;
      }
      body += line;
      ++lines;
    }
    if (!body.empty()) KVC_RETURN_IF_ERROR(Send(std::move(body), lines));
    return Status::Ok();
  }

  Status Finish() override { return Status::Ok(); }

  Result<std::optional<EntryDigest>> DigestDestination() override {
    EntryHasher h(DigestForm::kEntries);
    std::string cursor;
    for (;;) {
      std::string body = "{\"limit\":" + std::to_string(kMaxReadEntries) + ",\"raw\":true";
      if (!cursor.empty()) body += ",\"cursor\":" + codec::JsonQuote(cursor);
      body += "}";
      KVC_ASSIGN_OR_RETURN(codec::AdminEntryListAnswer a, List(body));
      for (const Entry& e : a.entries) KVC_RETURN_IF_ERROR(h.Add(e));
      if (a.cursor.empty()) break;
      cursor = std::move(a.cursor);
    }
    KVC_ASSIGN_OR_RETURN(EntryDigest d, h.Finish());
    return std::optional<EntryDigest>(d);
  }

 private:
  explicit ServerSink(const SinkOptions& o) : o_(o) {}

  Result<codec::AdminEntryListAnswer> List(const std::string& body) {
    KVC_ASSIGN_OR_RETURN(client::Response r,
                         admin_->Post("entries/list", body, "application/json"));
    if (r.status != 200) return AdminHttpError(r.status, r.body);
    Result<codec::AdminEntryListAnswer> a = codec::ParseAdminEntryListAnswer(r.body);
    if (!a.ok()) return Internal("the destination's entry list: " + a.status().message());
    return a;
  }

  Status Send(std::string body, int64_t lines) {
    const std::string what = "import?mode=merge&batch=" + std::to_string(o_.import_batch) +
                             "&first_line=" + std::to_string(next_line_);
    KVC_ASSIGN_OR_RETURN(client::Response r,
                         admin_->Post(what, std::move(body), "application/x-ndjson"));
    if (r.status != 200) {
      Status s = AdminHttpError(r.status, r.body);
      return Status(s.code(), "the destination's import API: " + s.message());
    }
    auto answer = codec::ParseAdminImportAnswer(r.body);
    if (!answer.ok()) return Internal("the destination's import answer is not JSON: " + r.body);
    if (answer->stats.entries != lines) {
      return Internal("the destination imported " + std::to_string(answer->stats.entries) + " of " +
                      std::to_string(lines) + " entries sent");
    }
    next_line_ += lines;
    return Status::Ok();
  }

  const SinkOptions o_;
  std::unique_ptr<AdminClient> admin_;
  bool created_ = false;
  int64_t next_line_ = 1;
};

}  // namespace

Result<std::unique_ptr<ImportSink>> OpenSink(const SinkOptions& o) {
  if (o.to.rfind("ndjson:", 0) == 0) {
    const std::string path = o.to.substr(7);
    if (path.empty()) return InvalidArgument("--to ndjson: names no file (ndjson:- is stdout)");
    return NdjsonSink::Open(path, o.resume);
  }
  if (IsHttpUrl(o.to)) return ServerSink::Open(o);
  Result<storage::StorageOptions> so = ParseStorageSpec(o.to);
  // A storage spec with a bad location says what is wrong with it; anything else is no
  // destination at all.
  if (!so.ok() && so.status().message().find("not a storage") == std::string::npos) {
    return so.status();
  }
  if (!so.ok()) {
    return InvalidArgument("'" + o.to +
                           "' is not a destination: give sqlite:DATA_DIR, postgres:CONNINFO, "
                           "http(s)://HOST (a running kvconnect) or ndjson:FILE (ndjson:- for "
                           "stdout)");
  }
  return StorageSink::Open(*so, o.db, o.source_database_id);
}

}  // namespace kvc::cli
