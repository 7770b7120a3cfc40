// Many databases and scoped access tokens through the real HTTP stack (in-process server,
// catalog and directory as `serve` wires them): isolation, scopes, revocation and expiry,
// another database's tokens, databases created and deleted while serving, rate limits.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "auth/tokens.h"
#include "backup/destinations.h"
#include "common/clock.h"
#include "common/random.h"
#include "datapath.pb.h"
#include "net/server.h"
#include "service/admin/admin_api.h"
#include "service/admin/admin_ops.h"
#include "service/directory.h"
#include "service/kvconnect/kv_service.h"
#include "service/ops/operator_gate.h"
#include "storage/storage.h"
#include "testutil/http_client.h"
#include "testutil/wait.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
namespace pb = com::deno::kv::datapath;
using testutil::Headers;
using testutil::Http2Client;

constexpr char kBootstrap[] = "bootstrap-token-0123456789";

std::string Fixture(const std::string& name) {
  std::ifstream in(fs::path(KVC_FIXTURES_DIR) / "requests" / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Session {
  std::string token;
  std::string database_id;
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-sec-" + HexEncode(RandomBytes(6)));
    storage::StorageOptions sto;
    sto.location = dir_.string();
    auto st = storage::OpenStorage(sto);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    storage_ = std::move(*st);
    admin_ = std::make_unique<service::AdminOps>(&storage_->catalog(), storage_.get());
    ASSERT_TRUE(admin_->CreateDatabase("sales").ok());
    ASSERT_TRUE(admin_->CreateDatabase("hr").ok());
    service::DirectoryOptions dopt;
    dopt.poll_ms = 100;
    TuneDirectory(dopt);
    directory_ = std::make_unique<service::Directory>(
        &storage_->catalog(),
        [s = storage_.get()](const storage::DatabaseRecord& rec) { return s->OpenBackend(rec); },
        dopt);
    ASSERT_TRUE(directory_->Start().ok());
    StartService(kBootstrap);
  }
  // The service and its listener with `bootstrap` as the bootstrap token (the same server
  // secret each time, as a restart of `serve` on one data directory has).
  void StartService(const std::string& bootstrap) {
    service::ServiceOptions so;
    so.auth.bootstrap_token = bootstrap;
    so.auth.rate_limit_rps = 0;
    TuneService(so);
    body_pool_ = std::make_unique<service::WorkPool>(so.body_pool);
    service_ = std::make_unique<service::KvService>(so, std::string(64, 'k'), directory_.get(),
                                                    body_pool_.get());
    net::ServerOptions no;
    no.port = 0;
    server_ = std::make_unique<net::Server>(no, service_.get());
    ASSERT_TRUE(server_->Start().ok());
    auto c = Http2Client::Connect("127.0.0.1", server_->bound_port());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  // As a restart with another --access-token: the catalog and the secret stay.
  void RestartService(const std::string& bootstrap) {
    client_.reset();
    (void)server_->Stop(std::chrono::milliseconds(2000));
    server_.reset();
    service_.reset();
    StartService(bootstrap);
  }
  void TearDown() override {
    client_.reset();
    (void)server_->Stop(std::chrono::milliseconds(2000));
    directory_->Stop();
    fs::remove_all(dir_);
  }
  virtual void TuneService(service::ServiceOptions&) {}
  virtual void TuneDirectory(service::DirectoryOptions&) {}

  // Creates an access token the way `kvconnect token create` does.
  std::string MakeToken(const std::string& db, auth::Scope scope, int64_t expires_ms = 0,
                        double rate = -1) {
    auto rec = storage_->catalog().FindDatabase(db);
    EXPECT_TRUE(rec.ok());
    auto t = auth::GenerateAccessToken();
    storage::AccessTokenRecord r;
    r.id = t.id;
    r.database_ids = {rec->id};
    r.scope = static_cast<int>(scope);
    r.hash = t.hash;
    r.created_ms = NowUnixMs();
    r.expires_ms = expires_ms;
    r.rate_limit = rate;
    EXPECT_TRUE(storage_->catalog().AddToken(r).ok());
    return t.token;
  }

  // Creates an access token for several databases (by name), or for all of them.
  std::string MakeTokenOf(const std::vector<std::string>& dbs, bool all, auth::Scope scope,
                          double rate = -1) {
    auto t = auth::GenerateAccessToken();
    storage::AccessTokenRecord r;
    r.id = t.id;
    for (const std::string& db : dbs) {
      auto rec = storage_->catalog().FindDatabase(db);
      EXPECT_TRUE(rec.ok());
      if (rec.ok()) r.database_ids.push_back(rec->id);
    }
    r.all_databases = all;
    r.scope = static_cast<int>(scope);
    r.hash = t.hash;
    r.created_ms = NowUnixMs();
    r.rate_limit = rate;
    EXPECT_TRUE(storage_->catalog().AddToken(r).ok());
    return t.token;
  }
  // Who `token` is, as the JSON APIs authenticate it.
  Result<service::Principal> Who(const std::string& token) {
    auto done = std::make_shared<std::promise<Result<service::Principal>>>();
    auto answer = done->get_future();
    service_->authenticator()->AuthenticateThen(
        token, [done](Result<service::Principal> who, const auto&) { done->set_value(who); });
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return answer.get();
  }

  testutil::HttpResponse Connect(const std::string& path, const std::string& access_token) {
    auto r = client_->Post(
        path, {{"authorization", "Bearer " + access_token}, {"content-type", "application/json"}},
        R"({"supportedVersions":[2,3]})");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : testutil::HttpResponse{};
  }
  Session Exchange(const std::string& path, const std::string& access_token) {
    auto r = Connect(path, access_token);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    rapidjson::Document d;
    d.Parse(r.body.c_str());
    if (!d.IsObject() || !d.HasMember("token")) return {};
    return {d["token"].GetString(), d["databaseId"].GetString()};
  }
  testutil::HttpResponse Data(const Session& s, const std::string& method, const std::string& body,
                              const std::string& db_header = "") {
    auto r =
        client_->Post("/v2/" + method,
                      {{"authorization", "Bearer " + s.token},
                       {"x-denokv-version", "3"},
                       {"x-denokv-database-id", db_header.empty() ? s.database_id : db_header}},
                      body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : testutil::HttpResponse{};
  }
  // Number of entries the fixture's point read finds.
  int ReadCount(const Session& s) {
    auto r = Data(s, "snapshot_read", Fixture("snapshot_read_get.bin"));
    EXPECT_EQ(r.status, 200) << r.body;
    pb::SnapshotReadOutput out;
    EXPECT_TRUE(out.ParseFromString(r.body));
    return out.ranges_size() ? out.ranges(0).values_size() : -1;
  }
  // Polls until `pred` or testutil::kWaitTimeout.
  template <typename F>
  bool Eventually(F pred) {
    return testutil::WaitFor(pred, testutil::kWaitTimeout, std::chrono::milliseconds(50));
  }

  fs::path dir_;
  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<service::AdminOps> admin_;
  std::unique_ptr<service::Directory> directory_;
  std::unique_ptr<service::WorkPool> body_pool_;
  std::unique_ptr<service::KvService> service_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<Http2Client> client_;
};

// 150 KB of '[' (and deep valid JSON) in a metadata exchange, before any token check, over
// HTTP/2 and HTTP/1.1: a 400 with a readable text, and the server keeps serving. (It used to
// overflow the I/O thread's stack in the recursive JSON parse.)
TEST_F(SecurityTest, DeeplyNestedMetadataBodiesAreRefused) {
  const std::string brackets(150000, '[');
  const std::string valid = std::string(80000, '[') + std::string(80000, ']');
  const Headers headers = {{"content-type", "application/json"}};
  for (const std::string* body : {&brackets, &valid}) {
    for (const char* path : {"/", "/databases/sales/connect"}) {
      auto h2 = client_->Post(path, headers, *body);
      ASSERT_TRUE(h2.ok()) << h2.status().ToString();
      EXPECT_EQ(h2->status, 400);
      EXPECT_EQ(h2->body, "The metadata exchange request body is nested deeper than 64 levels.");
      auto h1 = testutil::Http1Client::Connect("127.0.0.1", server_->bound_port());
      ASSERT_TRUE(h1.ok());
      auto r = (*h1)->Post(path, headers, *body);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, 400);
      EXPECT_EQ(r->body, h2->body);
    }
  }
  const Session s = Exchange("/", kBootstrap);
  EXPECT_GE(ReadCount(s), 0);
}

TEST_F(SecurityTest, DatabasesAreIsolated) {
  const Session sales =
      Exchange("/databases/sales/connect", MakeToken("sales", auth::Scope::kWrite));
  const Session hr = Exchange("/databases/hr/connect", MakeToken("hr", auth::Scope::kWrite));
  const Session def = Exchange("/", kBootstrap);
  ASSERT_FALSE(sales.token.empty());
  ASSERT_FALSE(hr.token.empty());
  EXPECT_NE(sales.database_id, hr.database_id);
  EXPECT_NE(sales.database_id, def.database_id);
  auto w = Data(sales, "atomic_write", Fixture("atomic_write_set.bin"));
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(ReadCount(sales), 1);
  EXPECT_EQ(ReadCount(hr), 0);
  EXPECT_EQ(ReadCount(def), 0);
  // The bootstrap token reaches every database, by name or by id.
  const Session boot_sales = Exchange("/databases/" + sales.database_id + "/connect", kBootstrap);
  EXPECT_EQ(boot_sales.database_id, sales.database_id);
  EXPECT_EQ(ReadCount(boot_sales), 1);
}

TEST_F(SecurityTest, ForeignTokensAreRefused) {
  const std::string sales_token = MakeToken("sales", auth::Scope::kAdmin);
  auto r = Connect("/databases/hr/connect", sales_token);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.body, "This access token is not valid for database 'hr'.");
  r = Connect("/", sales_token);  // "/" is the default database
  EXPECT_EQ(r.status, 403);
  r = Connect("/databases/nope/connect", sales_token);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "Database 'nope' not found.");
  // A data-path token of sales sent to hr's id.
  const Session sales = Exchange("/databases/sales/connect", sales_token);
  const Session hr = Exchange("/databases/hr/connect", kBootstrap);
  auto d = Data(sales, "snapshot_read", Fixture("snapshot_read_get.bin"), hr.database_id);
  EXPECT_EQ(d.status, 401);
  EXPECT_NE(d.body.find("authorization"), std::string::npos) << d.body;
  // Unknown and tampered access tokens.
  std::string tampered = sales_token;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  for (const std::string& bad : {tampered, std::string("kvt_nope"), std::string(kBootstrap) + "x",
                                 auth::GenerateAccessToken().token}) {
    r = Connect("/databases/sales/connect", bad);
    EXPECT_EQ(r.status, 401) << bad;
    EXPECT_EQ(r.body, "Invalid access token.");
  }
}

