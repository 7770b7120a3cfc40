#include "storage/storage.h"

#include <algorithm>
#include <span>

#include "storage/postgres/pg_spec.h"
#include "storage/postgres/pg_storage.h"
#include "storage/sqlite/sqlite_storage.h"
#include "storage/storage_spec.h"

namespace kvc::storage {
namespace {

// How a spec of a kind begins: `text`, then `placeholder` in help texts. When `whole`, the
// prefix belongs to the location (a postgresql:// URI is its own conninfo).
struct Prefix {
  const char* text;
  const char* placeholder;
  bool whole;
};

// One kind of storage: its name (StorageOptions::kind), the prefixes of its specs (tried in
// order, longest first within a kind), how the rest of a spec becomes options, how it opens, and
// what must hold before it opens.
struct Kind {
  const char* name;
  std::span<const Prefix> prefixes;
  Status (*parse)(std::string location, StorageOptions* options);
  Result<std::unique_ptr<Storage>> (*open)(const StorageOptions& options);
  Status (*validate)(const StorageOptions& options);
};

// Opens the storage class S (S::Open) as a Storage.
template <typename S>
Result<std::unique_ptr<Storage>> OpenAs(const StorageOptions& options) {
  KVC_ASSIGN_OR_RETURN(auto storage, S::Open(options));
  return std::unique_ptr<Storage>(std::move(storage));
}

// --- sqlite ------------------------------------------------------------------------------------

constexpr Prefix kSqlitePrefixes[] = {{"sqlite:", "DIR", false}};

Status ParseSqlite(std::string location, StorageOptions* o) {
  if (location.empty()) return InvalidArgument("sqlite: names no data directory (sqlite:DIR)");
  o->location = std::move(location);
  return Status::Ok();
}

Status ValidateSqlite(const StorageOptions& o) {
  if (o.location.empty()) return InvalidArgument("the SQLite data directory is empty");
  if (o.location.find('\0') != std::string::npos) {
    return InvalidArgument("the SQLite data directory holds a NUL byte");
  }
  if (o.default_database_file.find('\0') != std::string::npos) {
    return InvalidArgument("the default database file (--sqlite-path) holds a NUL byte");
  }
  if (!o.read_location.empty()) {
    return InvalidArgument(
        "a standby to read from (--postgres-read) is for PostgreSQL storage (--storage "
        "postgres:CONNINFO or --postgres), not SQLite");
  }
  return Status::Ok();
}

// --- postgres ----------------------------------------------------------------------------------

constexpr Prefix kPostgresPrefixes[] = {
    {"postgres://", "...", true}, {"postgresql://", "...", true}, {"postgres:", "CONNINFO", false}};

Status ParsePostgres(std::string location, StorageOptions* o) {
  if (location.empty()) return InvalidArgument("postgres: names no conninfo (postgres:CONNINFO)");
  o->location = std::move(location);
  return Status::Ok();
}

Status ValidatePostgres(const StorageOptions& o) {
  KVC_RETURN_IF_ERROR(CheckConninfo(o.location, "the PostgreSQL conninfo"));
  if (!o.read_location.empty()) {
    KVC_RETURN_IF_ERROR(CheckConninfo(o.read_location, "the standby's conninfo (--postgres-read)"));
  }
  if (!o.default_database_file.empty()) {
    return InvalidArgument(
        "--sqlite-path is for SQLite storage; PostgreSQL keeps every database in its own "
        "tables (move a SQLite file there with `kvconnect migrate`)");
  }
  return Status::Ok();
}

// Every kind of storage: a new one is a row here.
constexpr Kind kKinds[] = {
    {"sqlite", kSqlitePrefixes, &ParseSqlite, &OpenAs<SqliteStorage>, &ValidateSqlite},
    {"postgres", kPostgresPrefixes, &ParsePostgres, &OpenAs<PgStorage>, &ValidatePostgres},
};

const Kind* FindKind(std::string_view name) {
  for (const Kind& k : kKinds) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

Status UnknownKind(std::string_view name) {
  return InvalidArgument("unknown storage kind '" + std::string(name) +
                         "' (known: " + StorageKinds() + ")");
}

}  // namespace

std::string StorageKinds() {
  std::string out;
  for (const Kind& k : kKinds) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

std::string StorageSpecForms() {
  std::string out;
  for (const Kind& k : kKinds) {
    for (const Prefix& p : k.prefixes) {
      if (!out.empty()) out += ", ";
      out += std::string(p.text) + p.placeholder;
    }
  }
  return out;
}

Result<StorageOptions> ParseStorageSpec(std::string_view spec, StorageOptions base) {
  for (const Kind& k : kKinds) {
    for (const Prefix& p : k.prefixes) {
      if (!spec.starts_with(p.text)) continue;
      base.kind = k.name;
      const size_t skip = p.whole ? 0 : std::string_view(p.text).size();
      KVC_RETURN_IF_ERROR(k.parse(std::string(spec.substr(skip)), &base));
      KVC_RETURN_IF_ERROR(k.validate(base));
      return base;
    }
  }
  // Only a word that could name a kind is repeated: the rest may hold a password.
  const size_t colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const bool word = colon != std::string_view::npos && !kind.empty() && kind.size() <= 24 &&
                    std::all_of(kind.begin(), kind.end(), [](char c) {
                      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '-' || c == '_';
                    });
  return InvalidArgument((word ? "'" + std::string(kind) + ":...' is not a storage"
                               : std::string("that is not a storage spec")) +
                         ": give " + StorageSpecForms());
}

Status ValidateStorageOptions(const StorageOptions& options) {
  const Kind* k = FindKind(options.kind);
  return k == nullptr ? UnknownKind(options.kind) : k->validate(options);
}

Result<std::unique_ptr<Storage>> OpenStorage(const StorageOptions& options) {
  const Kind* k = FindKind(options.kind);
  if (k == nullptr) return UnknownKind(options.kind);
  KVC_RETURN_IF_ERROR(k->validate(options));
  return k->open(options);
}

}  // namespace kvc::storage
