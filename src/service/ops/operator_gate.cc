#include "service/ops/operator_gate.h"

namespace kvc::service {

void OperatorGate::Check(const HttpRequest& request, std::function<void(Status)> done) const {
  if (open_) {
    done(Status::Ok());
    return;
  }
  if (request.Header("authorization").empty()) {
    done(Unauthenticated(
        "This needs the server's bootstrap access token (Authorization: Bearer), or a metrics "
        "listener the operator opened with --metrics-public."));
    return;
  }
  auto token = auth_->BearerToken(request);
  if (!token.ok()) {
    done(token.status());
    return;
  }
  auth_->AuthenticateThen(
      std::move(*token), [done = std::move(done)](Result<Principal> who, const auto&) {
        if (!who.ok()) return done(who.status());
        if (who->scope != auth::Scope::kAdmin || !who->server_wide) {
          return done(PermissionDenied(
              "This access token is not a server-wide admin token (the bootstrap token); "
              "/metrics and detailed readiness cover every database and need one."));
        }
        done(Status::Ok());
      });
}

}  // namespace kvc::service
