#include "backup/operations.h"

#include "common/clock.h"
#include "common/random.h"

namespace kvc::backup {

Result<SnapshotOutcome> SnapshotDatabase(storage::Storage& storage,
                                         const storage::DatabaseRecord& database, Target& target) {
  KVC_ASSIGN_OR_RETURN(std::string scratch, storage.ScratchDirectory());
  KVC_ASSIGN_OR_RETURN(auto backend, storage.OpenBackend(database));
  KVC_ASSIGN_OR_RETURN(auto reader, backend->OpenReader());
  const SnapshotCopier copy = [&](const std::string& dest) {
    return WriteSnapshotFile(*reader, dest, SnapshotWriteOptions{});
  };
  return UploadSnapshot(copy, target, database.name, database.id, scratch);
}

Result<CatalogRestore> RestoreIntoCatalog(storage::Storage& storage, Target& target,
                                          const std::string& source, const std::string& as,
                                          const RestorePoint& at) {
  const std::string name = as.empty() ? source : as;
  if (!storage::IsValidDatabaseName(name)) {
    return InvalidArgument("'" + name + "' is not a valid database name");
  }
  CatalogRestore out;
  RestoreOptions o;
  o.source = source;
  o.at = at;
  o.name = name;
  auto existing = storage.catalog().FindDatabase(name);
  bool empty_before = false;
  if (existing.ok()) {
    o.id = existing->id;
    int64_t old_version = 0;
    {
      KVC_ASSIGN_OR_RETURN(auto old_backend, storage.OpenBackend(*existing));
      KVC_ASSIGN_OR_RETURN(old_version, old_backend->LoadDataVersion());
    }
    // A database that never had a commit (e.g. "default" of a fresh data directory) is simply
    // replaced; one with data keeps its file and jumps the version.
    empty_before = old_version == 0;
    out.replaced = !empty_before;
    if (out.replaced) {
      out.previous_location = storage.Location(*existing);
      o.floor_version = old_version + kRestoreVersionJump;
    }
  } else if (existing.status().code() == StatusCode::kNotFound) {
    o.id = NewUuidV4();
  } else {
    return existing.status();
  }
  Result<RestoreOutcome> restored = RestoreDatabase(target, storage, o);
  if (!restored.ok() && restored.status().code() == StatusCode::kAlreadyExists && existing.ok()) {
    // A storage that keys a database's rows by its id (PostgreSQL) cannot hold the restored
    // copy beside the database it replaces. An empty one is replaced by a database of a new id;
    // one with data is kept, and the restore refused.
    if (!empty_before) {
      return InvalidArgument(
          "cannot restore '" + name + "' in place in " + storage.Describe() +
          ": this storage cannot keep the restored copy beside it under the same database "
          "id; restore under another name with --as NAME");
    }
    o.id = NewUuidV4();
    restored = RestoreDatabase(target, storage, o);
  }
  KVC_RETURN_IF_ERROR(restored.status());
  out.outcome = std::move(*restored);
  storage::DatabaseRecord& rec = out.outcome.record;
  Status s = existing.ok() ? storage.catalog().RebindDatabase(name, rec.id, rec.location)
                           : storage.catalog().AddDatabase(rec);
  if (!s.ok()) {
    (void)storage.Destroy(rec);
    return s;
  }
  if (empty_before) (void)storage.Destroy(*existing);
  return out;
}

}  // namespace kvc::backup
