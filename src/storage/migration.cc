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
    if (queue.ok() && queue->ready + queue->delayed + queue->running + queue->dead > 0) {
      return false;
    }
    return true;
  };
  Result<bool> empty = look();
  reader->End();
  return empty;
}

// Copies the rows of `source` as one snapshot has them into the empty database `dest`, whose
// data version ends up the snapshot's.
Status CopyRows(Backend& source, Backend& dest, const CopyOptions& o, DatabaseCopy* out) {
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, source.OpenReader());
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<Writer> writer, dest.OpenWriter());
  KVC_RETURN_IF_ERROR(reader->Begin());
  auto copy = [&]() -> Status {
    KVC_ASSIGN_OR_RETURN(const int64_t version, reader->DataVersion());
    if (auto queue = reader->QueueCounts(0); queue.ok()) out->queue_left = *queue;
    ContentHasher hasher;
    // One transaction of rows; an empty page still sets the data version.
    auto write = [&](const std::vector<KeyedRow>& rows) -> Status {
      KVC_ASSIGN_OR_RETURN(const int64_t base, writer->Begin());
      auto fill = [&]() -> Status {
        if (out->batches == 0 && base != 0) {
          return Internal("the new database in the destination is at version " +
                          std::to_string(base) + ", not 0");
        }
        for (const KeyedRow& r : rows) KVC_RETURN_IF_ERROR(writer->Put(r.key, r.row));
        KVC_RETURN_IF_ERROR(writer->SetDataVersion(version));
        return writer->Commit();
      };
      Status s = fill();
      if (!s.ok()) {
        writer->Rollback();
        return s;
      }
      for (const KeyedRow& r : rows) hasher.Add(r);
      ++out->batches;
      return Status::Ok();
    };
    int64_t rows = 0;
    int64_t bytes = 0;
    KVC_RETURN_IF_ERROR(
        ForEachPage(*reader, o.batch_rows, [&](std::vector<KeyedRow>& page) -> Status {
          KVC_RETURN_IF_ERROR(write(page));
          rows += static_cast<int64_t>(page.size());
          for (const KeyedRow& r : page) {
            bytes += static_cast<int64_t>(r.key.size() + r.row.value.size());
          }
          if (o.on_progress) o.on_progress(rows, bytes);
          return Status::Ok();
        }));
    if (out->batches == 0) KVC_RETURN_IF_ERROR(write({}));
    KVC_ASSIGN_OR_RETURN(out->copied, hasher.Finish(version));
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