TEST_F(SecurityTest, ReadScopeCannotWrite) {
  const Session ro = Exchange("/databases/sales/connect", MakeToken("sales", auth::Scope::kRead));
  auto w = Data(ro, "atomic_write", Fixture("atomic_write_set.bin"));
  EXPECT_EQ(w.status, 403);
  EXPECT_EQ(w.body, "This access token is read-only; writes are not permitted.");
  EXPECT_EQ(ReadCount(ro), 0);  // reading works, and nothing was written
  // Watching is reading: allowed.
  pb::Watch req;
  req.add_keys()->set_key(
      std::string("\x02"
                  "a\x00",
                  3));
  auto watch = client_->OpenStream("/v2/watch",
                                   {{"authorization", "Bearer " + ro.token},
                                    {"x-denokv-version", "3"},
                                    {"x-denokv-database-id", ro.database_id}},
                                   req.SerializeAsString());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_EQ((*watch)->status(), 200);
}

TEST_F(SecurityTest, RevocationReachesDataPathTokens) {
  const std::string token = MakeToken("sales", auth::Scope::kWrite);
  const Session s = Exchange("/databases/sales/connect", token);
  ASSERT_EQ(ReadCount(s), 0);
  ASSERT_TRUE(storage_->catalog().RevokeToken(auth::AccessTokenId(token), NowUnixMs()).ok());
  EXPECT_TRUE(Eventually(
      [&] { return Data(s, "snapshot_read", Fixture("snapshot_read_get.bin")).status == 401; }));
  auto d = Data(s, "atomic_write", Fixture("atomic_write_set.bin"));
  EXPECT_EQ(d.status, 401);
  EXPECT_NE(d.body.find("revoked"), std::string::npos) << d.body;
  auto r = Connect("/databases/sales/connect", token);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "Invalid access token: it has been revoked.");
  // Other tokens are unaffected.
  EXPECT_EQ(ReadCount(Exchange("/databases/sales/connect", kBootstrap)), 0);
}

