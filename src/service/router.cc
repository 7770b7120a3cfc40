#include "service/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <string_view>

#include "service/http_status.h"

namespace kvc::service {

namespace {
const std::string kUnmatched = "unmatched";

// Splits a normalized path into its segments ("/" has none).
std::vector<std::string_view> PathSegments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 1;
  while (i < path.size()) {
    const size_t end = std::min(path.find('/', i), path.size());
    out.push_back(path.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

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

bool Allows(const Endpoint& e, const std::string& method) {
  return e.methods.empty() ||
         std::find(e.methods.begin(), e.methods.end(), method) != e.methods.end();
}

// One request's way back: a channel answer needs an upgradable request, the first answer goes
// to the observer (if any) and then to `inner`, later ones are dropped. One allocation per
// request, shared by every copy of the Responder that calls it.
class AnswerOnce {
 public:
  AnswerOnce(Responder inner, RequestObserver* observer, const std::string* name,
             const HttpRequest& request)
      : inner_(std::move(inner)),
        observer_(observer),
        name_(name),
        http2_(request.http2),
        tls_(request.tls),
        upgradable_(!request.upgrade.empty()) {}

  void Answer(HttpResponse r) {
    if (r.channel && !upgradable_) {
      spdlog::error("handler for {} answered with a channel to a request that cannot switch",
                    *name_);
      r = ErrorResponse(Internal("An internal server error occurred."));
    }
    if (answered_.exchange(true)) return;
    if (observer_) {  // sees every answer, whichever thread gives it
      observer_->OnRequest(
          RequestInfo{*name_, r.status, http2_, tls_, std::chrono::steady_clock::now() - start_});
    }
    inner_(std::move(r));
  }

 private:
  Responder inner_;
  RequestObserver* const observer_;
  const std::string* const name_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const bool http2_;
  const bool tls_;
  const bool upgradable_;
  std::atomic<bool> answered_{false};
};

Responder ResponderOf(const std::shared_ptr<AnswerOnce>& once) {
  return [once](HttpResponse r) { once->Answer(std::move(r)); };
}

// True if NormalizePath would return `path` unchanged (the common case: no copy needed).
bool IsNormalPath(const std::string& path) {
  if (path.empty() || (path.size() > 1 && path.back() == '/')) return false;
  return path.find("//") == std::string::npos;
}

}  // namespace

std::vector<Router::Segment> Router::ParsePattern(const std::string& pattern) {
  std::vector<Segment> out;
  const std::string normalized = NormalizePath(pattern);  // the segments point into it
  for (std::string_view seg : PathSegments(normalized)) {
    if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
      std::string_view name = seg.substr(1, seg.size() - 2);
      const bool rest = name.size() > 3 && name.substr(name.size() - 3) == "...";
      if (rest) name.remove_suffix(3);
      out.push_back(
          Segment{rest ? Segment::Kind::kRest : Segment::Kind::kParam, std::string(name)});
    } else {
      out.push_back(Segment{Segment::Kind::kLiteral, std::string(seg)});
    }
  }
  return out;
}

void Router::Add(Endpoint endpoint) {
  Route route;
  route.segments = ParsePattern(endpoint.pattern);
  route.endpoint = std::move(endpoint);
  Append(std::move(route));
}

void Router::Include(const Router& other) {
  for (const Route& r : other.routes_) Append(r);
}

void Router::Append(Route route) {
  bool literal = !route.prefix;
  std::string path;
  for (const Segment& s : route.segments) {
    literal = literal && s.kind == Segment::Kind::kLiteral;
    path.push_back('/');
    path += s.text;
  }
  if (path.empty()) path.push_back('/');  // the root pattern
  routes_.push_back(std::move(route));
  if (literal) literal_routes_[path].push_back(routes_.size() - 1);
}

void Router::Add(std::string route, Match match, std::string path, std::vector<std::string> methods,
                 Handler* handler, std::string not_allowed) {
  Endpoint e;
  e.name = std::move(route);
  e.methods = std::move(methods);
  e.pattern = std::move(path);
  e.handle = [handler](HttpRequest req, Responder respond) {
    handler->Handle(std::move(req), std::move(respond));
  };
  e.not_allowed = std::move(not_allowed);
  if (match == Match::kExact) {
    Add(std::move(e));
    return;
  }
  Route r;
  r.endpoint = std::move(e);
  r.prefix = true;
  Append(std::move(r));
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

bool Router::MatchSegments(const std::vector<Segment>& segments, const std::string& path,
                           const std::vector<std::string_view>& parts,
                           std::vector<std::pair<std::string, std::string>>* params) {
  params->clear();
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (i >= parts.size()) return false;
    if (s.kind == Segment::Kind::kRest) {
      params->emplace_back(s.text, path.substr(parts[i].data() - path.data()));
      return true;
    }
    if (s.kind == Segment::Kind::kLiteral && parts[i] != s.text) return false;
    if (s.kind == Segment::Kind::kParam) params->emplace_back(s.text, parts[i]);
  }
  return segments.size() == parts.size();
}

int Router::CompareSpecificity(const std::vector<Segment>& a, const std::vector<Segment>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i].kind != b[i].kind) return a[i].kind < b[i].kind ? -1 : 1;
    if (a[i].kind == Segment::Kind::kRest) return 0;
  }
  // Both match the same path: without a `{name...}` they have as many segments.
  return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

