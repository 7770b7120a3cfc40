#include "storage/migration.h"

#include <openssl/evp.h>

#include <memory>
#include <vector>

#include "common/random.h"

namespace kvc::storage {
namespace {

// Incremental ContentDigest of rows given in ascending key order.
class ContentHasher {
 public:
  ContentHasher() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    ok_ = ctx_ != nullptr && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }

  void Add(const KeyedRow& r) {
    AddNumber(static_cast<uint64_t>(r.key.size()));
    AddBytes(r.key);
    AddNumber(static_cast<uint64_t>(r.row.value.size()));
    AddBytes(r.row.value);
    AddNumber(static_cast<uint64_t>(r.row.encoding));
    AddNumber(static_cast<uint64_t>(r.row.version));
    AddNumber(static_cast<uint64_t>(r.row.expire_at_ms));
    ++digest_.keys;
    digest_.bytes += static_cast<int64_t>(r.key.size() + r.row.value.size());
  }

  // The digest of the rows added, as of data version `version`. Errors: Internal (OpenSSL).
  Result<ContentDigest> Finish(int64_t version) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!ok_ || EVP_DigestFinal_ex(ctx_.get(), out, &n) != 1) {
      return Internal("SHA-256 failed (OpenSSL)");
    }
    digest_.version = version;
    digest_.sha256 = HexEncode(std::string(reinterpret_cast<const char*>(out), n));
    return digest_;
  }

 private:
  void AddBytes(const std::string& b) {
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), b.data(), b.size()) == 1;
  }
  void AddNumber(uint64_t v) {
    unsigned char be[8];
    for (int i = 7; i >= 0; --i, v >>= 8) be[i] = static_cast<unsigned char>(v & 0xff);
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), be, sizeof be) == 1;
  }

  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
  bool ok_ = false;
  ContentDigest digest_;
};

// Reads every row of an open snapshot, `page_rows` at a time, handing each page to `on_page`.
Status ForEachPage(Reader& reader, int32_t page_rows,
                   const std::function<Status(std::vector<KeyedRow>&)>& on_page) {
  const std::string end = EndOfKeySpace();
  std::string from;
  std::vector<KeyedRow> page;
  while (true) {
    page.clear();
    KVC_RETURN_IF_ERROR(reader.ScanRows(ReadRange{from, end, page_rows, false}, &page));
    if (page.empty()) return Status::Ok();
    for (size_t i = 1; i < page.size(); ++i) {
      if (!(page[i - 1].key < page[i].key)) {
        return Internal("the storage returned rows out of key order");
      }
    }
    if (!from.empty() && page.front().key < from) {
      return Internal("the storage returned a row before the page asked for");
    }
    std::string next = page.back().key;
    next.push_back('\0');
    KVC_RETURN_IF_ERROR(on_page(page));
    if (page.size() < static_cast<size_t>(page_rows)) return Status::Ok();
    from = std::move(next);
  }
}

// True if `database` (of `to`) holds no row and, as far as its reader can tell, no queue
// message or dead letter.
Result<bool> IsEmpty(Storage& to, const DatabaseRecord& database) {
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, to.OpenBackend(database));
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, backend->OpenReader());
  KVC_RETURN_IF_ERROR(reader->Begin());
  auto look = [&]() -> Result<bool> {
    std::vector<KeyedRow> rows;
    KVC_RETURN_IF_ERROR(reader->ScanRows(ReadRange{"", EndOfKeySpace(), 1, false}, &rows));
    if (!rows.empty()) return false;
    auto queue = reader->QueueCounts(0);
    if (queue.ok() && queue->ready + queue->delayed + queue->leased + queue->dead > 0) {
      return false;
    }
    return true;
  };
  Result<bool> empty = look();
  reader->End();
  return empty;
}

