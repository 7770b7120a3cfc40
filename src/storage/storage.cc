#include "storage/storage.h"

#include "storage/postgres/pg_storage.h"
#include "storage/sqlite/sqlite_storage.h"

namespace kvc::storage {
namespace {

using Opener = Result<std::unique_ptr<Storage>> (*)(const StorageOptions&);

struct Kind {
  const char* name;
  Opener open;
};

Result<std::unique_ptr<Storage>> OpenSqlite(const StorageOptions& options) {
  KVC_ASSIGN_OR_RETURN(auto storage, SqliteStorage::Open(options));
  return std::unique_ptr<Storage>(std::move(storage));
}

Result<std::unique_ptr<Storage>> OpenPostgres(const StorageOptions& options) {
  KVC_ASSIGN_OR_RETURN(auto storage, PgStorage::Open(options));
  return std::unique_ptr<Storage>(std::move(storage));
}

// Every kind of storage: a new one is a line here.
constexpr Kind kKinds[] = {
    {"sqlite", &OpenSqlite},
    {"postgres", &OpenPostgres},
};

}  // namespace

std::string StorageKinds() {
  std::string out;
  for (const Kind& k : kKinds) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

Result<std::unique_ptr<Storage>> OpenStorage(const StorageOptions& options) {
  for (const Kind& k : kKinds) {
    if (options.kind == k.name) return k.open(options);
  }
  return InvalidArgument("unknown storage kind '" + options.kind + "' (known: " + StorageKinds() +
                         ")");
}

}  // namespace kvc::storage