// Data-path tokens minted through the bootstrap token are bound to it: a restart with another
// bootstrap token refuses them (401 with a text about authorization), while the new bootstrap
// token and catalog tokens work. A format-1 bootstrap data-path token (no fingerprint, as
// servers before this minted them) is refused too.
TEST_F(SecurityTest, RotatedBootstrapTokenRevokesItsDataPathTokens) {
  const Session old_boot = Exchange("/databases/sales/connect", kBootstrap);
  const Session catalog =
      Exchange("/databases/sales/connect", MakeToken("sales", auth::Scope::kWrite));
  ASSERT_EQ(ReadCount(old_boot), 0);
  ASSERT_EQ(ReadCount(catalog), 0);
  // Same token again after a restart: still valid.
  RestartService(kBootstrap);
  ASSERT_EQ(ReadCount(old_boot), 0);

  const std::string rotated = "rotated-bootstrap-token-9876543210";
  RestartService(rotated);
  for (const char* method : {"snapshot_read", "atomic_write"}) {
    auto d = Data(old_boot, method,
                  Fixture(std::string(method) == "snapshot_read" ? "snapshot_read_get.bin"
                                                                 : "atomic_write_set.bin"));
    EXPECT_EQ(d.status, 401) << method << ": " << d.body;
    EXPECT_NE(d.body.find("authorization token is no longer valid"), std::string::npos) << d.body;
    EXPECT_NE(d.body.find("bootstrap access token"), std::string::npos) << d.body;
  }
  EXPECT_EQ(Connect("/databases/sales/connect", kBootstrap).status, 401);
  EXPECT_EQ(ReadCount(Exchange("/databases/sales/connect", rotated)), 0);
  EXPECT_EQ(ReadCount(catalog), 0);  // catalog tokens are revoked one by one, not by this

  // A format-1 token of the bootstrap token, signed with the server secret.
  const std::string secret(64, 'k');
  const std::string body = Base64UrlEncode("1|" + old_boot.database_id + "|3|bootstrap|" +
                                           std::to_string(NowUnixMs() + 600000) + "|0011");
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &len);
  const Session v1{
      "kvc1." + body + "." + Base64UrlEncode(std::string(reinterpret_cast<char*>(mac), len)),
      old_boot.database_id};
  auto d = Data(v1, "snapshot_read", Fixture("snapshot_read_get.bin"));
  EXPECT_EQ(d.status, 401) << d.body;
  EXPECT_NE(d.body.find("authorization"), std::string::npos) << d.body;
}

