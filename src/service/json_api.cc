#include "service/json_api.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <exception>

#include "codec/json_text.h"
#include "service/http_status.h"

namespace kvc::service {
namespace {

// The error code name: StatusCodeName in lower case, except that storage failures are
// "internal" (their detail stays in the log, as for every client).
std::string CodeName(StatusCode code) {
  if (code == StatusCode::kCorruption || code == StatusCode::kIoError) code = StatusCode::kInternal;
  std::string name = StatusCodeName(code);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.headers.emplace_back("cache-control", "no-store");
  r.body = std::move(body);
  return r;
}

HttpResponse JsonErrorResponse(const Status& status) {
  HttpResponse r = ErrorResponse(status);  // the status table, and storage details kept out
  std::string body = "{\"error\":";
  codec::AppendJsonQuoted(r.body, &body);
  body += ",\"code\":\"";
  body += CodeName(status.code());
  body += "\"}";
  r.body = std::move(body);
  r.content_type = "application/json";
  return r;
}

void JsonApi::Add(Router* router, JsonEndpoint endpoint) const {
  auto ep = std::make_shared<const JsonEndpoint>(std::move(endpoint));
  for (const std::string& pattern : ep->patterns) {
    Endpoint e;
    e.name = ep->name;
    e.methods = ep->methods;
    e.pattern = pattern;
    e.handle = [this, ep](HttpRequest req, Responder respond) {
      Serve(std::move(req), std::move(respond), ep, /*allowed=*/true);
    };
    e.refuse = [this, ep](HttpRequest req, Responder respond) {
      Serve(std::move(req), std::move(respond), ep, /*allowed=*/false);
    };
    router->Add(std::move(e));
  }
}

void JsonApi::Guarded(const JsonCall& call, const std::function<void()>& step) const {
  try {
    step();
  } catch (const std::exception& e) {
    spdlog::error("{} handler failed: {}", policy_.log_name, e.what());
    call.Fail(Internal("An internal server error occurred."));
  }
}

void JsonApi::Serve(HttpRequest request, Responder respond, const EndpointPtr& ep,
                    bool allowed) const {
  auto call = std::make_shared<JsonCall>();
  call->respond = std::move(respond);
  auto token = policy_.auth->BearerToken(request);
  if (!token.ok()) return call->Fail(token.status());
  call->req = std::move(request);
  policy_.auth->AuthenticateThen(
      std::move(*token), [this, call, ep, allowed](Result<Principal> who, const auto& snap) {
        if (!who.ok()) return call->Fail(who.status());
        call->who = std::move(*who);
        call->snap = snap;
        Admitted(call, ep, allowed);
      });
}

void JsonApi::Admitted(const JsonCallPtr& call, const EndpointPtr& ep, bool allowed) const {
  if (policy_.admit) {
    if (Status s = policy_.admit(call->who); !s.ok()) return call->Fail(s);
  }
  auto rest = [this, call, ep, allowed] {
    Guarded(*call, [&] { Resolve(call, ep, allowed, call->snap, /*may_refresh=*/true); });
  };
  if (!policy_.post) return rest();
  // The rest parses and validates the body: CPU work for the executor, not an I/O thread.
  if (Status posted = policy_.post(rest); !posted.ok()) call->Fail(posted);
}

void JsonApi::Resolve(const JsonCallPtr& call, const EndpointPtr& ep, bool allowed,
                      std::shared_ptr<const Directory::Snapshot> snap, bool may_refresh) const {
  // Refusing a method never needs the bootstrap token (as the API always answered).
  if (allowed && ep->needs == JsonNeeds::kServerWide) {
    if (Status s = policy_.auth->AdmitServerWide(call->who); !s.ok()) return call->Fail(s);
  }
  if (ep->needs == JsonNeeds::kDatabase) {
    const std::string_view named = call->req.Param("db");
    call->database = named.empty() ? policy_.default_database : std::string(named);
    const Directory::Database* db = snap->Find(call->database);
    if (db == nullptr && may_refresh) {  // perhaps created since the last catalog poll
      policy_.directory->RefreshThen(
          [this, call, ep, allowed](std::shared_ptr<const Directory::Snapshot> fresh) {
            Guarded(*call, [&] { Resolve(call, ep, allowed, std::move(fresh), false); });
          });
      return;
    }
    if (db == nullptr) return call->Fail(NotFound("Database '" + call->database + "' not found."));
    if (Status s = policy_.admit_database(call->who, *db, call->database); !s.ok()) {
      return call->Fail(s);
    }
    call->snap = std::move(snap);
    call->db = db;
  }
  if (ep->guard) {
    if (Status s = ep->guard(*call); !s.ok()) return call->Fail(s);
  }
  if (!allowed) {
    return call->Fail(
        Status(StatusCode::kMethodNotAllowed,
               "Method " + call->req.method + " is not allowed here; use " + ep->use));
  }
  ep->handle(call);
}

}  // namespace kvc::service
