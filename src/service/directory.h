// Directory: the server's view of the catalog. It keeps an immutable snapshot of databases
// (each with its running Engine) and access tokens, rereads the catalog when it changes (polled
// every `poll_ms`, so `kvconnect db ...` and `kvconnect token revoke` take effect within about
// that long), opens engines for new databases and retires those of removed ones.
//
// The hot path only copies a shared_ptr to the current snapshot: no catalog or SQLite access.
// Catalog and SQLite work happens on the directory's own thread, never on the caller's.
//
// Ownership: does not own the catalog (it must outlive the directory); owns the engines.
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/worker_thread.h"
#include "engine/engine.h"
#include "storage/backend.h"
#include "storage/catalog.h"

namespace kvc::service {

struct DirectoryOptions {
  int64_t poll_ms = 1000;
  engine::EngineOptions engine;
};

class Directory {
 public:
  struct Database {
    storage::DatabaseRecord record;
    std::shared_ptr<engine::Engine> engine;
  };
  struct Snapshot {
    int64_t generation = -1;
    std::unordered_map<std::string, Database> by_id;
    std::unordered_map<std::string, std::string> id_by_name;
    std::unordered_map<std::string, storage::AccessTokenRecord> tokens;  // by token id
    // Databases in the catalog that could not be opened (names), for readiness.
    std::vector<std::string> unavailable;

    // By name or id; nullptr if absent.
    const Database* Find(const std::string& name_or_id) const;
    const storage::AccessTokenRecord* Token(const std::string& id) const;
  };
  using BackendFactory =
      std::function<Result<std::unique_ptr<storage::Backend>>(const storage::DatabaseRecord&)>;
  // Called on the directory's thread (or in Start) for every engine it opens, before the
  // engine is served: where listeners (metrics, backups) attach. Must not block for long.
  using EngineHook =
      std::function<void(const storage::DatabaseRecord&, const std::shared_ptr<engine::Engine>&)>;

  Directory(storage::Catalog* catalog, BackendFactory factory, DirectoryOptions options);
  // REQUIRES: before Start().
  void AddEngineHook(EngineHook hook) { hooks_.push_back(std::move(hook)); }
  ~Directory();

  // Loads the catalog, opens every database and starts polling. Errors: whatever opening a
  // database or reading the catalog returned.
  Status Start();
  // Stops polling and shuts every engine down. Idempotent.
  void Stop();

  std::shared_ptr<const Snapshot> snapshot() const;
  // Rereads the catalog on the directory thread (at once, not at the next poll), then calls
  // `done` there with the new snapshot. `done` must not block.
  void RefreshThen(std::function<void(std::shared_ptr<const Snapshot>)> done);

 private:
  void Loop();
  // Directory thread (or Start) only.
  Status Reload(bool force) KVC_EXCLUDES(mu_, snap_mu_);
  void ReapRetired();

  storage::Catalog* const catalog_;
  const BackendFactory factory_;
  std::vector<EngineHook> hooks_;
  const DirectoryOptions options_;

  mutable Mutex snap_mu_;
  std::shared_ptr<const Snapshot> snap_ KVC_GUARDED_BY(snap_mu_);

  Mutex mu_;
  CondVar cv_;
  std::vector<std::function<void(std::shared_ptr<const Snapshot>)>> waiting_ KVC_GUARDED_BY(mu_);
  WorkerThread worker_;

  // Engines of removed databases, shut down once nobody else holds them (directory thread).
  std::vector<std::shared_ptr<engine::Engine>> retired_;
  int64_t failed_reloads_ = 0;
};

}  // namespace kvc::service
