// The metadata exchange's URL shapes through `serve`'s own router (cli::Application, as the binary
// wires it): /databases/NAME (what Deno POSTs with DENO_KV_PATH_PREFIX=https://host/databases/),
// /databases/NAME/connect, /v2/databases/NAME (the same with .../v2/databases/) and Deploy's
// /v2/databases/ID/connect answer exactly like each other, with the same errors and the one
// metrics route "connect"; the routes beside them (queue API, data path, admin API) keep routing
// as before; and the exchange answers from the first connection after Start(). The admin and
// queue APIs refuse in the order they always did (token, database, then method or path), and
// each endpoint counts under its own metrics route.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/application.h"
#include "common/random.h"
#include "service/admin/admin_ops.h"
#include "storage/storage.h"
#include "testutil/http_client.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using testutil::Headers;
using testutil::HttpResponse;

constexpr char kBootstrap[] = "routes-bootstrap-token-0123456789";
constexpr char kBody[] = R"({"supportedVersions":[1,2,3]})";

std::string Fixture(const std::string& name) {
  std::ifstream in(fs::path(KVC_FIXTURES_DIR) / "requests" / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class MetadataRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-routes-" + HexEncode(RandomBytes(6)));
    {  // as `kvconnect db create` and `token create` do, before the server starts
      storage::StorageOptions o;
      o.location = dir_.string();
      auto st = storage::OpenStorage(o);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      service::AdminOps ops(&(*st)->catalog(), st->get());
      for (const char* name : {"sales", "hr"}) {
        auto db = ops.CreateDatabase(name);
        ASSERT_TRUE(db.ok()) << db.status().ToString();
        ids_[name] = db->record.id;
      }
      service::TokenRequest req;
      req.databases = {"sales"};
      req.scope = "write";
      auto t = ops.CreateToken(req);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      sales_token_ = t->token;
    }
    cli::ServeConfig c;
    c.data_dir = dir_.string();
    c.access_token = kBootstrap;
    c.net.host = "127.0.0.1";
    c.net.port = 0;
    c.sync = "normal";
    auto app = cli::Application::Open(c);
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    port_ = app_->listeners().main.port;
  }
  void TearDown() override {
    app_.reset();
    fs::remove_all(dir_);
  }

  static Headers Auth(const std::string& token) {
    return {{"authorization", "Bearer " + token}, {"content-type", "application/json"}};
  }
  // Every shape of the metadata exchange for `name_or_id`.
  static std::vector<std::string> Shapes(const std::string& name_or_id) {
    return {"/databases/" + name_or_id, "/databases/" + name_or_id + "/connect",
            "/v2/databases/" + name_or_id, "/v2/databases/" + name_or_id + "/connect"};
  }
  // The exchange on both protocols; the answers must agree on status and text.
  HttpResponse Both(const std::string& method, const std::string& path, const std::string& token) {
    auto h1 = testutil::Http1Client::Connect("127.0.0.1", port_);
    auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
    EXPECT_TRUE(h1.ok() && h2.ok());
    if (!h1.ok() || !h2.ok()) return {};
    auto a = (*h1)->Request(method, path, Auth(token), method == "POST" ? kBody : "");
    auto b = (*h2)->Request(method, path, Auth(token), method == "POST" ? kBody : "");
    EXPECT_TRUE(a.ok() && b.ok()) << path;
    if (!a.ok() || !b.ok()) return {};
    EXPECT_EQ(a->status, b->status) << method << " " << path;
    if (a->status != 200) {
      EXPECT_EQ(a->body, b->body) << method << " " << path;
    }
    return *b;
  }
  static std::string DatabaseId(const HttpResponse& r) {
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    if (!d.IsObject() || !d.HasMember("databaseId")) return "";
    return d["databaseId"].GetString();
  }
  // The sum of the kvconnect_http_requests_total samples with route="<route>".
  double RouteCount(const std::string& route) {
    auto c = testutil::Http1Client::Connect("127.0.0.1", port_);
    EXPECT_TRUE(c.ok());
    auto r = (*c)->Get("/metrics", {{"authorization", std::string("Bearer ") + kBootstrap}});
    EXPECT_TRUE(r.ok() && r->status == 200);
    double sum = 0;
    const std::string needle = "route=\"" + route + "\"";
    size_t at = 0;
    while (r.ok() && at < r->body.size()) {
      const size_t end = std::min(r->body.find('\n', at), r->body.size());
      const std::string line = r->body.substr(at, end - at);
      at = end + 1;
      if (line.rfind("kvconnect_http_requests_total{", 0) == 0 &&
          line.find(needle) != std::string::npos) {
        sum += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return sum;
  }

  fs::path dir_;
  std::map<std::string, std::string> ids_;
  std::string sales_token_;
  std::unique_ptr<cli::Application> app_;
  uint16_t port_ = 0;
};

// The very first request after Start() is answered 200 by a catalog token: the catalog and the
// databases are loaded before the listener accepts anything.
TEST_F(MetadataRoutesTest, FirstExchangeAfterStartIsAnswered) {
  auto c = testutil::Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Post("/databases/sales", Auth(sales_token_), kBody);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(DatabaseId(*r), ids_["sales"]);
}

TEST_F(MetadataRoutesTest, EveryShapeAnswersAlikeByNameAndById) {
  const double connect_before = RouteCount("connect");
  const double unmatched_before = RouteCount("unmatched");
  int requests = 0;
  for (const std::string& key : {std::string("sales"), ids_["sales"]}) {
    for (const std::string& path : Shapes(key)) {
      for (const std::string& variant : {path, path + "/", "/" + path}) {  // as the router folds
        const HttpResponse r = Both("POST", variant, sales_token_);
        requests += 2;
        EXPECT_EQ(r.status, 200) << variant << ": " << r.body;
        EXPECT_EQ(DatabaseId(r), ids_["sales"]) << variant;
        EXPECT_EQ(r.headers.at("content-type"), "application/json");
      }
    }
  }
  struct Case {
    std::string database;
    std::string token;
    int status;
    std::string text;
  } cases[] = {
      {"nope", kBootstrap, 404, "Database 'nope' not found."},
      {"hr", "", 403, "This access token is not valid for database 'hr'."},
      {"sales", "wrong-token-0123456789", 401, "Invalid access token."},
  };
  for (Case& tc : cases) {
    if (tc.token.empty()) tc.token = sales_token_;
    for (const std::string& path : Shapes(tc.database)) {
      const HttpResponse r = Both("POST", path, tc.token);
      requests += 2;
      EXPECT_EQ(r.status, tc.status) << path;
      EXPECT_EQ(r.body, tc.text) << path;
    }
  }
  for (const std::string& path : Shapes("sales")) {
    for (const char* method : {"GET", "PUT", "DELETE"}) {
      const HttpResponse r = Both(method, path, sales_token_);
      requests += 2;
      EXPECT_EQ(r.status, 405) << method << " " << path;
      EXPECT_EQ(r.body, "Method not allowed; KV Connect uses POST.") << method << " " << path;
    }
  }
  // One metrics route for every shape, as /databases/NAME/connect always had.
  EXPECT_EQ(RouteCount("connect") - connect_before, requests);
  EXPECT_EQ(RouteCount("unmatched") - unmatched_before, 0);
}

TEST_F(MetadataRoutesTest, OtherShapesAreNotTheExchange) {
  for (const char* path :
       {"/databases", "/v2/databases", "/databases/sales/extra", "/databases/sales/connect/extra",
        "/v2/databases/sales/extra", "/v2/databases/x/y/connect", "/v2/databases/sales/connect/x",
        "/databases/sales/queue/v1", "/v2/databases/sales/queue/v1/pull"}) {
    const HttpResponse r = Both("POST", path, kBootstrap);
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    EXPECT_EQ(r.body, "Resource not found.") << path;
  }
}

TEST_F(MetadataRoutesTest, NeighbouringRoutesKeepRouting) {
  // The queue API under /databases/NAME/queue/v1/ (its own texts).
  HttpResponse r = Both("POST", "/databases/sales/queue/v1/nope", kBootstrap);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("No queue API resource at"), std::string::npos) << r.body;
  r = Both("POST", "/databases/nope/queue/v1/pull", kBootstrap);
  EXPECT_NE(r.body.find("Database 'nope' not found."), std::string::npos) << r.body;
  // The data path under /v2/, with a token from a /v2/databases/ID/connect exchange.
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  auto m = (*h2)->Post("/v2/databases/" + ids_["sales"] + "/connect", Auth(sales_token_), kBody);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->status, 200) << m->body;
  rapidjson::Document d;
  d.Parse(m->body.c_str());
  const Headers data = {{"authorization", std::string("Bearer ") + d["token"].GetString()},
                        {"x-denokv-version", "3"},
                        {"x-denokv-database-id", ids_["sales"]}};
  auto read = (*h2)->Post("/v2/snapshot_read", data, Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->status, 200) << read->body;
  auto other = (*h2)->Post("/v2/nope", data, "");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 404);
  // The admin API under /admin/v1/.
  auto admin = (*h2)->Request("GET", "/admin/v1/databases",
                              {{"authorization", std::string("Bearer ") + kBootstrap}}, "");
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin->status, 200) << admin->body;
  EXPECT_NE(admin->body.find("\"sales\""), std::string::npos);
}

