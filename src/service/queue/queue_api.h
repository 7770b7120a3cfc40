// QueueApi: the queue delivery API (docs/queues.md) under BASE/queue/v1/OP, where BASE is the
// server (database "default") or /databases/NAME: enqueue, pull (long poll), ack, nack,
// extend, and stream (Server-Sent Events). Requests carry the access token itself (bootstrap,
// or a catalog token of scope write, admin or queue; read tokens are refused) and are admitted
// like a metadata exchange but draw from the token's data-path rate bucket. The work happens in
// the database's queue::Queue (the engine's writer task); this class only authenticates, parses
// and renders.
//
// Each operation is one JsonApi endpoint (json_api.h) under both paths, with its own metrics
// route name ("queue_pull"); other paths under them count as "queue".
//
// Also the admin API's queue resources (counts and dead letters), through AddQueueAdminRoutes.
//
// Ownership: borrows the directory, authenticator and body pool (they must outlive it). SSE streams
// hold their queue (not the engine). Thread-safety: Handle() from any thread; answers come from
// engine threads, the body pool or inline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "service/authenticator.h"
#include "service/directory.h"
#include "service/http_types.h"
#include "service/json_api.h"
#include "service/kvconnect/portable_values.h"
#include "service/router.h"
#include "service/work_pool.h"

namespace kvc::service {

struct QueueApiOptions {
  // SSE comment on idle streams so proxies keep them open.
  int64_t stream_keepalive_ms = 15000;
  // V8 format of values enqueued as JSON (15: every Deno and Node reads it).
  uint32_t v8_write_format = 15;
  // Payloads stored in the form every runtime reads (portable_values.h), as KV Connect does.
  bool portable_v8_values = true;
};

class QueueApi : public Handler {
 public:
  // The two bases of every operation: the database "default", and one named in the URL.
  static constexpr const char* kPath = "/queue/v1";
  static constexpr const char* kDatabasePath = "/databases/{db}/queue/v1";

  // Bodies are parsed on `body_pool` (KvService::body_pool()) once the token is known; null:
  // on the thread that authenticated (tests).
  QueueApi(QueueApiOptions options, Directory* directory, Authenticator* auth,
           WorkPool* body_pool = nullptr);
  // Answers through the API's own routes (as AddRoutes registers them).
  void Handle(HttpRequest request, Responder respond) override;
  // Registers every endpoint with `router`. REQUIRES: this outlives `router`'s use.
  void AddRoutes(Router* router) const { router->Include(routes_); }

 private:
  void AddOperationRoutes(Router* router);
  void Enqueue(const JsonCallPtr& call);
  void Stream(const JsonCallPtr& call);

  const QueueApiOptions options_;
  const JsonApi json_;
  Router routes_;
  PortableValues portable_;
};

// A message's payload as the API shows it: its KvValueJSON, or with `v8` the {"type": "v8"} form
// of its bytes; format-16 payloads (from a local Deno) first become the form every runtime reads.
Result<std::string> QueueValueOf(const std::string& payload, bool v8);

// Registers the admin API's queue resources of a database with `router`, through `json` (the
// admin API's call pattern), under `database_pattern` (".../databases/{db}"): GET queue
// (counts), POST queue/dead/list, queue/dead/requeue, queue/dead/purge; each answers 503 while
// the database's queue is not running.
void AddQueueAdminRoutes(const JsonApi& json, Router* router, const std::string& database_pattern);

}  // namespace kvc::service