// On-demand backups through the admin API (in-process): only to destinations the operator
// allowed; a token bound to one database only to the default; relative paths and the data
// directory refused with 400; one backup per database per interval (503 + Retry-After).
TEST_F(SecurityTest, AdminBackupGoesOnlyWhereTheOperatorAllowed) {
  const fs::path dests = fs::temp_directory_path() / ("kvc-sec-dest-" + HexEncode(RandomBytes(6)));
  const std::string def = (dests / "default").string();
  const std::string other = (dests / "other").string();
  const std::string stray = (dests / "stray").string();
  auto allowed = backup::BackupDestinations::Create(def, {other}, dir_.string());
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  service::AdminApiOptions ao;
  ao.backup_min_interval_ms = 600000;
  auto api = std::make_unique<service::AdminApi>(ao, directory_.get(), service_->authenticator(),
                                                 admin_.get(), nullptr);
  api->SetStorage(storage_.get());
  api->SetBackupDestinations(*allowed);
  auto call = [&](const std::string& token, const std::string& db, const std::string& body) {
    service::HttpRequest req;
    req.method = "POST";
    req.path = "/admin/v1/databases/" + db + "/backup";
    req.headers = {{"authorization", "Bearer " + token}, {"content-type", "application/json"}};
    req.body = body;
    auto done = std::make_shared<std::promise<service::HttpResponse>>();
    auto answer = done->get_future();
    api->Handle(std::move(req), [done](service::HttpResponse r) { done->set_value(std::move(r)); });
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return answer.get();
  };
  auto to = [](const std::string& dest) { return R"({"to":")" + dest + R"("})"; };
  const std::string hr_admin = MakeToken("hr", auth::Scope::kAdmin);

  // The bootstrap token: any allowed destination, however it is spelled.
  auto r = call(kBootstrap, "sales", to(other + "/./"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(fs::exists(dests / "other" / "sales" / "snapshots"));
  // Again at once: over the bound.
  r = call(kBootstrap, "sales", to(def));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("backed up less than 600000 ms ago"), std::string::npos) << r.body;
  bool retry_after = false;
  for (const auto& [name, value] : r.headers) {
    if (name == "retry-after") retry_after = std::stoi(value) >= 1;
  }
  EXPECT_TRUE(retry_after);
  // Not allowed, the data directory, relative: refused, nothing written.
  r = call(kBootstrap, "default", to(stray));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("not one the operator allowed"), std::string::npos) << r.body;
  for (const std::string& inside : {dir_.string(), (dir_ / "x").string()}) {
    r = call(kBootstrap, "default", to(inside));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("inside the server's data directory"), std::string::npos) << r.body;
  }
  r = call(kBootstrap, "default", to("relative/dir"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("relative path"), std::string::npos) << r.body;
  EXPECT_FALSE(fs::exists(stray));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // An admin token of one database: the default only.
  r = call(hr_admin, "hr", to(other));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("bound to one database"), std::string::npos) << r.body;
  r = call(hr_admin, "hr", "");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(fs::exists(dests / "default" / "hr" / "snapshots"));
  EXPECT_FALSE(fs::exists(dests / "other" / "hr"));
  api.reset();
  fs::remove_all(dests);
}

