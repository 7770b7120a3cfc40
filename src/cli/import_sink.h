// Where `kvconnect migrate --from URL` writes what it reads from a KV Connect server, and how a
// destination is read back to check the copy:
//
//   sqlite:DIR, postgres:CONNINFO  a database (--db, created if missing) of that storage,
//       written under the storage's writer claim (no server may run on it), one transaction per
//       page, each row with the source's version (so versionstamps stay those of the source) and
//       no expiry; the data version follows the largest version written.
//   http(s)://HOST[:PORT]  a running kvconnect, through its admin API (import with an admin
//       token), so its engine writes: versionstamps are new, watchers and caches stay right.
//       Values go in the {"type": "v8"} raw form, so their bytes are kept.
//   ndjson:FILE, ndjson:-  a dump in exactly the export format (service::DumpLine), so `kvconnect
//       import` reads it back; one write(2) per page.
//
// Resuming (`--resume`): entries arrive in ascending key order and every write is whole (a
// transaction, an import batch, a page of complete lines), so the largest key a destination
// holds (LastKey) is where a new run continues; a file's partial last line is cut off first.
//
// Digests (EntryDigest): for storages and servers, SHA-256 over every entry in key order of its
// key, encoding and value bytes, each preceded by its length (8 bytes big-endian); for a dump,
// SHA-256 of its lines. DigestDestination reads the destination itself, not what was sent.
//
// Ownership: a sink owns its storage, lock, connection or file. Thread-safety: one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/kv_types.h"

namespace kvc::cli {

enum class DigestForm { kEntries, kDumpLines };

struct EntryDigest {
  int64_t entries = 0;
  int64_t bytes = 0;  // key and value bytes (kEntries) or line bytes (kDumpLines)
  std::string sha256;
};

// Digests entries in the given form. Thread-safety: one owner.
class EntryHasher {
 public:
  explicit EntryHasher(DigestForm form);
  ~EntryHasher();
  EntryHasher(const EntryHasher&) = delete;
  EntryHasher& operator=(const EntryHasher&) = delete;

  // Adds an entry (kDumpLines: its DumpLine). Errors: DumpLine's.
  Status Add(const Entry& entry);
  // Adds a dump line, "\n" included (kDumpLines).
  void AddLine(std::string_view line);
  // The digest. Errors: Internal (OpenSSL).
  Result<EntryDigest> Finish();

 private:
  void Update(std::string_view bytes);
  void UpdateNumber(uint64_t n);

  const DigestForm form_;
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  EntryDigest digest_;
};

struct SinkOptions {
  std::string to;              // the --to spec
  std::string db = "default";  // storages and servers: the database (name), created if missing
  std::string token;           // servers: an admin token
  std::string ca_file;         // https servers
  size_t request_bytes = size_t{1} << 20;  // servers: dump bytes per import request at most
  int32_t import_batch = 500;              // servers: entries per atomic write
  std::chrono::milliseconds timeout{600000};
  bool resume = false;
  // storages: the source database's id (the metadata exchange's databaseId). A database the
  // import creates carries it when it is a UUID not in use there, so URLs that name the database
  // by id (Deploy's /v2/databases/<id>/connect) keep working with only the host changed.
  std::string source_database_id;
};

class ImportSink {
 public:
  virtual ~ImportSink() = default;
  // The destination, for messages.
  virtual std::string Describe() const = 0;
  virtual DigestForm digest_form() const { return DigestForm::kEntries; }
  // What the destination does with versionstamps, for the summary.
  virtual std::string VersionNote() const = 0;
  // The largest key the destination's database holds, or nullopt if it holds none. A dump
  // file's partial last line is cut off first (with `resume` only). Errors: the destination's;
  // InvalidArgument for a file that is not a dump.
  virtual Result<std::optional<std::string>> LastKey() = 0;
  // Writes `entries` (ascending, after LastKey) so that they survive a crash of this process
  // once it returns. Errors: the destination's; what was written before stays.
  virtual Status Write(const std::vector<Entry>& entries) = 0;
  // Flushes and closes what needs it (a file is fsynced).
  virtual Status Finish() = 0;
  // Reads the destination back; nullopt for stdout, which cannot be. Errors: the destination's.
  virtual Result<std::optional<EntryDigest>> DigestDestination() = 0;
};

// Opens the destination `o.to`. Errors: InvalidArgument (a spec that is none of the forms
// above, --resume on stdout, a bad database name), Unavailable (a server holds the storage, or
// cannot be reached), the destination's errors.
Result<std::unique_ptr<ImportSink>> OpenSink(const SinkOptions& o);

}  // namespace kvc::cli
