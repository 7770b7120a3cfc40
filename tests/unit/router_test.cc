// service::Router: path normalization, exact before prefix, the longest prefix, 404/405 through
// the status table, and the observer seeing every answer; patterns with captured parameters and
// the most specific one winning; a throwing handler's request still answered; a channel answer
// only to a request that can switch.
#include "service/router.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "service/channel.h"
#include "service/kvconnect/kv_service.h"

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

// Answers 200 with its name and the parameters it got ("name db=x path=y/z").
HandlerFn Echo(std::string name) {
  return [name](HttpRequest req, Responder respond) {
    HttpResponse r;
    r.body = name;
    for (const auto& [k, v] : req.params) r.body += " " + k + "=" + v;
    respond(std::move(r));
  };
}

TEST(Router, PatternsCaptureParametersAndTheMostSpecificWins) {
  Router router;
  RecordingObserver observer;
  router.SetObserver(&observer);
  router.Add(Endpoint{"any_under", {}, "/api/{path...}", Echo("any_under")});
  router.Add(Endpoint{"db_under", {"POST"}, "/api/db/{db}/{path...}", Echo("db_under")});
  router.Add(
      Endpoint{"get", {"POST"}, "/api/db/{db}/entries/get", Echo("get"), nullptr, "Use POST."});
  router.Add(Endpoint{"info", {"GET"}, "/api/db/{db}", Echo("info")});
  router.Add(Endpoint{"rename", {"PATCH"}, "/api/db/{db}", Echo("rename")});

  EXPECT_EQ(Call(router, "POST", "/api/db/sales/entries/get").body, "get db=sales");
  EXPECT_EQ(Call(router, "POST", "//api/db/sales/entries/get/").body, "get db=sales");
  EXPECT_EQ(Call(router, "POST", "/api/db/sales/entries/other").body,
            "db_under db=sales path=entries/other");
  EXPECT_EQ(Call(router, "GET", "/api/db/sales").body, "info db=sales");
  EXPECT_EQ(Call(router, "PATCH", "/api/db/sales").body, "rename db=sales");
  EXPECT_EQ(Call(router, "GET", "/api/tokens/x").body, "any_under path=tokens/x");
  EXPECT_EQ(Call(router, "GET", "/api/db").body, "any_under path=db");
  // The most specific pattern refuses other methods, with its text...
  HttpResponse r = Call(router, "GET", "/api/db/sales/entries/get");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "Use POST.");
  EXPECT_EQ(Call(router, "DELETE", "/api/db/sales").status, 405);
  // ...and `{path...}` needs at least one segment.
  EXPECT_EQ(Call(router, "GET", "/api").status, 404);
  EXPECT_EQ(observer.seen, (std::vector<std::string>{
                               "get 200 h1 plain", "get 200 h1 plain", "db_under 200 h1 plain",
                               "info 200 h1 plain", "rename 200 h1 plain", "any_under 200 h1 plain",
                               "any_under 200 h1 plain", "get 405 h1 plain", "info 405 h1 plain",
                               "unmatched 404 h1 plain"}));
}

// Paths a literal pattern spells out are looked up by the path (Router::literal_routes_); the
// answer must be the one trying every pattern gives: the literal pattern over any with
// parameters (whichever came first), at one pattern the first endpoint that takes the method,
// else the first one's refusal; routes taken over with Include() too.
TEST(Router, LiteralPathsChooseAsTheScanDoes) {
  Router api;
  api.Add(Endpoint{"any_v2", {"POST"}, "/v2/{op}", Echo("any_v2")});
  api.Add(Endpoint{"read_get", {"GET"}, "/v2/snapshot_read", Echo("read_get"), nullptr, "First."});
  api.Add(Endpoint{"read_post", {"POST"}, "/v2/snapshot_read", Echo("read_post"), nullptr, "2nd."});
  api.Add(Endpoint{"root", {"GET"}, "/", Echo("root")});
  Router router;
  router.Include(api);
  router.Add(Endpoint{"read_post_later", {"POST"}, "/v2/snapshot_read", Echo("later")});

  EXPECT_EQ(Call(router, "POST", "/v2/snapshot_read").body, "read_post");
  EXPECT_EQ(Call(router, "POST", "//v2/snapshot_read/").body, "read_post");
  EXPECT_EQ(Call(router, "GET", "/v2/snapshot_read").body, "read_get");
  const HttpResponse r = Call(router, "DELETE", "/v2/snapshot_read");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "First.");
  EXPECT_EQ(Call(router, "POST", "/v2/watch").body, "any_v2 op=watch");
  EXPECT_EQ(Call(router, "GET", "/").body, "root");
  EXPECT_EQ(Call(router, "GET", "").body, "root");
  EXPECT_EQ(Call(router, "GET", "/v2/snapshot_read/more").status, 404);
}

