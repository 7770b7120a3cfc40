#include "service/health.h"

#include "service/http_status.h"

namespace kvc::service {

std::vector<std::string> Health::NotReadyReasons() const {
  std::vector<std::string> reasons;
  if (draining_) reasons.push_back("the server is shutting down");
  auto snap = directory_->snapshot();
  for (const std::string& name : snap->unavailable) {
    reasons.push_back("database '" + name + "' could not be opened");
  }
  for (const auto& [id, db] : snap->by_id) {
    if (!db.engine->writable()) {
      reasons.push_back("database '" + db.record.name +
                        "' refuses writes after a storage failure (restart the server)");
    }
  }
  return reasons;
}

void HealthHandler::Handle(HttpRequest, Responder respond) {
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; charset=utf-8";
  if (kind_ == Kind::kLive) {
    r.body = "ok\n";
    respond(std::move(r));
    return;
  }
  const std::vector<std::string> reasons = health_->NotReadyReasons();
  std::string details;
  for (const std::string& line : health_->Details()) details += "\n" + line;
  if (reasons.empty()) {
    r.body = "ready\n" + (details.empty() ? "" : details.substr(1) + "\n");
    respond(std::move(r));
    return;
  }
  std::string text = "not ready: ";
  for (size_t i = 0; i < reasons.size(); ++i) text += (i ? "; " : "") + reasons[i];
  respond(ErrorResponse(Unavailable(text + "." + details)));
}

}  // namespace kvc::service
