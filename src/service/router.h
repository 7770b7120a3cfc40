// Router: the one entry point of every HTTP request. Each endpoint registers itself once: its
// methods, a path pattern whose `{name}` segments it captures (HttpRequest::Param), and the name
// its requests carry in the metrics (`route`). The router normalizes the path, picks the most
// specific pattern that matches, then the endpoint of that pattern that takes the method; it
// answers 404 (no pattern) and 405 (the pattern, not the method) through the status table
// itself, or lets the pattern's `refuse` handler answer the 405 (an API that authenticates
// before it refuses). It tells its RequestObserver about every answered request (route, status,
// protocol, latency), so a new endpoint is its handler plus one Add().
//
// Patterns: segments separated by '/'; a literal segment matches itself, `{name}` one segment
// (captured), and a last `{name...}` one or more remaining segments (captured as they are, with
// their slashes). "/" is the root. Where several patterns match, segment by segment a literal
// beats `{name}`, which beats `{name...}`: /admin/v1/databases/{db}/entries/get beats
// /admin/v1/databases/{db}/{rest...}, which beats /admin/v1/{rest...}.
//
// Every request is answered exactly once: a handler that throws gets a 500 from the status
// table for its request (and whatever it answers later is dropped). A handler may ask to
// switch the request's connection to a bidirectional channel (channel.h) only when the session
// offered it (HttpRequest::upgrade); otherwise the router answers 500 in its place.
//
// Ownership: does not own `Handler*` handlers or the observer; they must outlive the router.
// Endpoint handlers are copied in (their captures must outlive the router).
// Thread-safety: Add()/Include() only before the server starts; Handle() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "service/http_types.h"

namespace kvc::service {

// One answered request, for metrics.
struct RequestInfo {
  const std::string& route;  // the route's name ("unmatched" when none)
  int status = 0;
  bool http2 = false;
  bool tls = false;
  std::chrono::steady_clock::duration latency{};  // to the response head (streams: their start)
};

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // Called on the thread that answers; must be quick.
  virtual void OnRequest(const RequestInfo& info) = 0;
};

using HandlerFn = std::function<void(HttpRequest, Responder)>;

// One endpoint: what answers `methods` at `pattern`.
struct Endpoint {
  std::string name;                  // the metrics route label, e.g. "admin_entries_get"
  std::vector<std::string> methods;  // accepted; empty: any
  std::string pattern;               // e.g. "/admin/v1/databases/{db}/entries/get"
  HandlerFn handle;
  // Another method at this pattern: `refuse` answers when set, else the router with 405 and
  // `not_allowed`. The first endpoint registered for a pattern decides.
  HandlerFn refuse;
  std::string not_allowed = "Method not allowed.";
};

class Router : public Handler {
 public:
  // REQUIRES: a well-formed pattern (a `{name...}` segment only last).
  void Add(Endpoint endpoint);
  // Every endpoint of `other` (an API's own table), as if added here.
  void Include(const Router& other);

  // The older form, for handlers that route themselves: kExact is a literal pattern; kPrefix
  // matches every path that starts with `path`, where a `*` segment matches any one non-empty
  // segment. Prefix routes come after every pattern; the longest wins.
  enum class Match { kExact, kPrefix };
  void Add(std::string route, Match match, std::string path, std::vector<std::string> methods,
           Handler* handler, std::string not_allowed = "Method not allowed.");
  void SetObserver(RequestObserver* observer) { observer_ = observer; }

  void Handle(HttpRequest request, Responder respond) override;

  // Collapses repeated slashes and drops a trailing one, so `//v2/x` (from a bare-origin
  // endpoint) routes like `/v2/x`.
  static std::string NormalizePath(const std::string& path);

 private:
  struct Segment {
    enum class Kind { kRest = 1, kParam = 2, kLiteral = 3 };  // higher: more specific
    Kind kind;
    std::string text;  // the literal, or the parameter's name
  };
  struct Route {
    Endpoint endpoint;
    std::vector<Segment> segments;  // pattern routes
    bool prefix = false;            // an older kPrefix route: endpoint.pattern is the prefix
  };
  // What answers a request, and its path parameters.
  struct Found {
    const Route* route = nullptr;
    bool method_allowed = false;
    std::vector<std::pair<std::string, std::string>> params;
  };

  Found Find(const std::string& path, const std::string& method) const;
  const Route* FindPrefix(const std::string& path) const;
  static std::vector<Segment> ParsePattern(const std::string& pattern);
  // Does `path` (split into `parts`) match `segments`? Fills `params` with the captures.
  static bool MatchSegments(const std::vector<Segment>& segments, const std::string& path,
                            const std::vector<std::string_view>& parts,
                            std::vector<std::pair<std::string, std::string>>* params);
  // -1, 0, 1 as `a` is less, as, or more specific than `b`.
  static int CompareSpecificity(const std::vector<Segment>& a, const std::vector<Segment>& b);
  // Appends `route`, and indexes it in literal_routes_ when every segment is a literal.
  void Append(Route route);

  std::vector<Route> routes_;
  // The pattern routes made of literal segments only (e.g. /v2/snapshot_read), by their path
  // ("/" + the segments joined with "/"), as indexes into routes_ in the order added. No other
  // pattern is as specific, so a normalized path found here is answered by one of these without
  // trying every route (the data path's requests, each one of them).
  std::unordered_map<std::string, std::vector<size_t>> literal_routes_;
  RequestObserver* observer_ = nullptr;
};

}  // namespace kvc::service
