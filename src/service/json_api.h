// JsonApi: the call pattern every JSON endpoint follows (the admin API, the queue API), written
// once. For a request it:
//   1. takes the `Authorization: Bearer` token and authenticates it (rereading the catalog once
//      for a token the snapshot does not know yet);
//   2. admits the caller (JsonApiPolicy::admit: the admin API's operator check and rate limit);
//   3. moves to where bodies may be parsed (JsonApiPolicy::post: a worker or the body pool, never
//      an I/O thread; a full queue answers 503);
//   4. checks what the endpoint needs: the bootstrap token (kServerWide), or the database named
//      by the pattern's `{db}` (or the policy's default) found (rereading the catalog once) and
//      admitted (JsonApiPolicy::admit_database), then the endpoint's own guard;
//   5. runs the handler, which parses the body with the shared safe parser (codec/, its depth
//      and size limits; WithBody does it for the common case) and answers with JsonCall::Ok or
//      JsonCall::Fail: `{"error", "code"}` bodies with the status of the one status table
//      (http_status.cc), storage details kept out.
// A method the pattern does not take runs steps 1-4 (without kServerWide) and answers 405
// "Method M is not allowed here; use ...", so refusals come in the order they always did.
// A throw in a step or a handler answers 500 (JSON); nothing is left unanswered.
//
// A new endpoint is its handler plus one JsonApi::Add (see AdminApi::AddEntryRoutes).
//
// Ownership: borrows the authenticator and directory of its policy; they must outlive it and
// the calls it starts. A JsonCall is shared by the steps of one request and holds the snapshot
// its database came from.
// Thread-safety: immutable after construction; Serve() from any thread. Steps run on the
// calling thread, the directory's thread and the policy's executor.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"
#include "service/authenticator.h"
#include "service/directory.h"
#include "service/http_types.h"
#include "service/router.h"

namespace kvc::service {

// A JSON answer: `status`, application/json, `Cache-Control: no-store`.
HttpResponse JsonResponse(int status, std::string body);
// The JSON error answer for `status`: {"error": message, "code": name} with the HTTP status of
// the status table (storage failures as "internal", their detail only in the log).
HttpResponse JsonErrorResponse(const Status& status);

// One request on its way through the pattern.
struct JsonCall {
  HttpRequest req;  // with the router's path parameters
  Responder respond;
  Principal who;                                    // from step 1
  std::shared_ptr<const Directory::Snapshot> snap;  // the snapshot `who` and `db` come from
  const Directory::Database* db = nullptr;          // kDatabase endpoints; owned by `snap`
  std::string database;                             // as the URL named it (kDatabase)
  std::shared_ptr<void> found;  // what the endpoint's guard attached (e.g. the database's queue)

  void Fail(const Status& s) const { respond(JsonErrorResponse(s)); }
  void Ok(std::string body, int status = 200) const {
    respond(JsonResponse(status, std::move(body)));
  }
};
using JsonCallPtr = std::shared_ptr<JsonCall>;
using JsonHandler = std::function<void(const JsonCallPtr&)>;

// What an endpoint needs before its handler runs (step 4).
enum class JsonNeeds {
  kNothing,     // any admitted caller
  kServerWide,  // the bootstrap token (Authenticator::AdmitServerWide)
  kDatabase,    // the database of `{db}` (or the default), admitted
};

struct JsonEndpoint {
  std::string name;                  // metrics route label
  std::vector<std::string> methods;  // accepted; empty: any
  std::vector<std::string>
      patterns;  // each registered with the router, e.g. ".../{db}/entries/get"
  JsonNeeds needs = JsonNeeds::kNothing;
  // After the database is admitted, before the handler or a 405 (e.g. "is the queue running");
  // may attach what it found to JsonCall::found.
  std::function<Status(JsonCall&)> guard;
  JsonHandler handle;
  // For other methods: "use " + this, e.g. "POST with a JSON body.".
  std::string use;
};

struct JsonApiPolicy {
  Authenticator* auth = nullptr;
  Directory* directory = nullptr;
  // Step 2; null: everyone authenticated is admitted.
  std::function<Status(const Principal&)> admit;
  // Step 3: runs the closure elsewhere (Unavailable when it cannot); null: inline.
  std::function<Status(std::function<void()>)> post;
  // Step 4 for kDatabase, with the name the URL used. REQUIRES: set when any endpoint needs it.
  std::function<Status(const Principal&, const Directory::Database&, const std::string&)>
      admit_database;
  // The database of a kDatabase pattern without `{db}`.
  std::string default_database = "default";
  const char* log_name = "JSON API";  // for log lines
};

class JsonApi {
 public:
  explicit JsonApi(JsonApiPolicy policy) : policy_(std::move(policy)) {}

  // Registers `endpoint` under each of its patterns.
  void Add(Router* router, JsonEndpoint endpoint) const;

  // The handler of a kNothing..kDatabase endpoint whose body `parse` reads (the shared safe
  // parser of codec/): a body it refuses is answered with its status (400, 413), else `fn` runs.
  template <typename Body>
  static JsonHandler WithBody(
      Result<Body> (*parse)(std::string_view),
      std::type_identity_t<std::function<void(const JsonCallPtr&, Body)>> fn) {
    return [parse, fn = std::move(fn)](const JsonCallPtr& call) {
      Result<Body> body = parse(call->req.body);
      if (!body.ok()) return call->Fail(body.status());
      fn(call, std::move(*body));
    };
  }

 private:
  using EndpointPtr = std::shared_ptr<const JsonEndpoint>;
  // Steps 1-5 for `request`; `allowed`: false runs steps 1-4 and answers 405.
  void Serve(HttpRequest request, Responder respond, const EndpointPtr& ep, bool allowed) const;
  // Steps 2-3, once `who` is known.
  void Admitted(const JsonCallPtr& call, const EndpointPtr& ep, bool allowed) const;
  // Steps 4-5 against `snap`; an unknown database rereads the catalog once if `may_refresh`.
  void Resolve(const JsonCallPtr& call, const EndpointPtr& ep, bool allowed,
               std::shared_ptr<const Directory::Snapshot> snap, bool may_refresh) const;
  // Runs `step`; a throw answers 500.
  void Guarded(const JsonCall& call, const std::function<void()>& step) const;

  const JsonApiPolicy policy_;
};

}  // namespace kvc::service