TEST_F(SecurityTest, ExpiredAccessTokens) {
  // A token valid for a short while, used while it is valid. What "before it expires" saw is
  // checked only when all of it ended before the expiry; a machine too slow for that gets a
  // longer validity instead of a failure.
  std::string token;
  Session s;
  int64_t expires_ms = 0;
  for (int64_t valid_ms = 600;; valid_ms *= 4) {
    ASSERT_LE(valid_ms, 600 * 64) << "no exchange and read within " << valid_ms / 4 << " ms";
    expires_ms = NowUnixMs() + valid_ms;
    token = MakeToken("sales", auth::Scope::kWrite, expires_ms);
    auto c = Connect("/databases/sales/connect", token);
    rapidjson::Document d;
    d.Parse(c.body.c_str());
    if (c.status == 200 && d.IsObject() && d.HasMember("token")) {
      s = {d["token"].GetString(), d["databaseId"].GetString()};
    }
    auto read = Data(s, "snapshot_read", Fixture("snapshot_read_get.bin"));
    if (NowUnixMs() >= expires_ms) continue;  // expired meanwhile: nothing to conclude
    ASSERT_EQ(c.status, 200) << c.body;
    ASSERT_EQ(read.status, 200) << read.body;
    break;
  }
  // The expiry passes (the time passing is the point here).
  while (NowUnixMs() <= expires_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(expires_ms - NowUnixMs() + 1));
  }
  auto r = Connect("/databases/sales/connect", token);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "Invalid access token: it has expired.");
  auto d = Data(s, "snapshot_read", Fixture("snapshot_read_get.bin"));
  EXPECT_EQ(d.status, 401);
  EXPECT_NE(d.body.find("authorization"), std::string::npos) << d.body;
}

TEST_F(SecurityTest, DatabasesCreatedAndDeletedWhileServing) {
  // Created after the server started: reachable at once (the directory rereads on a miss).
  auto info = admin_->CreateDatabase("late");
  ASSERT_TRUE(info.ok());
  const storage::DatabaseRecord* rec = &info->record;
  const std::string token = MakeToken("late", auth::Scope::kWrite);
  const Session s = Exchange("/databases/late/connect", token);
  EXPECT_EQ(s.database_id, rec->id);
  ASSERT_EQ(Data(s, "atomic_write", Fixture("atomic_write_set.bin")).status, 200);
  // Renamed: the same database and tokens under the new name.
  ASSERT_TRUE(storage_->catalog().RenameDatabase(rec->id, "later").ok());
  EXPECT_EQ(Exchange("/databases/later/connect", token).database_id, rec->id);
  EXPECT_EQ(Connect("/databases/late/connect", token).status, 404);
  // Deleted: connects 404, the old data-path token stops working.
  ASSERT_TRUE(storage_->catalog().RemoveDatabase(rec->id, NowUnixMs()).ok());
  EXPECT_TRUE(Eventually(
      [&] { return Data(s, "snapshot_read", Fixture("snapshot_read_get.bin")).status == 401; }));
  EXPECT_EQ(Connect("/databases/later/connect", kBootstrap).status, 404);
}

// A token of several databases opens each of them, and another is refused with the text a token
// of one database gets; each data-path token it gets names one database. Deleting one of its
// databases leaves it the others (a new database of the same name is not one of them);
// revoking it ends every session.
TEST_F(SecurityTest, TokenOfSeveralDatabasesOpensEachAndNoOther) {
  const std::string token = MakeTokenOf({"sales", "hr"}, false, auth::Scope::kWrite);
  const Session sales = Exchange("/databases/sales/connect", token);
  const Session hr = Exchange("/databases/hr/connect", token);
  ASSERT_FALSE(sales.token.empty());
  ASSERT_FALSE(hr.token.empty());
  EXPECT_NE(sales.database_id, hr.database_id);
  ASSERT_EQ(Data(sales, "atomic_write", Fixture("atomic_write_set.bin")).status, 200);
  EXPECT_EQ(ReadCount(sales), 1);
  EXPECT_EQ(ReadCount(hr), 0);
  EXPECT_EQ(Exchange("/databases/" + hr.database_id + "/connect", token).database_id,
            hr.database_id);
  for (const char* other : {"/databases/default/connect", "/"}) {
    auto r = Connect(other, token);
    EXPECT_EQ(r.status, 403) << other;
    EXPECT_EQ(r.body, "This access token is not valid for database 'default'.") << other;
  }
  auto cross = Data(sales, "snapshot_read", Fixture("snapshot_read_get.bin"), hr.database_id);
  EXPECT_EQ(cross.status, 401) << cross.body;

  ASSERT_TRUE(storage_->catalog().RemoveDatabase(hr.database_id, NowUnixMs()).ok());
  EXPECT_TRUE(Eventually(
      [&] { return Data(hr, "snapshot_read", Fixture("snapshot_read_get.bin")).status == 401; }));
  EXPECT_EQ(ReadCount(sales), 1) << "sales is still its database";
  EXPECT_EQ(Connect("/databases/sales/connect", token).status, 200);
  ASSERT_TRUE(admin_->CreateDatabase("hr").ok());
  auto again = Connect("/databases/hr/connect", token);
  EXPECT_EQ(again.status, 403) << again.body;
  EXPECT_EQ(again.body, "This access token is not valid for database 'hr'.");

  ASSERT_TRUE(storage_->catalog().RevokeToken(auth::AccessTokenId(token), NowUnixMs()).ok());
  EXPECT_TRUE(Eventually([&] {
    return Data(sales, "snapshot_read", Fixture("snapshot_read_get.bin")).status == 401;
  }));
  auto r = Connect("/databases/sales/connect", token);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body, "Invalid access token: it has been revoked.");
}