// Runs `fill` in one transaction of `to` (Begin .. Commit; rolled back on failure); `base` gets
// the version Begin returned.
Status InTransaction(Writer& to, const std::function<Status(int64_t base)>& fill) {
  KVC_ASSIGN_OR_RETURN(const int64_t base, to.Begin());
  Status s = fill(base);
  if (s.ok()) s = to.Commit();  // rolls back itself on failure
  if (!s.ok()) to.Rollback();
  return s;
}

// Writes the queued message `m` into `q`: a running one (`running`) is leased until its
// deadline; a ready one that carries delivery state is leased and put back, which keeps it.
Status PutQueued(QueueStore& q, const QueuedMessage& m, bool running) {
  KVC_RETURN_IF_ERROR(q.AddQueueMessage(m.row));
  const QueueDeliveryState& st = m.state;
  const bool has_state = st.attempts != 0 || !st.lease.empty() || !st.last_error.empty();
  if (!running && !has_state) return Status::Ok();
  KVC_RETURN_IF_ERROR(q.QueueLease(m.row, m.row.ts, st));
  return running ? Status::Ok() : q.QueueRequeue(m.row, st);
}

// Copies the queue of the open snapshot of `from` into `to`, o.batch_rows rows a transaction,
// each setting the data version to `version`.
Status CopyQueue(Reader& from, Writer& to, const CopyOptions& o, int64_t version,
                 SnapshotRowsCopy* out) {
  if (to.queue_store() == nullptr) return Internal("the destination storage has no queue");
  QueueStore& q = *to.queue_store();
  const size_t page = static_cast<size_t>(o.batch_rows);
  for (const bool running : {false, true}) {
    QueueCursor after;
    std::vector<QueuedMessage> msgs;
    do {
      msgs.clear();
      KVC_RETURN_IF_ERROR(from.ScanQueueMessages(running, after, page, &msgs));
      if (msgs.empty()) break;
      KVC_RETURN_IF_ERROR(InTransaction(to, [&](int64_t) -> Status {
        for (const QueuedMessage& m : msgs) KVC_RETURN_IF_ERROR(PutQueued(q, m, running));
        return to.SetDataVersion(version);
      }));
      out->queue_messages += static_cast<int64_t>(msgs.size());
      after = QueueCursor{msgs.back().row.ts, msgs.back().row.id};
    } while (msgs.size() == page);
  }
  std::string after;
  std::vector<DeadLetterRow> dead;
  do {
    dead.clear();
    KVC_RETURN_IF_ERROR(from.ScanDeadLetters(after, page, &dead));
    if (dead.empty()) break;
    KVC_RETURN_IF_ERROR(InTransaction(to, [&](int64_t) -> Status {
      for (const DeadLetterRow& d : dead) KVC_RETURN_IF_ERROR(q.QueueAddDead(d));
      return to.SetDataVersion(version);
    }));
    out->dead_letters += static_cast<int64_t>(dead.size());
    after = dead.back().id;
  } while (dead.size() == page);
  return Status::Ok();
}

// Copies the rows of `source` as one snapshot has them into the empty database `dest`, whose
// data version ends up the snapshot's.
Status CopyRows(Backend& source, Backend& dest, const CopyOptions& o, DatabaseCopy* out) {
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, source.OpenReader());
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, dest.OpenWriter());
  KVC_RETURN_IF_ERROR(reader->Begin());
  auto copy = [&]() -> Status {
    if (auto queue = reader->QueueCounts(0); queue.ok()) out->queue_left = *queue;
    KVC_ASSIGN_OR_RETURN(SnapshotRowsCopy rows, CopySnapshotRows(*reader, *writer, o));
    out->copied = rows.copied;
    out->batches = rows.batches;
    return Status::Ok();
  };
  Status s = copy();
  reader->End();
  return s;
}

bool SameToken(const AccessTokenRecord& a, const AccessTokenRecord& b) {
  return a.id == b.id && a.hash == b.hash && a.database_ids == b.database_ids &&
         a.all_databases == b.all_databases && a.scope == b.scope && a.expires_ms == b.expires_ms &&
         a.revoked_ms == b.revoked_ms;
}

}  // namespace

