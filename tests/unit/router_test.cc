// service::Router: path normalization, exact before prefix, the longest prefix, 404/405 through
// the status table, and the observer seeing every answer.
#include "service/router.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "service/kv_service.h"

namespace kvc::service {
namespace {

// Answers 200 with its name and remembers the path it got.
class NamedHandler : public Handler {
 public:
  explicit NamedHandler(std::string name) : name_(std::move(name)) {}
  void Handle(HttpRequest request, Responder respond) override {
    paths.push_back(request.path);
    HttpResponse r;
    r.status = 200;
    r.body = name_;
    respond(std::move(r));
  }
  std::vector<std::string> paths;

 private:
  std::string name_;
};

class RecordingObserver : public RequestObserver {
 public:
  void OnRequest(const RequestInfo& info) override {
    seen.push_back(info.route + " " + std::to_string(info.status) + (info.http2 ? " h2" : " h1") +
                   (info.tls ? " tls" : " plain"));
  }
  std::vector<std::string> seen;
};

HttpResponse Call(Router& router, std::string method, std::string path, bool http2 = false) {
  HttpRequest req;
  req.method = std::move(method);
  req.path = std::move(path);
  req.http2 = http2;
  HttpResponse out;
  router.Handle(std::move(req), [&](HttpResponse r) { out = std::move(r); });
  return out;
}

TEST(Router, NormalizesPaths) {
  EXPECT_EQ(Router::NormalizePath("//v2//watch/"), "/v2/watch");
  EXPECT_EQ(Router::NormalizePath("/"), "/");
  EXPECT_EQ(Router::NormalizePath(""), "/");
  EXPECT_EQ(Router::NormalizePath("///"), "/");
}

TEST(Router, ExactFirstThenLongestPrefixAndClearErrors) {
  NamedHandler root("root"), v2("v2"), watch("watch"), metrics("metrics");
  Router router;
  RecordingObserver observer;
  router.SetObserver(&observer);
  router.Add("metadata", Router::Match::kExact, "/", {}, &root);
  router.Add("datapath", Router::Match::kPrefix, "/v2/", {}, &v2);
  router.Add("watch", Router::Match::kExact, "/v2/watch", {}, &watch);
  router.Add("metrics", Router::Match::kExact, "/metrics", {"GET"}, &metrics, "Use GET.");

  EXPECT_EQ(Call(router, "POST", "/").body, "root");
  EXPECT_EQ(Call(router, "POST", "//v2/watch/", true).body, "watch");
  EXPECT_EQ(Call(router, "POST", "/v2/snapshot_read").body, "v2");
  EXPECT_EQ(v2.paths, std::vector<std::string>{"/v2/snapshot_read"});
  EXPECT_EQ(Call(router, "GET", "/metrics").body, "metrics");

  HttpResponse r = Call(router, "POST", "/metrics");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "Use GET.");
  r = Call(router, "GET", "/nowhere");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "Resource not found.");
  r = Call(router, "GET", "/v2");  // "/v2/" is a prefix of "/v2/..." only
  EXPECT_EQ(r.status, 404);

  EXPECT_EQ(observer.seen,
            (std::vector<std::string>{"metadata 200 h1 plain", "watch 200 h2 plain",
                                      "datapath 200 h1 plain", "metrics 200 h1 plain",
                                      "metrics 405 h1 plain", "unmatched 404 h1 plain",
                                      "unmatched 404 h1 plain"}));
}

// --allowed-host: which Host values a metadata answer may build endpoint URLs from.
TEST(HostAllowed, NamesPortsAndCase) {
  const std::vector<std::string> allowed = {"kv.example.com", "127.0.0.1:4512", "[::1]"};
  EXPECT_TRUE(HostAllowed("kv.example.com", allowed));
  EXPECT_TRUE(HostAllowed("KV.Example.COM:443", allowed));  // no port in the entry: any port
  EXPECT_TRUE(HostAllowed("127.0.0.1:4512", allowed));
  EXPECT_FALSE(HostAllowed("127.0.0.1:4513", allowed));  // a port in the entry: only that one
  EXPECT_FALSE(HostAllowed("127.0.0.1", allowed));
  EXPECT_TRUE(HostAllowed("[::1]:4512", allowed));
  EXPECT_FALSE(HostAllowed("evil.example", allowed));
  EXPECT_FALSE(HostAllowed("kv.example.com.evil.example", allowed));
  EXPECT_FALSE(HostAllowed("evil.example:kv.example.com", allowed));
}

}  // namespace
}  // namespace kvc::service