TEST(Router, RefuseHandlerAnswersOtherMethods) {
  Router router;
  Endpoint e{"op", {"POST"}, "/q/{op}", Echo("op")};
  e.refuse = [](HttpRequest req, Responder respond) {
    HttpResponse r;
    r.status = 405;
    r.body = "refused " + req.method + " " + std::string(req.Param("op"));
    respond(std::move(r));
  };
  router.Add(std::move(e));
  EXPECT_EQ(Call(router, "POST", "/q/pull").body, "op op=pull");
  const HttpResponse r = Call(router, "GET", "/q/pull");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.body, "refused GET pull");
}

// A handler that throws used to leave its request without an answer (the catch-all only
// logged): the client waited until its own timeout.
TEST(Router, ThrowingHandlerIsAnsweredWith500) {
  Router router;
  RecordingObserver observer;
  router.SetObserver(&observer);
  router.Add(Endpoint{
      "boom", {}, "/boom", [](HttpRequest, Responder) { throw std::runtime_error("a bug"); }});
  router.Add(Endpoint{"late", {}, "/late", [](HttpRequest, Responder respond) {
                        HttpResponse ok;
                        ok.body = "answered";
                        respond(std::move(ok));
                        throw std::runtime_error("a bug after the answer");
                      }});
  int answers = 0;
  HttpResponse out;
  HttpRequest req;
  req.method = "GET";
  req.path = "/boom";
  router.Handle(req, [&](HttpResponse r) {
    ++answers;
    out = std::move(r);
  });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(out.status, 500);
  EXPECT_EQ(out.body, "An internal server error occurred.");
  // An answer given before the throw stands, and is the only one.
  req.path = "/late";
  answers = 0;
  router.Handle(req, [&](HttpResponse r) {
    ++answers;
    out = std::move(r);
  });
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.body, "answered");
  EXPECT_EQ(observer.seen, (std::vector<std::string>{"boom 500 h1 plain", "late 200 h1 plain"}));
}

// The response-upgrade seam: a channel answer reaches a session that offered the switch; to a
// request that cannot switch, the router answers 500 instead of leaving the client waiting.
TEST(Router, ChannelAnswerNeedsAnUpgradableRequest) {
  class NullChannel : public Channel {
   public:
    void Open(std::shared_ptr<ChannelPeer>) override {}
    void OnMessage(ChannelMessage) override {}
    void OnClosed(uint16_t) override {}
  };
  Router router;
  // A well-behaved route checks `upgrade` first; this one asks for a channel either way.
  router.Add(Endpoint{"watch_channel", {"GET"}, "/v4/watch", [](HttpRequest, Responder respond) {
                        respond(UpgradeResponse(std::make_shared<NullChannel>()));
                      }});
  HttpRequest req;
  req.method = "GET";
  req.path = "/v4/watch";
  req.upgrade = "websocket";
  HttpResponse out;
  router.Handle(req, [&](HttpResponse r) { out = std::move(r); });
  EXPECT_EQ(out.status, 101);
  EXPECT_NE(out.channel, nullptr);
  req.upgrade.clear();
  router.Handle(req, [&](HttpResponse r) { out = std::move(r); });
  EXPECT_EQ(out.status, 500);
  EXPECT_EQ(out.channel, nullptr);
}

// --allowed-host: which Host values a metadata answer may build endpoint URLs from.
// The flat header store of a request: fields come back in order, past the room reserved first
// (12 fields, 384 bytes), from either constructor, and Header() finds the first of a name.
TEST(RequestHeaders, KeepOrderAndBytesPastTheFirstReservation) {
  RequestHeaders h;
  EXPECT_TRUE(h.empty());
  HeaderList expected;
  for (int i = 0; i < 40; ++i) {
    std::string name = "x-field-" + std::to_string(i);
    std::string value(static_cast<size_t>(i) * 7, static_cast<char>('a' + i % 26));
    h.emplace_back(name, value);
    expected.emplace_back(name, value);
  }
  h.emplace_back("x-field-3", "second");
  expected.emplace_back("x-field-3", "second");
  h.emplace_back("", "");
  expected.emplace_back("", "");
  ASSERT_EQ(h.size(), expected.size());
  size_t i = 0;
  for (const auto& [name, value] : h) {
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(name, expected[i].first) << i;
    EXPECT_EQ(value, expected[i].second) << i;
    EXPECT_EQ(h[i].first, expected[i].first);
    ++i;
  }
  EXPECT_EQ(i, expected.size());
  RequestHeaders copy(expected);
  ASSERT_EQ(copy.size(), h.size());
  for (size_t j = 0; j < h.size(); ++j) EXPECT_EQ(copy[j], h[j]) << j;

  HttpRequest req;
  req.headers = {{"authorization", "Bearer t"},
                 {"content-type", "application/x-protobuf"},
                 {"authorization", "Bearer other"}};
  EXPECT_EQ(req.Header("authorization"), "Bearer t");
  EXPECT_EQ(req.Header("content-type"), "application/x-protobuf");
  EXPECT_TRUE(req.HasHeader("content-type"));
  EXPECT_FALSE(req.HasHeader("accept"));
  EXPECT_EQ(req.Header("accept"), "");
  HttpRequest moved = std::move(req);
  EXPECT_EQ(moved.Header("authorization"), "Bearer t");
}

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