Router::Found Router::Find(const std::string& path, const std::string& method) const {
  Found best;
  // A normalized path (no empty segment) that a literal pattern spells out: that pattern is the
  // most specific, and the scan below would pick the same route (the first that takes the
  // method, else the first).
  if (path.starts_with('/')) {
    if (auto it = literal_routes_.find(path); it != literal_routes_.end()) {
      for (size_t i : it->second) {
        const Route& r = routes_[i];
        const bool allowed = Allows(r.endpoint, method);
        if (best.route == nullptr || allowed) {
          best.route = &r;
          best.method_allowed = allowed;
        }
        if (allowed) break;
      }
      return best;
    }
  }
  const std::vector<std::string_view> parts = PathSegments(path);
  std::vector<std::pair<std::string, std::string>> params;
  for (const Route& r : routes_) {
    if (r.prefix || !MatchSegments(r.segments, path, parts, &params)) continue;
    const int cmp = best.route ? CompareSpecificity(r.segments, best.route->segments) : 1;
    if (cmp < 0) continue;
    const bool allowed = Allows(r.endpoint, method);
    // A more specific pattern wins; at the same pattern, the first endpoint that takes the
    // method (else the first one registered, which refuses).
    if (cmp > 0 || (allowed && !best.method_allowed)) {
      best.route = &r;
      best.method_allowed = allowed;
      best.params = params;
    }
  }
  if (best.route != nullptr) return best;
  best.route = FindPrefix(path);
  best.method_allowed = best.route != nullptr && Allows(best.route->endpoint, method);
  return best;
}

const Router::Route* Router::FindPrefix(const std::string& path) const {
  const Route* best = nullptr;
  size_t best_len = 0;
  for (const Route& r : routes_) {
    if (!r.prefix) continue;
    const size_t len = MatchPrefix(path, r.endpoint.pattern);
    if (len > 0 && (!best || len > best_len)) {
      best = &r;
      best_len = len;
    }
  }
  return best;
}

void Router::Handle(HttpRequest request, Responder respond) {
  if (!IsNormalPath(request.path)) request.path = NormalizePath(request.path);
  Found found = Find(request.path, request.method);
  const std::string* name = found.route ? &found.route->endpoint.name : &kUnmatched;
  auto once = std::make_shared<AnswerOnce>(std::move(respond), observer_, name, request);
  auto answer = [&once](HttpResponse r) { once->Answer(std::move(r)); };
  if (!found.route) {
    answer(ErrorResponse(NotFound("Resource not found.")));
    return;
  }
  const Endpoint& e = found.route->endpoint;
  if (!found.method_allowed && !e.refuse) {
    answer(ErrorResponse(Status(StatusCode::kMethodNotAllowed, e.not_allowed)));
    return;
  }
  request.params = std::move(found.params);
  try {
    (found.method_allowed ? e.handle : e.refuse)(std::move(request), ResponderOf(once));
  } catch (const std::exception& ex) {
    // The one catch-all at the router: the request is answered even so (once: an answer the
    // handler gave before it threw stands).
    spdlog::error("handler for {} failed: {}", *name, ex.what());
    answer(ErrorResponse(Internal("An internal server error occurred.")));
  } catch (...) {
    spdlog::error("handler for {} failed", *name);
    answer(ErrorResponse(Internal("An internal server error occurred.")));
  }
}

}  // namespace kvc::service
