// AdminApi: the admin JSON API under /admin/v1 (schemas/admin-api.schema.json; README "Admin
// API"). Every request carries an admin-scope access token (`Authorization: Bearer`):
// - the server's bootstrap token may do everything;
// - a catalog token with scope admin is bound to its database: it may list, read, write and
//   watch that database's entries and see that database, nothing else.
// Database and token management are the operations of service::AdminOps (the same as the CLI),
// run on the API's own worker thread because they touch the catalog. Entry reads and writes go
// through the database's engine, so versionstamps, checks, limits and watchers behave exactly
// as for KV Connect writes. Errors are {"error": text, "code": name} with the status of the one
// status table; nothing is applied when a request is refused.
// Export streams NDJSON from one snapshot (export_stream.h); import applies an NDJSON body in
// atomic batches through the engine (dump.h), parsing on the worker between batches.
// On-demand backups go only where the operator allowed (backup::BackupDestinations): a token
// bound to a database to the default destination, the bootstrap token to any allowed one; one
// per database per AdminApiOptions::backup_min_interval_ms.
//
// Routes: every endpoint is one JsonApi::Add in AddServerRoutes / AddEntryRoutes (admin_api.cc)
// or AddQueueAdminRoutes (queue_api.cc), with its own metrics route name ("admin_entries_get");
// paths under /admin/v1 that none takes count as "admin". Handlers run on the API's worker thread
// once the token is known (json_api.h), so bodies are parsed and validated there, never on an
// I/O thread. A new endpoint is a handler in admin_api.cc plus its Add line (and a body parser
// in codec/admin_json.{h,cc} if it takes a new body): at most three files.
//
// Ownership: borrows the directory, authenticator, admin operations and metrics; they must
// outlive it. Streams it starts (watch) hold their engine.
// Thread-safety: Handle() from any thread. Callbacks complete on engine threads or the worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "backup/destinations.h"
#include "common/mutex.h"
#include "service/admin/admin_ops.h"
#include "service/admin/export_stream.h"
#include "service/admin/key_children.h"
#include "service/authenticator.h"
#include "service/directory.h"
#include "service/http_types.h"
#include "service/json_api.h"
#include "service/router.h"
#include "service/work_pool.h"

namespace kvc::service {

class Metrics;

struct AdminApiOptions {
  // Catalog operations waiting for the worker beyond this are refused with 503.
  size_t max_queued_operations = 64;
  // V8 format version of values written from JSON (15: every Deno and Node reads it).
  uint32_t v8_write_format = 15;
  // SSE comment sent on idle watch streams so proxies keep them open.
  int64_t watch_keepalive_ms = 15000;
  // POST .../export: paging and pacing of the stream.
  ExportOptions export_options;
  // POST .../import: entries and key + value bytes per atomic write (the engine's limits cap
  // both), and deletions per write when replacing.
  size_t import_batch_entries = 500;
  size_t import_batch_bytes = size_t{1} << 19;
  int32_t import_delete_batch = 500;
  // POST .../backup: at most one on-demand backup of a database per this many milliseconds
  // (whoever asks); a sooner one gets 503 with Retry-After. 0: unbounded.
  int64_t backup_min_interval_ms = 60000;
  // POST .../entries/children: where counts stop and how many rows one request reads.
  KeyChildrenOptions children;
};

// The JSON of a token as the admin API and `token list --json` show it (never the secret).
std::string TokenJson(const TokenInfo& info);

class AdminApi : public Handler {
 public:
  // The path prefix of every endpoint.
  static constexpr const char* kPrefix = "/admin/v1";
  // The pattern of one database's resources (`{db}`: its name or id).
  static constexpr const char* kDatabasePattern = "/admin/v1/databases/{db}";

  AdminApi(AdminApiOptions options, Directory* directory, Authenticator* auth, AdminOps* ops,
           const Metrics* metrics);
  ~AdminApi() override;  // finishes queued operations, stops the worker

  // Answers through the API's own routes (as AddRoutes registers them).
  void Handle(HttpRequest request, Responder respond) override;
  // Registers every endpoint with `router`. REQUIRES: this outlives `router`'s use.
  void AddRoutes(Router* router) const { router->Include(routes_); }
  // Where POST .../backup reads databases from. REQUIRES: before serving; outlives this.
  void SetStorage(storage::Storage* storage) { storage_ = storage; }
  // Where POST .../backup may write (none by default: every backup request is refused).
  // REQUIRES: before serving.
  void SetBackupDestinations(backup::BackupDestinations destinations) {
    backup_destinations_ = std::move(destinations);
  }

  // What the endpoint handlers (free functions in admin_api.cc) use.
  struct Env {
    AdminApiOptions options;
    Directory* directory = nullptr;
    AdminOps* ops = nullptr;
    const Metrics* metrics = nullptr;
    // Runs work on the worker thread. Errors: Unavailable when stopping or, if `bounded`, when
    // the queue is full (an import's later steps are not bounded: it holds its place).
    std::function<Status(std::function<void()>, bool bounded)> post;
  };

 private:
  using Work = std::function<void()>;

  Status Post(Work work, bool bounded = true);

  // The endpoints, by group (admin_api.cc).
  void AddServerRoutes(Router* router);
  void AddEntryRoutes(Router* router);
  // Paths under the prefix that no endpoint takes: 404, or 405 where the API always said so.
  void AddFallbackRoutes(Router* router);

  // An online snapshot into a backup target (backup/operations.h), on the backup thread.
  void Backup(const JsonCallPtr& call);
  // On the worker: checks the destination and the rate bound, then starts the backup thread.
  void StartBackup(const JsonCallPtr& call, const storage::DatabaseRecord& rec,
                   const std::string& requested);

  Env env_;
  const JsonApi json_;
  Router routes_;
  storage::Storage* storage_ = nullptr;             // SetStorage
  backup::BackupDestinations backup_destinations_;  // SetBackupDestinations

  // One online backup at a time, on its own thread (a large snapshot takes a while).
  std::atomic<bool> backup_busy_{false};
  Mutex backup_mu_;
  std::thread backup_thread_ KVC_GUARDED_BY(backup_mu_);
  // When each database's last on-demand backup was accepted (steady clock), by database id.
  std::map<std::string, std::chrono::steady_clock::time_point> last_backup_
      KVC_GUARDED_BY(backup_mu_);

  // The worker: one thread, so catalog operations run one at a time. Reset first on
  // destruction (it finishes what is queued, which may start a backup thread).
  std::unique_ptr<WorkPool> worker_;
};

// The JSON of a database, with what the directory and metrics know of it.
std::string DatabaseJson(const AdminApi::Env& env, const DatabaseInfo& info,
                         const Directory::Snapshot& snap);

}  // namespace kvc::service
