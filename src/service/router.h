// Router: the one entry point of every HTTP request. It normalizes the path, picks the handler
// registered for it (an exact path first, then the longest matching prefix), answers 404 or
// 405 through the status table itself, and tells its RequestObserver about every answered
// request (route, status, protocol, latency), so new endpoints are one file plus one Add().
//
// Ownership: does not own handlers or the observer; they must outlive the router.
// Thread-safety: Add() only before the server starts; Handle() from any thread.
#pragma once

#include <chrono>
#include <string>
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

class Router : public Handler {
 public:
  enum class Match { kExact, kPrefix };
  // A prefix may hold `*` segments, each matching one non-empty path segment
  // ("/databases/*/queue/v1/"); the longest match wins.
  // `methods` lists the accepted methods; empty: any (the handler answers the others).
  // `not_allowed` is the 405 text for other methods.
  void Add(std::string route, Match match, std::string path, std::vector<std::string> methods,
           Handler* handler, std::string not_allowed = "Method not allowed.");
  void SetObserver(RequestObserver* observer) { observer_ = observer; }

  void Handle(HttpRequest request, Responder respond) override;

  // Collapses repeated slashes and drops a trailing one, so `//v2/x` (from a bare-origin
  // endpoint) routes like `/v2/x`.
  static std::string NormalizePath(const std::string& path);

 private:
  struct Route {
    std::string name;
    Match match;
    std::string path;
    std::vector<std::string> methods;
    Handler* handler;
    std::string not_allowed;
  };
  const Route* Find(const std::string& path) const;

  std::vector<Route> routes_;
  RequestObserver* observer_ = nullptr;
};

}  // namespace kvc::service
