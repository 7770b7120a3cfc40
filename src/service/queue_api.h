// QueueApi: the queue delivery API (docs/queues.md) under BASE/queue/v1/OP, where BASE is the
// server (database "default") or /databases/NAME: enqueue, pull (long poll), ack, nack,
// extend, and stream (Server-Sent Events). Requests carry the access token itself (bootstrap,
// or a catalog token of scope write, admin or queue; read tokens are refused) and are admitted
// like a metadata exchange but draw from the token's data-path rate bucket. The work happens in
// the database's queue::Queue (the engine's writer task); this class only authenticates, parses
// and renders.
//
// Also the admin API's queue resources (counts and dead letters), through HandleQueueAdmin.
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
#include "service/portable_values.h"
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
  // The router sends /queue/v1/... and /databases/*/queue/v1/... here.
  static constexpr const char* kPath = "/queue/v1/";
  static constexpr const char* kDatabasePattern = "/databases/*/queue/v1/";

  // Bodies are parsed on `body_pool` (KvService::body_pool()) once the token is known; null:
  // on the thread that authenticated (tests).
  QueueApi(QueueApiOptions options, Directory* directory, Authenticator* auth,
           WorkPool* body_pool = nullptr);
  void Handle(HttpRequest request, Responder respond) override;

 private:
  struct Call;
  void Authenticate(const std::shared_ptr<Call>& call);
  void Route(const std::shared_ptr<Call>& call, const Directory::Snapshot& snap, bool may_refresh);
  void Enqueue(const std::shared_ptr<Call>& call, const Directory::Database& db);

  const QueueApiOptions options_;
  Directory* const directory_;
  Authenticator* const auth_;
  WorkPool* const body_pool_;
  PortableValues portable_;
};

// A message's payload as the API shows it: its KvValueJSON, or with `v8` the {"type": "v8"} form
// of its bytes; format-16 payloads (from a local Deno) first become the form every runtime reads.
Result<std::string> QueueValueOf(const std::string& payload, bool v8);

// The admin API's queue resources of `db` (`rest` is the path after /databases/NAME/):
// GET queue (counts), POST queue/dead/list, queue/dead/requeue, queue/dead/purge. Answers
// through `respond` with the admin API's JSON (errors included). False if `rest` is not a
// queue resource.
bool HandleQueueAdmin(const Directory::Database& db, const std::string& rest,
                      const HttpRequest& request, const Responder& respond);

}  // namespace kvc::service
