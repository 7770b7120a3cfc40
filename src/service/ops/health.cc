#include "service/ops/health.h"

#include "service/http_status.h"
#include "service/query.h"

namespace kvc::service {

std::vector<std::string> Health::NotReadyReasons(bool detailed) const {
  std::vector<std::string> reasons;
  if (draining_) reasons.push_back("the server is shutting down");
  auto snap = directory_->snapshot();
  size_t unwritable = 0;
  for (const auto& [id, db] : snap->by_id) {
    if (db.engine->writable()) continue;
    ++unwritable;
    if (detailed) {
      reasons.push_back("database '" + db.record.name +
                        "' refuses writes after a storage failure (restart the server)");
    }
  }
  if (detailed) {
    for (const std::string& name : snap->unavailable) {
      reasons.push_back("database '" + name + "' could not be opened");
    }
    return reasons;
  }
  if (!snap->unavailable.empty()) {
    reasons.push_back(std::to_string(snap->unavailable.size()) +
                      " database(s) could not be opened");
  }
  if (unwritable > 0) {
    reasons.push_back(std::to_string(unwritable) +
                      " database(s) refuse writes after a storage failure (restart the server)");
  }
  return reasons;
}

namespace {
// `verbose` given, with any value but 0 or false.
bool WantsDetail(const std::string& query) {
  if (query.empty()) return false;
  auto params = ParseQuery(query);
  if (!params.ok()) return false;
  const std::string* v = FindParam(*params, "verbose");
  return v != nullptr && *v != "0" && *v != "false";
}
}  // namespace

HttpResponse HealthHandler::Ready(bool detailed) const {
  const std::vector<std::string> reasons = health_->NotReadyReasons(detailed);
  std::string details;
  if (detailed) {
    for (const std::string& line : health_->Details()) details += "\n" + line;
  }
  if (reasons.empty()) {
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "ready\n" + (details.empty() ? "" : details.substr(1) + "\n");
    return r;
  }
  std::string text = "not ready: ";
  for (size_t i = 0; i < reasons.size(); ++i) text += (i ? "; " : "") + reasons[i];
  text += ".";
  if (!detailed) text += " Details: /readyz?verbose=1 with the bootstrap token.";
  return ErrorResponse(Unavailable(text + details));
}

void HealthHandler::Handle(HttpRequest request, Responder respond) {
  if (kind_ == Kind::kLive) {
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "ok\n";
    respond(std::move(r));
    return;
  }
  if (!WantsDetail(request.query)) {
    respond(Ready(/*detailed=*/false));
    return;
  }
  if (gate_ == nullptr) {
    respond(ErrorResponse(PermissionDenied("Detailed readiness is not served here.")));
    return;
  }
  gate_->Check(request, [this, respond = std::move(respond)](const Status& s) {
    respond(s.ok() ? Ready(/*detailed=*/true) : ErrorResponse(s));
  });
}

}  // namespace kvc::service
