// Moving databases between two storages (storage.h), of the same kind or not (`kvconnect
// migrate`, e.g. SQLite -> PostgreSQL): a database's rows copied from one snapshot of the source
// into new storage in the destination that keeps the database's id, name and data version (so
// versionstamps stay valid); its access tokens; named secrets; and a digest of a database's
// contents as of one snapshot, to compare the two sides.
//
// Only the Storage, Catalog, Backend, Reader and Writer interfaces are used. The source is only
// read, with readers (no writer claim: a server may serve it meanwhile); the caller holds the
// destination's writer claim (Storage::LockWriters) while it writes there.
//
// Not copied by CopyDatabase: queue messages and dead letters (it counts them when the source's
// reader can; CopySnapshotRows copies them on request, for backup snapshots), and the change log of
// continuous backup (the destination's backups start over with a snapshot).
//
// Thread-safety: free functions; a call uses the backends it opens from the calling thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/storage.h"

namespace kvc::storage {

// A database's contents as of one snapshot.
struct ContentDigest {
  int64_t version = 0;  // the snapshot's committed data version
  int64_t keys = 0;     // rows, expired ones included
  int64_t bytes = 0;    // key and value bytes of those rows
  // Hex SHA-256 over every row in ascending key order: for each, the key and the value, each
  // preceded by its length, then the encoding, the version and the expiry (-1: none), every
  // number as 8 bytes big-endian (two's complement). Do not change: operators compare digests
  // printed by different runs.
  std::string sha256;
};

// True if `a` and `b` have the same version, counts and hash.
bool SameContent(const ContentDigest& a, const ContentDigest& b);

// Every key: keys are far shorter than this bound (a few KiB at most).
std::string EndOfKeySpace();

// Digests the rows of a database as of one snapshot, reading `page_rows` (>= 1) at a time.
// Errors: the backend's.
Result<ContentDigest> DigestDatabase(Backend& backend, int32_t page_rows);

// Why `source` cannot be copied into `to` as a new database, or OK. It can be when `to` has no
// database with its name or id, or has one of its name (its id or another) without any row
// and without queue messages, which the copy replaces. Errors: AlreadyExists (with what `to`
// holds and what to do), catalog and backend errors.
Status CheckDestination(Storage& to, const DatabaseRecord& source);

struct CopyOptions {
  int32_t batch_rows = 1000;  // rows per destination transaction (>= 1)
  // Called after every committed batch with the rows and bytes copied so far.
  std::function<void(int64_t rows, int64_t bytes)> on_progress;
  // Also copy the queue: messages (ready and running, with their delivery state) and dead
  // letters. Backup snapshots do; `kvconnect migrate` leaves the queue behind (and says so).
  bool queue = false;
};

// What CopySnapshotRows copied.
struct SnapshotRowsCopy {
  ContentDigest copied;  // the rows read from the snapshot, and written (version: the snapshot's)
  int64_t batches = 0;   // destination transactions of rows
  int64_t queue_messages = 0;  // ready and running messages (CopyOptions::queue)
  int64_t dead_letters = 0;    // (CopyOptions::queue)
};

// Copies what the open snapshot of `from` holds into the database `to` writes, which must be
// new (data version 0): every row (expired ones too, ScanRows) in transactions of o.batch_rows
// rows that each set the data version to the snapshot's (an empty snapshot: one transaction that
// only sets it); with o.queue, then the queue's messages and dead letters, o.batch_rows per
// transaction, through to's QueueStore. Memory is bounded by one page. Readers of `from`'s
// storage never hold its writers up, so the source keeps taking writes meanwhile.
// REQUIRES: from.Begin() succeeded (the caller calls End); o.batch_rows >= 1.
// Errors: Internal (`to` is not at version 0; a storage out of key order; o.queue and a side
// without a queue), the backends' errors. A failed copy leaves `to` partly written.
Result<SnapshotRowsCopy> CopySnapshotRows(Reader& from, Writer& to, const CopyOptions& o);

struct DatabaseCopy {
  DatabaseRecord record;  // the copy as now registered in the destination
  ContentDigest copied;   // what was read from the source's snapshot, and written
  // The queue the source held in that snapshot and the copy leaves behind, when the source's
  // reader can count it.
  std::optional<QueueTableCounts> queue_left;
  // The destination's empty database of that name that the copy replaced, if any.
  std::optional<DatabaseRecord> replaced;
  int64_t batches = 0;
};

// Copies the database `source` (a record of `from`'s catalog) into `to`: checks the destination
// (CheckDestination), makes new storage there carrying source's id (Storage::CreateWithId),
// copies every row (expired ones too) as one snapshot of the source has it, in transactions of
// o.batch_rows rows that each set the data version to the snapshot's, and only then registers
// the database in `to`'s catalog (adding it, or rebinding the empty one of its name, whose
// storage is then destroyed). On failure nothing is registered and the new storage is
// destroyed. Access tokens are not copied (CopyTokens). REQUIRES: the caller holds `to`'s writer
// claim. Errors: as CheckDestination; the storages' errors.
Result<DatabaseCopy> CopyDatabase(Storage& from, const DatabaseRecord& source, Storage& to,
                                  const CopyOptions& o);

struct TokenCopy {
  int64_t copied = 0;   // added to the destination
  int64_t present = 0;  // the destination had them already (same id and hash, opening it)
  // Of `copied`, tokens for all databases: they open every database of the destination too.
  int64_t all_databases = 0;
};

// Adds to `to` every access token of `from` that opens the database `database_id`, with the same
// id, hash, databases, scope, expiry and revocation (revoked tokens stay revoked). A token of
// several databases is copied whole, its list as it is: database ids stay the same across a
// migration, so it opens in `to` those of its databases that are (or later get) migrated there;
// a token for all databases opens every database of `to`. Errors: AlreadyExists (`to` holds a
// different token under one of the ids), the catalogs' errors.
Result<TokenCopy> CopyTokens(Catalog& from, Catalog& to, const std::string& database_id);

struct TokenComparison {
  int64_t source = 0;                  // tokens of the database in the source
  int64_t matching = 0;                // ...that the destination holds identically
  std::vector<std::string> differing;  // ids of the others (absent, or not the same)
};

// Compares the access tokens that open `database_id` in `from` with those `to` holds.
Result<TokenComparison> CompareTokens(Catalog& from, Catalog& to, const std::string& database_id);

enum class SecretCopy {
  kAbsent,   // the source has no such secret
  kCopied,   // the destination had none; it has the source's now
  kSame,     // both had the same
  kDiffers,  // the destination has another one, which is kept
};

// Gives `to` the secret `name` of `from` unless `to` has one already (a secret is never
// overwritten). Errors: the storages' errors.
Result<SecretCopy> CopySecret(Storage& from, Storage& to, const std::string& name);

}  // namespace kvc::storage
