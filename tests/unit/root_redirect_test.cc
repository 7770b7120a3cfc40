// service::RootHandler: a browser's GET / (Accept names text/html) goes to the console with a
// 302; everything else at `/` (the metadata exchange POST, curl's GET with */*, a console that is
// off) reaches the wrapped handler unchanged.
#include "service/admin/root_redirect.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace kvc::service {
namespace {

// Answers 405 for anything but POST, as KvService does at `/`, and counts the calls.
class FakeKv : public Handler {
 public:
  void Handle(HttpRequest request, Responder respond) override {
    ++calls;
    HttpResponse r;
    r.status = request.method == "POST" ? 200 : 405;
    r.body = request.method == "POST" ? "metadata" : "KV Connect uses POST";
    respond(std::move(r));
  }
  int calls = 0;
};

HttpResponse Ask(Handler& h, std::string method, std::optional<std::string> accept) {
  HttpRequest req;
  req.method = std::move(method);
  req.path = "/";
  if (accept) req.headers.emplace_back("accept", *accept);
  HttpResponse out;
  h.Handle(std::move(req), [&out](HttpResponse r) { out = std::move(r); });
  return out;
}

std::string Location(const HttpResponse& r) {
  for (const auto& [k, v] : r.headers) {
    if (k == "location") return v;
  }
  return "";
}

// What browsers send on navigation, and what they do not.
TEST(RootHandler, AcceptsHtml) {
  EXPECT_TRUE(RootHandler::AcceptsHtml(
      "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"));
  EXPECT_TRUE(RootHandler::AcceptsHtml("TEXT/HTML"));
  EXPECT_TRUE(RootHandler::AcceptsHtml("application/json, text/html ; q=0.5"));
  EXPECT_TRUE(RootHandler::AcceptsHtml("text/html;level=1;q=1.0"));
  EXPECT_FALSE(RootHandler::AcceptsHtml(""));
  EXPECT_FALSE(RootHandler::AcceptsHtml("*/*"));
  EXPECT_FALSE(RootHandler::AcceptsHtml("text/*"));
  EXPECT_FALSE(RootHandler::AcceptsHtml("application/json"));
  EXPECT_FALSE(RootHandler::AcceptsHtml("text/htmlx"));
  EXPECT_FALSE(RootHandler::AcceptsHtml("text/html;q=0"));
  EXPECT_FALSE(RootHandler::AcceptsHtml("text/html; q=0.000, application/json"));
}

TEST(RootHandler, BrowsersGoToTheConsole) {
  FakeKv kv;
  RootHandler root(&kv, "/console");
  const std::string browser = "text/html,application/xhtml+xml,*/*;q=0.8";
  HttpResponse r = Ask(root, "GET", browser);
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(Location(r), "/console");
  r = Ask(root, "HEAD", browser);
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(Location(r), "/console");
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(kv.calls, 0);
}

TEST(RootHandler, EverythingElseReachesKvConnect) {
  FakeKv kv;
  RootHandler root(&kv, "/console");
  // The metadata exchange, even from a client that would take HTML.
  EXPECT_EQ(Ask(root, "POST", "text/html").status, 200);
  EXPECT_EQ(Ask(root, "POST", std::nullopt).status, 200);
  // curl, fetch() and other non-browsers keep today's answer.
  EXPECT_EQ(Ask(root, "GET", "*/*").status, 405);
  EXPECT_EQ(Ask(root, "GET", std::nullopt).status, 405);
  EXPECT_EQ(Ask(root, "GET", "text/html;q=0").status, 405);
  EXPECT_EQ(Ask(root, "PUT", "text/html").status, 405);
  EXPECT_EQ(kv.calls, 6);
}

TEST(RootHandler, NoRedirectWhenTheConsoleIsOff) {
  FakeKv kv;
  RootHandler root(&kv, "");
  const HttpResponse r = Ask(root, "GET", "text/html");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(Location(r), "");
  EXPECT_EQ(kv.calls, 1);
}

}  // namespace
}  // namespace kvc::service
