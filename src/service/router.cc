#include "service/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "service/http_status.h"

namespace kvc::service {

namespace {
const std::string kUnmatched = "unmatched";
}  // namespace

void Router::Add(std::string route, Match match, std::string path, std::vector<std::string> methods,
                 Handler* handler, std::string not_allowed) {
  routes_.push_back(Route{std::move(route), match, std::move(path), std::move(methods), handler,
                          std::move(not_allowed)});
}

std::string Router::NormalizePath(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out.empty()) out.push_back('/');
  return out;
}

const Router::Route* Router::Find(const std::string& path) const {
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    if (r.match == Match::kExact) {
      if (path == r.path) return &r;
    } else if (path.compare(0, r.path.size(), r.path) == 0 &&
               (!best || r.path.size() > best->path.size())) {
      best = &r;
    }
  }
  return best;
}

void Router::Handle(HttpRequest request, Responder respond) {
  request.path = NormalizePath(request.path);
  const Route* route = Find(request.path);
  if (observer_) {
    // Wraps the responder so the observer sees every answer, whichever thread gives it.
    respond = [observer = observer_, name = route ? &route->name : &kUnmatched,
               http2 = request.http2, tls = request.tls, start = std::chrono::steady_clock::now(),
               inner = std::move(respond)](HttpResponse r) mutable {
      observer->OnRequest(
          RequestInfo{*name, r.status, http2, tls, std::chrono::steady_clock::now() - start});
      inner(std::move(r));
    };
  }
  if (!route) {
    respond(ErrorResponse(NotFound("Resource not found.")));
    return;
  }
  if (!route->methods.empty() && std::find(route->methods.begin(), route->methods.end(),
                                           request.method) == route->methods.end()) {
    respond(ErrorResponse(Status(StatusCode::kMethodNotAllowed, route->not_allowed)));
    return;
  }
  try {
    route->handler->Handle(std::move(request), std::move(respond));
  } catch (const std::exception& e) {
    // The catch-all at the router; `respond` may have been moved from.
    spdlog::error("handler for {} failed: {}", route->name, e.what());
  }
}

}  // namespace kvc::service