bool SameContent(const ContentDigest& a, const ContentDigest& b) {
  return a.version == b.version && a.keys == b.keys && a.bytes == b.bytes && a.sha256 == b.sha256;
}

std::string EndOfKeySpace() { return std::string(size_t{64} << 10, '\xff'); }

Result<SnapshotRowsCopy> CopySnapshotRows(Reader& from, Writer& to, const CopyOptions& o) {
  if (o.batch_rows < 1) return InvalidArgument("the batch must hold at least one row");
  KVC_ASSIGN_OR_RETURN(const int64_t version, from.DataVersion());
  SnapshotRowsCopy out;
  ContentHasher hasher;
  int64_t rows = 0;
  int64_t bytes = 0;
  // One transaction of rows; an empty page still sets the data version.
  auto write = [&](const std::vector<KeyedRow>& page) -> Status {
    KVC_RETURN_IF_ERROR(InTransaction(to, [&](int64_t base) -> Status {
      if (out.batches == 0 && base != 0) {
        return Internal("the new database in the destination is at version " +
                        std::to_string(base) + ", not 0");
      }
      for (const KeyedRow& r : page) KVC_RETURN_IF_ERROR(to.Put(r.key, r.row));
      return to.SetDataVersion(version);
    }));
    ++out.batches;
    for (const KeyedRow& r : page) {
      hasher.Add(r);
      bytes += static_cast<int64_t>(r.key.size() + r.row.value.size());
    }
    rows += static_cast<int64_t>(page.size());
    if (o.on_progress) o.on_progress(rows, bytes);
    return Status::Ok();
  };
  KVC_RETURN_IF_ERROR(ForEachPage(from, o.batch_rows, write));
  if (out.batches == 0) KVC_RETURN_IF_ERROR(write({}));
  if (o.queue) KVC_RETURN_IF_ERROR(CopyQueue(from, to, o, version, &out));
  KVC_ASSIGN_OR_RETURN(out.copied, hasher.Finish(version));
  return out;
}

Result<ContentDigest> DigestDatabase(Backend& backend, int32_t page_rows) {
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, backend.OpenReader());
  KVC_RETURN_IF_ERROR(reader->Begin());
  auto digest = [&]() -> Result<ContentDigest> {
    KVC_ASSIGN_OR_RETURN(const int64_t version, reader->DataVersion());
    ContentHasher hasher;
    KVC_RETURN_IF_ERROR(ForEachPage(*reader, page_rows, [&](std::vector<KeyedRow>& page) {
      for (const KeyedRow& r : page) hasher.Add(r);
      return Status::Ok();
    }));
    return hasher.Finish(version);
  };
  Result<ContentDigest> out = digest();
  reader->End();
  return out;
}

Status CheckDestination(Storage& to, const DatabaseRecord& source) {
  const std::string where = " in the destination (" + to.Describe() + ")";
  auto by_id = to.catalog().FindDatabase(source.id);
  if (by_id.ok() && by_id->name != source.name) {
    return AlreadyExists("database id " + source.id + " is taken" + where + " by the database '" +
                         by_id->name + "'; rename it there or migrate into another destination");
  }
  if (!by_id.ok() && by_id.status().code() != StatusCode::kNotFound) return by_id.status();
  auto by_name = to.catalog().FindDatabase(source.name);
  if (!by_name.ok()) {
    return by_name.status().code() == StatusCode::kNotFound ? Status::Ok() : by_name.status();
  }
  KVC_ASSIGN_OR_RETURN(const bool empty, IsEmpty(to, *by_name));
  if (empty) return Status::Ok();
  std::string what = "a database named '" + source.name + "' (id " + by_name->id + ") with data" +
                     where + "; the migration copies only into a new or empty database: ";
  what += source.name == kDefaultDatabase
              ? "use a destination without data in 'default'"
              : "delete it there first (kvconnect db delete) or migrate into another destination";
  return AlreadyExists("there is already " + what);
}

