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

namespace {
// Does `path` start with `prefix`, where a `*` segment of the prefix matches any one non-empty
// segment? Returns the length of the matched part of `path`, or 0.
size_t MatchPrefix(const std::string& path, const std::string& prefix) {
  size_t p = 0;
  size_t i = 0;
  while (i < prefix.size()) {
    if (prefix[i] == '*' && (i == 0 || prefix[i - 1] == '/')) {
      const size_t end = path.find('/', p);
      if (end == p || end == std::string::npos) return 0;
      p = end;
      ++i;
      continue;
    }
    if (p >= path.size() || path[p] != prefix[i]) return 0;
    ++p;
    ++i;
  }
  return p;
}
}  // namespace

const Router::Route* Router::Find(const std::string& path) const {
  const Route* best = nullptr;
  size_t best_len = 0;
  for (const Route& r : routes_) {
    if (r.match == Match::kExact) {
      if (path == r.path) return &r;
      continue;
    }
    const size_t len = MatchPrefix(path, r.path);
    if (len > 0 && (!best || len > best_len)) {
      best = &r;
      best_len = len;
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