// One request over HTTP/1.1 (no token when `token` is empty).
struct Answer {
  int status = 0;
  std::string body;
};

TEST_F(MetadataRoutesTest, JsonApisRefuseInTheirOrderAndCountPerEndpoint) {
  auto call = [&](const std::string& method, const std::string& path, const std::string& token,
                  const std::string& body = "") {
    auto c = testutil::Http1Client::Connect("127.0.0.1", port_);
    EXPECT_TRUE(c.ok());
    Headers h = {{"content-type", "application/json"}};
    if (!token.empty()) h.push_back({"authorization", "Bearer " + token});
    auto r = (*c)->Request(method, path, h, body);
    EXPECT_TRUE(r.ok()) << path;
    return r.ok() ? Answer{r->status, r->body} : Answer{};
  };
  const std::vector<std::string> routes = {
      "admin_entries_get", "admin", "queue", "queue_pull", "queue_stream", "admin_databases_list"};
  std::map<std::string, double> before;
  for (const std::string& r : routes) before[r] = RouteCount(r);
  const std::string get = "/admin/v1/databases/sales/entries/get";
  const std::string key = R"({"key":[{"type":"string","value":"nothing"}]})";
  struct Case {
    std::string method, path, token;
    int status;
    std::string text;  // in the body
  } cases[] = {
      {"POST", get, "", 401, "Malformed authorization header."},
      {"GET", "/admin/v1/databases/nope/entries/get", kBootstrap, 404,
       "Database 'nope' not found."},
      {"GET", get, kBootstrap, 405, "Method GET is not allowed here; use POST with a JSON body."},
      {"POST", "/admin/v1/databases/sales/nope", kBootstrap, 404,
       "No admin API resource at /admin/v1/databases/sales/nope."},
      {"GET", "/admin/v1/databases/sales/nope", kBootstrap, 405, "use POST with a JSON body."},
      {"PUT", "/admin/v1/databases", kBootstrap, 405, "use GET or POST."},
      {"PUT", "/admin/v1/databases/sales", kBootstrap, 405, "use GET, PATCH or DELETE."},
      {"GET", "/admin/v1/tokens/x", kBootstrap, 405, "use DELETE."},
      {"GET", "/admin/v1/nothing", kBootstrap, 404, "No admin API resource at /admin/v1/nothing."},
      {"PUT", "/admin/v1/databases/sales/queue", kBootstrap, 405, "use GET."},
      {"GET", "/admin/v1/databases", sales_token_, 403, "not an admin token"},
      {"POST", "/queue/v1/a/b", "", 404, "No queue API resource at /queue/v1/a/b."},
      {"POST", "/queue/v1/nope", "", 401, "Malformed authorization header."},
      {"POST", "/queue/v1/nope", kBootstrap, 404, "No queue API resource at /queue/v1/nope."},
      {"GET", "/queue/v1/pull", kBootstrap, 405, "use POST with a JSON body."},
      {"POST", "/queue/v1/stream", kBootstrap, 405, "use GET."},
  };
  for (const Case& tc : cases) {
    const Answer a = call(tc.method, tc.path, tc.token);
    EXPECT_EQ(a.status, tc.status) << tc.method << " " << tc.path << ": " << a.body;
    EXPECT_NE(a.body.find(tc.text), std::string::npos)
        << tc.method << " " << tc.path << ": " << a.body;
  }
  const Answer got = call("POST", get, kBootstrap, key);
  EXPECT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body, R"({"entry":null})");
  // Each endpoint under its own route; paths no endpoint takes under the API's catch-all.
  EXPECT_EQ(RouteCount("admin_entries_get") - before["admin_entries_get"], 4);
  EXPECT_EQ(RouteCount("admin") - before["admin"], 3);
  EXPECT_EQ(RouteCount("queue") - before["queue"], 3);
  EXPECT_EQ(RouteCount("queue_pull") - before["queue_pull"], 1);
  EXPECT_EQ(RouteCount("queue_stream") - before["queue_stream"], 1);
  EXPECT_EQ(RouteCount("admin_databases_list") - before["admin_databases_list"], 2);
}

}  // namespace
}  // namespace kvc