Result<DatabaseCopy> CopyDatabase(Storage& from, const DatabaseRecord& source, Storage& to,
                                  const CopyOptions& o) {
  if (o.batch_rows < 1) return InvalidArgument("the batch must hold at least one row");
  KVC_RETURN_IF_ERROR(CheckDestination(to, source));
  DatabaseCopy out;
  if (auto existing = to.catalog().FindDatabase(source.name); existing.ok()) {
    out.replaced = *existing;
  } else if (existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }
  KVC_ASSIGN_OR_RETURN(out.record, to.CreateWithId(source.name, source.id));
  out.record.created_ms = source.created_ms;
  auto fill = [&]() -> Status {
    {
      KVC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> src, from.OpenBackend(source));
      KVC_ASSIGN_OR_RETURN(std::unique_ptr<Backend> dst, to.OpenBackend(out.record));
      if (dst->database_id() != source.id) {
        return Internal("the destination made database " + dst->database_id() + ", not " +
                        source.id);
      }
      KVC_RETURN_IF_ERROR(CopyRows(*src, *dst, o, &out));
    }
    return out.replaced ? to.catalog().RebindDatabase(source.name, source.id, out.record.location)
                        : to.catalog().AddDatabase(out.record);
  };
  Status s = fill();
  if (!s.ok()) {
    (void)to.Destroy(out.record);
    return s;
  }
  if (out.replaced) (void)to.Destroy(*out.replaced);
  return out;
}

namespace {
// The tokens of `catalog` that open the database `database_id`. Errors: the catalog's.
Result<std::vector<AccessTokenRecord>> TokensOpening(Catalog& catalog,
                                                     const std::string& database_id) {
  KVC_ASSIGN_OR_RETURN(std::vector<AccessTokenRecord> tokens, catalog.ListTokens());
  std::erase_if(tokens,
                [&](const AccessTokenRecord& t) { return !TokenOpensDatabase(t, database_id); });
  return tokens;
}
}  // namespace

Result<TokenCopy> CopyTokens(Catalog& from, Catalog& to, const std::string& database_id) {
  KVC_ASSIGN_OR_RETURN(std::vector<AccessTokenRecord> tokens, TokensOpening(from, database_id));
  TokenCopy out;
  for (const AccessTokenRecord& t : tokens) {
    auto there = to.FindToken(t.id);
    if (there.ok()) {
      if (there->hash != t.hash || there->all_databases != t.all_databases ||
          !TokenOpensDatabase(*there, database_id)) {
        return AlreadyExists("the destination holds another access token with id " + t.id);
      }
      ++out.present;
      continue;
    }
    if (there.status().code() != StatusCode::kNotFound) return there.status();
    KVC_RETURN_IF_ERROR(to.AddToken(t));
    ++out.copied;
    if (t.all_databases) ++out.all_databases;
  }
  return out;
}

Result<TokenComparison> CompareTokens(Catalog& from, Catalog& to, const std::string& database_id) {
  KVC_ASSIGN_OR_RETURN(std::vector<AccessTokenRecord> tokens, TokensOpening(from, database_id));
  TokenComparison out;
  for (const AccessTokenRecord& t : tokens) {
    ++out.source;
    auto there = to.FindToken(t.id);
    if (there.ok() && SameToken(*there, t)) {
      ++out.matching;
    } else if (there.ok() || there.status().code() == StatusCode::kNotFound) {
      out.differing.push_back(t.id);
    } else {
      return there.status();
    }
  }
  return out;
}

Result<SecretCopy> CopySecret(Storage& from, Storage& to, const std::string& name) {
  KVC_ASSIGN_OR_RETURN(std::optional<std::string> secret, from.ReadSecret(name));
  if (!secret) return SecretCopy::kAbsent;
  bool created = false;
  KVC_ASSIGN_OR_RETURN(std::string kept, to.LoadOrCreateSecret(
                                             name, [&secret] { return *secret; }, &created));
  if (created) return SecretCopy::kCopied;
  return kept == *secret ? SecretCopy::kSame : SecretCopy::kDiffers;
}

}  // namespace kvc::storage