// A token for all databases opens each one, one created after the token too, and is no
// bootstrap token: as an admin it may not manage databases or tokens, nor read /metrics, and
// the admin API lists the databases without where the server keeps them.
TEST_F(SecurityTest, AllDatabasesTokenOpensEveryDatabaseButIsNotTheServersToken) {
  const std::string token = MakeTokenOf({}, true, auth::Scope::kAdmin);
  for (const char* path : {"/", "/databases/sales/connect", "/databases/hr/connect"}) {
    EXPECT_FALSE(Exchange(path, token).token.empty()) << path;
  }
  auto later = admin_->CreateDatabase("later");
  ASSERT_TRUE(later.ok());
  const Session s = Exchange("/databases/later/connect", token);
  EXPECT_EQ(s.database_id, later->record.id);
  ASSERT_EQ(Data(s, "atomic_write", Fixture("atomic_write_set.bin")).status, 200);

  auto who = Who(token);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_TRUE(who->all_databases);
  EXPECT_FALSE(who->server_wide);
  service::Authenticator* auth = service_->authenticator();
  EXPECT_TRUE(auth->AdmitAdmin(*who).ok());
  Status wide = auth->AdmitServerWide(*who);
  EXPECT_EQ(wide.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(wide.message(),
            "This admin token is for every database, not for the server; managing databases "
            "and tokens needs the server's bootstrap token.");
  auto boot = Who(kBootstrap);
  ASSERT_TRUE(boot.ok());
  EXPECT_TRUE(auth->AdmitServerWide(*boot).ok());

  service::OperatorGate gate(auth, /*open=*/false);
  auto gated = [&](const std::string& bearer) {
    service::HttpRequest req;
    req.method = "GET";
    req.path = "/metrics";
    req.headers = {{"authorization", "Bearer " + bearer}};
    auto done = std::make_shared<std::promise<Status>>();
    auto answer = done->get_future();
    gate.Check(req, [done](Status st) { done->set_value(st); });
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return answer.get();
  };
  EXPECT_EQ(gated(token).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(gated(kBootstrap).ok());

  service::AdminApi api(service::AdminApiOptions{}, directory_.get(), auth, admin_.get(), nullptr);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body) {
    service::HttpRequest req;
    req.method = method;
    req.path = path;
    req.headers = {{"authorization", "Bearer " + token}, {"content-type", "application/json"}};
    req.body = body;
    auto done = std::make_shared<std::promise<service::HttpResponse>>();
    auto answer = done->get_future();
    api.Handle(std::move(req), [done](service::HttpResponse r) { done->set_value(std::move(r)); });
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return answer.get();
  };
  EXPECT_EQ(call("POST", "/admin/v1/tokens", R"({"database":"sales","scope":"admin"})").status,
            403);
  EXPECT_EQ(call("POST", "/admin/v1/tokens", R"({"all_databases":true,"scope":"read"})").status,
            403);
  EXPECT_EQ(call("GET", "/admin/v1/tokens", "").status, 403);
  EXPECT_EQ(call("POST", "/admin/v1/databases", R"({"name":"mine"})").status, 403);
  EXPECT_EQ(call("DELETE", "/admin/v1/databases/later", "").status, 403);
  auto listed = call("GET", "/admin/v1/databases", "");
  ASSERT_EQ(listed.status, 200) << listed.body;
  rapidjson::Document d;
  d.Parse(listed.body.c_str());
  ASSERT_TRUE(d.IsObject() && d.HasMember("databases"));
  EXPECT_EQ(d["databases"].Size(), 4u) << listed.body;  // default, sales, hr, later
  for (const auto& db : d["databases"].GetArray()) {
    EXPECT_STREQ(db["location"].GetString(), "") << listed.body;
  }
  auto entries = call("POST", "/admin/v1/databases/later/entries/count", "{}");
  EXPECT_EQ(entries.status, 200) << entries.body;
}

// The rate limit of a token of several databases is one bucket, whichever database a request
// goes to. (A bucket of one that refills in 1000 s: no timing involved.)
TEST_F(SecurityTest, OneRateBucketForATokenAcrossItsDatabases) {
  const std::string token = MakeTokenOf({"sales", "hr"}, false, auth::Scope::kWrite, 0.001);
  auto who = Who(token);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  auto snap = directory_->snapshot();
  const service::Directory::Database* sales = snap->Find("sales");
  const service::Directory::Database* hr = snap->Find("hr");
  ASSERT_TRUE(sales && hr);
  service::Authenticator* auth = service_->authenticator();
  EXPECT_TRUE(auth->AdmitToDatabase(*who, *sales, "sales").ok());
  EXPECT_EQ(auth->AdmitToDatabase(*who, *hr, "hr").code(), StatusCode::kThrottled);
  EXPECT_EQ(auth->AdmitToDatabase(*who, *sales, "sales").code(), StatusCode::kThrottled);
  // The refusal for a database it does not open is the usual one, before any rate.
  const service::Directory::Database* def = snap->Find("default");
  ASSERT_TRUE(def);
  Status other = auth->AdmitToDatabase(*who, *def, "default");
  EXPECT_EQ(other.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(), "This access token is not valid for database 'default'.");
}

class RateLimitTest : public SecurityTest {
  void TuneService(service::ServiceOptions& so) override {
    so.auth.rate_limit_rps = 2;
    so.auth.rate_limit_burst = 5;
  }
};

// Over the limit: 503 (clients retry 5xx; a 429 is final in every client) with a Retry-After
// of whole seconds and a text.
TEST_F(RateLimitTest, TokenBucketAnswers503WithRetryAfter) {
  const std::string token = MakeToken("sales", auth::Scope::kWrite);
  const Session s = Exchange("/databases/sales/connect", token);
  int ok = 0, limited = 0;
  std::string text, retry_after;
  for (int i = 0; i < 20; ++i) {
    auto r = Data(s, "snapshot_read", Fixture("snapshot_read_get.bin"));
    if (r.status == 200) ++ok;
    if (r.status == 503) {
      ++limited;
      text = r.body;
      retry_after = r.headers["retry-after"];
    }
  }
  // The exchange used one of the 5; a few more may refill while the loop runs.
  EXPECT_GE(ok, 3);
  EXPECT_LE(ok, 8);
  EXPECT_EQ(ok + limited, 20);
  EXPECT_NE(text.find("Rate limit exceeded"), std::string::npos) << text;
  // At 2 per second the next request is at most half a second away: rounded up to 1 s.
  EXPECT_EQ(retry_after, "1");
  // The metadata exchange has a budget of its own (Deno's openKv gives up on a 503): with the data
  // bucket empty it is still answered, on every shape, and it leaves the data bucket empty.
  for (int i = 0; i < 5; ++i) {
    for (const char* path : {"/databases/sales/connect", "/databases/sales",
                             "/v2/databases/sales/connect", "/v2/databases/sales"}) {
      EXPECT_EQ(Connect(path, token).status, 200) << path;
    }
  }
  EXPECT_EQ(Data(s, "snapshot_read", Fixture("snapshot_read_get.bin")).status, 503);
  // A token with its own unlimited rate, and the bootstrap token, are not limited.
  const Session free =
      Exchange("/databases/sales/connect", MakeToken("sales", auth::Scope::kWrite, 0, /*rate=*/0));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ReadCount(free), 0);
  const Session boot = Exchange("/databases/sales/connect", kBootstrap);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ReadCount(boot), 0);
}

// The metadata budget (--metadata-rate-limit-rps/-burst) is separate from the data budget and
// never smaller than it: here at least 1 per second and 3 at once, but the token's own data
// bucket holds 5, so 5 exchanges pass; past them a 503 with Retry-After, while data calls still
// draw from their own full bucket.
class MetadataBudgetTest : public SecurityTest {
  void TuneService(service::ServiceOptions& so) override {
    so.auth.rate_limit_rps = 2;
    so.auth.rate_limit_burst = 5;
    so.auth.metadata_rate_limit_rps = 1;
    so.auth.metadata_rate_limit_burst = 3;
  }
};

TEST_F(MetadataBudgetTest, OwnBucketNeverSmallerThanTheDataBucket) {
  const std::string token = MakeToken("sales", auth::Scope::kWrite);
  const Session s = Exchange("/databases/sales/connect", token);
  ASSERT_FALSE(s.token.empty());
  int ok = 1, limited = 0;
  testutil::HttpResponse refused;
  for (int i = 0; i < 20; ++i) {
    auto r = Connect("/v2/databases/sales", token);
    if (r.status == 200) ++ok;
    if (r.status == 503) {
      ++limited;
      refused = r;
    }
  }
  // The bucket holds 5 and refills at 2 per second; no timing is asserted.
  EXPECT_GE(ok, 5);
  EXPECT_LE(ok, 12);
  EXPECT_EQ(ok + limited, 21);
  EXPECT_NE(refused.body.find("Rate limit exceeded"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "1");
  // The data bucket was not touched by the exchanges.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ReadCount(s), 0);
  // A token with a data rate of its own above the metadata setting gets that rate for both.
  const std::string fast = MakeToken("sales", auth::Scope::kWrite, 0, /*rate=*/50);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(Connect("/databases/sales", fast).status, 200) << i;
}

// When the body pool's queue is full, a small metadata body is handled on the I/O thread instead
// of answering 503 (Deno's openKv would give up); a body over metadata_inline_max_bytes still
// gets the 503.
class FullBodyPoolTest : public SecurityTest {
  void TuneService(service::ServiceOptions& so) override {
    so.body_pool.threads = 1;
    so.body_pool.max_queued = 1;
    so.metadata_inline_max_bytes = 1024;
  }
};

TEST_F(FullBodyPoolTest, SmallMetadataBodiesAreAnsweredInline) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  ASSERT_TRUE(body_pool_
                  ->Post([&started, released] {
                    started.set_value();
                    released.wait();
                  })
                  .ok());
  started.get_future().wait();                                          // the one thread is busy
  ASSERT_TRUE(body_pool_->Post([released] { released.wait(); }).ok());  // the queue is full
  ASSERT_FALSE(body_pool_->Post([] {}).ok());
  for (const char* path : {"/", "/databases/sales", "/v2/databases/sales/connect"}) {
    const Session s = Exchange(path, kBootstrap);
    EXPECT_FALSE(s.token.empty()) << path;
  }
  const std::string big_body =
      R"({"supportedVersions":[2,3],"pad":")" + std::string(2000, 'x') + R"("})";
  const Headers auth = {{"authorization", std::string("Bearer ") + kBootstrap}};
  auto big = client_->Post("/databases/sales", auth, big_body);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, 503) << big->body;
  release.set_value();
  // Once the pool has room again, the big body is parsed there.
  EXPECT_TRUE(Eventually([&] {
    auto r = client_->Post("/databases/sales", auth, big_body);
    return r.ok() && r->status == 200;
  }));
}

// A token's own rate bounds its bursts too: the server-wide burst (20000 by default) is for
// tokens on the server's default rate.
TEST_F(SecurityTest, OwnRateLimitBoundsBursts) {
  const Session s =
      Exchange("/databases/sales/connect", MakeToken("sales", auth::Scope::kWrite, 0, /*rate=*/5));
  ASSERT_FALSE(s.token.empty());
  std::vector<std::tuple<std::string, Headers, std::string>> many(
      50, {"/v2/snapshot_read",
           {{"authorization", "Bearer " + s.token},
            {"x-denokv-version", "3"},
            {"x-denokv-database-id", s.database_id}},
           Fixture("snapshot_read_get.bin")});
  auto rs = client_->PostMany(many);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  int ok = 0, limited = 0;
  for (const auto& r : *rs) {
    if (r.status == 200) ++ok;
    if (r.status == 503) {
      ++limited;
      EXPECT_NE(r.body.find("Rate limit exceeded"), std::string::npos) << r.body;
      const auto it = r.headers.find("retry-after");
      ASSERT_NE(it, r.headers.end());
      EXPECT_GE(std::stoi(it->second), 1) << it->second;
    }
  }
  // The bucket holds 5 and the exchange took one; no timing is asserted.
  EXPECT_GE(ok, 1);
  EXPECT_LE(ok, 10);
  EXPECT_EQ(ok + limited, 50);
}

// The catalog is polled only once an hour here: whatever takes effect does so because the
// admin API rereads it, not because a poll happened by.
class SlowCatalogPollTest : public SecurityTest {
  void TuneDirectory(service::DirectoryOptions& o) override { o.poll_ms = 3'600'000; }
};

// A token revoked through the admin API (the console's Tokens page) is refused as soon as the
// answer arrives, at the metadata exchange and on the data path; it used to stay valid until
// the next catalog poll, while the console already showed it revoked.
TEST_F(SlowCatalogPollTest, TokenRevokedThroughTheAdminApiIsRefusedOnceAnswered) {
  const std::string token = MakeToken("sales", auth::Scope::kWrite);
  const Session s = Exchange("/databases/sales/connect", token);
  ASSERT_EQ(ReadCount(s), 0);
  service::AdminApi api(service::AdminApiOptions{}, directory_.get(), service_->authenticator(),
                        admin_.get(), nullptr);
  service::HttpRequest req;
  req.method = "DELETE";
  req.path = "/admin/v1/tokens/" + auth::AccessTokenId(token);
  req.headers = {{"authorization", std::string("Bearer ") + kBootstrap}};
  auto done = std::make_shared<std::promise<service::HttpResponse>>();
  auto answer = done->get_future();
  api.Handle(std::move(req), [done](service::HttpResponse r) { done->set_value(std::move(r)); });
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const service::HttpResponse revoked = answer.get();
  ASSERT_EQ(revoked.status, 200) << revoked.body;

  auto r = Connect("/databases/sales/connect", token);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.body, "Invalid access token: it has been revoked.");
  EXPECT_EQ(Data(s, "snapshot_read", Fixture("snapshot_read_get.bin")).status, 401);
  EXPECT_EQ(ReadCount(Exchange("/databases/sales/connect", kBootstrap)), 0);
}

}  // namespace
}  // namespace kvc
