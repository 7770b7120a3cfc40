// The server in-process on 127.0.0.1:0, driven by our own HTTP/1.1 and HTTP/2 clients:
// metadata exchange, the data path with Deno's own request bytes (fixtures), watch streams,
// and bad input of every kind answered with a 4xx text while the server keeps serving.
#include "net/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "codec/datapath_codec.h"
#include "codec/metadata_json.h"
#include "common/random.h"
#include "datapath.pb.h"
#include "engine/engine.h"
#include "service/kvconnect/kv_service.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/sqlite/sqlite_catalog.h"
#include "testutil/engine_sync.h"
#include "testutil/hex.h"
#include "testutil/http_client.h"
#include "testutil/wait.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
namespace pb = com::deno::kv::datapath;
using testutil::Headers;
using testutil::Http1Client;
using testutil::Http2Client;

constexpr char kToken[] = "test-access-token-0123456789";

std::string Fixture(const std::string& name) {
  std::ifstream in(fs::path(KVC_FIXTURES_DIR) / "requests" / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Deno's set and get fixtures over `client` with data-path `headers`: both answer 200 and the
// read finds the value.
template <typename Client>
void WriteThenRead(Client& client, const Headers& headers) {
  auto w = client.Post("/v2/atomic_write", headers, Fixture("atomic_write_set.bin"));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->status, 200) << w->body;
  auto r = client.Post("/v2/snapshot_read", headers, Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(r.ok());
  pb::SnapshotReadOutput out;
  ASSERT_TRUE(out.ParseFromString(r->body));
  ASSERT_EQ(out.ranges_size(), 1);
  EXPECT_EQ(out.ranges(0).values_size(), 1);
}

// A raw HTTP/1.1 metadata request with the bootstrap token and no Host header.
std::string MetadataPostWithoutHost(const std::string& body) {
  return "POST / HTTP/1.1\r\nAuthorization: Bearer " + std::string(kToken) +
         "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-server-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    auto cat = storage::SqliteCatalog::Open((dir_ / "catalog.sqlite3").string());
    ASSERT_TRUE(cat.ok()) << cat.status().ToString();
    catalog_ = std::move(*cat);
    const std::string db_path = (dir_ / "db.sqlite3").string();
    {
      auto b = storage::SqliteBackend::Open(db_path, {});
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE(catalog_->AddDatabase({(*b)->database_id(), "default", db_path, 1}).ok());
    }
    service::DirectoryOptions dopt;
    dopt.poll_ms = 50;
    directory_ = std::make_unique<service::Directory>(
        catalog_.get(),
        [](const storage::DatabaseRecord& rec) -> Result<std::unique_ptr<storage::Backend>> {
          KVC_ASSIGN_OR_RETURN(auto b, storage::SqliteBackend::Open(rec.location, {}));
          return std::unique_ptr<storage::Backend>(std::move(b));
        },
        dopt);
    ASSERT_TRUE(directory_->Start().ok());
    service::ServiceOptions so;
    so.auth.bootstrap_token = kToken;
    so.watch_keepalive = std::chrono::milliseconds(300);
    TuneService(so);
    service_ = std::make_unique<service::KvService>(so, std::string(64, 'k'), directory_.get());
    net::ServerOptions no;
    no.port = 0;
    no.max_body_bytes = 1 << 20;
    TuneServer(no);
    server_ = std::make_unique<net::Server>(no, service_.get());
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->bound_port();
  }
  void TearDown() override {
    (void)server_->Stop(std::chrono::milliseconds(2000));
    directory_->Stop();
    fs::remove_all(dir_);
  }

  // Runs the metadata exchange over HTTP/2 and returns (token, database id).
  std::pair<std::string, std::string> Exchange(Http2Client& c) {
    auto r = c.Post(
        "/",
        {{"authorization", std::string("Bearer ") + kToken}, {"content-type", "application/json"}},
        R"({"supportedVersions":[1,2,3]})");
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    rapidjson::Document d;
    d.Parse(r->body.c_str());
    return {d["token"].GetString(), d["databaseId"].GetString()};
  }
  Headers DataHeaders(const std::string& token, const std::string& db) {
    return {{"authorization", "Bearer " + token},
            {"x-denokv-version", "3"},
            {"x-denokv-database-id", db}};
  }

  virtual void TuneServer(net::ServerOptions&) {}
  virtual void TuneService(service::ServiceOptions&) {}

  std::shared_ptr<engine::Engine> engine() const {
    return directory_->snapshot()->Find("default")->engine;
  }

  fs::path dir_;
  std::unique_ptr<storage::SqliteCatalog> catalog_;
  std::unique_ptr<service::Directory> directory_;
  std::unique_ptr<service::KvService> service_;
  std::unique_ptr<net::Server> server_;
  uint16_t port_ = 0;
};

TEST_F(ServerTest, MetadataExchangeVersionsAndSchemas) {
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  const Headers auth = {{"authorization", std::string("Bearer ") + kToken}};
  struct Case {
    std::string body;
    int version;
  } cases[] = {{R"({"supportedVersions":[1,2,3]})", 3},
               {R"({"supportedVersions":[1,2]})", 2},
               {R"({"supportedVersions":[1,2,3,4]})", 3},
               {"", 1}};
  for (const auto& tc : cases) {
    auto r = (*c)->Post("/", auth, tc.body);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->headers["content-type"], "application/json");
    const std::string schema =
        "metadata-exchange-response-v" + std::to_string(tc.version) + ".schema.json";
    Status s = codec::ValidateJsonAgainstSchema(schema, r->body);
    EXPECT_TRUE(s.ok()) << s.message() << "\n" << r->body;
    rapidjson::Document d;
    d.Parse(r->body.c_str());
    EXPECT_EQ(d["version"].GetInt(), tc.version);
    EXPECT_EQ(d["databaseId"].GetString(), engine()->database_id());
    EXPECT_NE(std::string(d["token"].GetString()), kToken);  // never the access token
    // Absolute for every version, from the Host header.
    EXPECT_EQ(std::string(d["endpoints"][0]["url"].GetString()),
              "http://127.0.0.1:" + std::to_string(port_) + "/v2");
  }
}

TEST_F(ServerTest, EndpointUrlsAreAbsoluteOverHttp2) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  const std::string expected = "http://127.0.0.1:" + std::to_string(port_) + "/v2";
  for (const char* body : {R"({"supportedVersions":[2]})", R"({"supportedVersions":[2,3]})",
                           R"({"supportedVersions":[1,2,3,4]})"}) {
    auto r = (*c)->Post("/", {{"authorization", std::string("Bearer ") + kToken}}, body);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    rapidjson::Document d;
    d.Parse(r->body.c_str());
    EXPECT_EQ(std::string(d["endpoints"][0]["url"].GetString()), expected) << body;
  }
}

// A client that also offers version 4 (WebSocket watches, which we do not serve) gets 3 and
// the data path works with the answer as usual.
TEST_F(ServerTest, OfferingVersion4GetsVersion3) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto meta = (*c)->Post("/", {{"authorization", std::string("Bearer ") + kToken}},
                         R"({"supportedVersions":[1,2,3,4]})");
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->status, 200) << meta->body;
  rapidjson::Document d;
  d.Parse(meta->body.c_str());
  ASSERT_EQ(d["version"].GetInt(), 3);
  const Headers h = DataHeaders(d["token"].GetString(), d["databaseId"].GetString());
  WriteThenRead(**c, h);
  if (HasFatalFailure()) return;
  // A data-path request claiming version 4 is refused with a clear 400.
  Headers v4 = h;
  v4[1].second = "4";
  auto bad = (*c)->Post("/v2/snapshot_read", v4, Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("protocol version"), std::string::npos) << bad->body;
}

// The endpoint URL follows the Host header; without one (or with one that is not a
// host[:port]) there is nothing to build it from.
TEST_F(ServerTest, EndpointUrlNeedsAValidHost) {
  const std::string body = R"({"supportedVersions":[2,3]})";
  {
    auto c = Http1Client::Connect("127.0.0.1", port_);
    ASSERT_TRUE(c.ok());
    auto r = (*c)->Post(
        "/", {{"Host", "kv.example.com:8443"}, {"authorization", std::string("Bearer ") + kToken}},
        body);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    rapidjson::Document d;
    d.Parse(r->body.c_str());
    EXPECT_EQ(std::string(d["endpoints"][0]["url"].GetString()), "http://kv.example.com:8443/v2");
    for (const char* bad : {"evil.example/x?", "a b", "user@host"}) {
      r = (*c)->Post("/", {{"Host", bad}, {"authorization", std::string("Bearer ") + kToken}},
                     body);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->status, 400) << bad;
      EXPECT_NE(r->body.find("not a valid host[:port]"), std::string::npos) << r->body;
    }
  }
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto raw = (*c)->SendRaw(MetadataPostWithoutHost(body), std::chrono::seconds(5));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->rfind("HTTP/1.1 400", 0), 0u) << *raw;
  EXPECT_NE(raw->find("needs a Host header"), std::string::npos) << *raw;
}

class PublicUrlTest : public ServerTest {
  void TuneService(service::ServiceOptions& so) override {
    so.public_url = *service::NormalizePublicUrl("https://kv.example.com/base/");
  }
};

TEST_F(PublicUrlTest, EndpointsUseThePublicUrl) {
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  for (const char* body :
       {"", R"({"supportedVersions":[1,2]})", R"({"supportedVersions":[2,3]})"}) {
    auto r = (*c)->Post("/", {{"authorization", std::string("Bearer ") + kToken}}, body);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    rapidjson::Document d;
    d.Parse(r->body.c_str());
    EXPECT_EQ(std::string(d["endpoints"][0]["url"].GetString()), "https://kv.example.com/base/v2")
        << body;
  }
  // No Host header needed then.
  const std::string body = R"({"supportedVersions":[3]})";
  auto raw = (*c)->SendRaw(MetadataPostWithoutHost(body), std::chrono::seconds(5));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->rfind("HTTP/1.1 200", 0), 0u) << *raw;
  EXPECT_NE(raw->find("https://kv.example.com/base/v2"), std::string::npos) << *raw;
}

TEST_F(ServerTest, ProtocolVersion1DataPath) {
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto meta = (*c)->Post("/", {{"authorization", std::string("Bearer ") + kToken}}, "");
  ASSERT_TRUE(meta.ok());
  rapidjson::Document d;
  d.Parse(meta->body.c_str());
  ASSERT_EQ(d["version"].GetInt(), 1);
  const std::string token = d["token"].GetString();
  const Headers v1 = {{"authorization", "Bearer " + token},
                      {"x-transaction-domain-id", d["databaseId"].GetString()}};
  WriteThenRead(**c, v1);
  if (HasFatalFailure()) return;
  // Without the domain id header the request is refused.
  auto bad = (*c)->Post("/v2/snapshot_read", {{"authorization", "Bearer " + token}},
                        Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
}

TEST_F(ServerTest, MetadataErrorsAreClear4xx) {
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  const Headers good = {{"authorization", std::string("Bearer ") + kToken}};
  struct Case {
    Headers headers;
    std::string body;
    int status;
    std::string text;
  } cases[] = {
      {good, "{nope", 400, "not valid JSON"},
      {good, R"({"supportedVersions":[4,5]})", 400, "could not negotiate"},
      {good, R"({"supportedVersions":"3"})", 400, "supportedVersions"},
      {{}, R"({"supportedVersions":[3]})", 401, "Malformed authorization header."},
      {{{"authorization", "Bearer wrong-token-123456"}},
       R"({"supportedVersions":[3]})",
       401,
       "Invalid access token."},
      {{{"authorization", "Basic abc"}},
       R"({"supportedVersions":[3]})",
       401,
       "Invalid access token."},
  };
  for (const auto& tc : cases) {
    auto r = (*c)->Post("/", tc.headers, tc.body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, tc.status) << r->body;
    EXPECT_NE(r->body.find(tc.text), std::string::npos) << r->body;
  }
  auto r = (*c)->Request("GET", "/", good, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 405);
  r = (*c)->Post("/nowhere", good, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
}

TEST_F(ServerTest, DenoFixturesOverHttp2) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto [token, db] = Exchange(**c);
  const Headers h = DataHeaders(token, db);
  for (const char* f : {"atomic_write_preload.bin", "atomic_write_set.bin", "atomic_write_sum.bin",
                        "atomic_write_sum.bin"}) {
    auto r = (*c)->Post("/v2/atomic_write", h, Fixture(f));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << f << ": " << r->body;
    EXPECT_EQ(r->headers["content-type"], "application/x-protobuf");
    pb::AtomicWriteOutput out;
    ASSERT_TRUE(out.ParseFromString(r->body));
    EXPECT_EQ(out.status(), pb::AW_SUCCESS);
    EXPECT_EQ(out.versionstamp().size(), 10u);
  }
  // check_set checks that "cas" does not exist, then sets it: succeeds once, then conflicts.
  for (int i = 0; i < 2; ++i) {
    auto r = (*c)->Post("/v2/atomic_write", h, Fixture("atomic_write_check_set.bin"));
    ASSERT_TRUE(r.ok());
    pb::AtomicWriteOutput out;
    ASSERT_TRUE(out.ParseFromString(r->body));
    EXPECT_EQ(out.status(), i == 0 ? pb::AW_SUCCESS : pb::AW_CHECK_FAILURE);
  }
  auto r = (*c)->Post("/v2/snapshot_read", h, Fixture("snapshot_read_list100.bin"));
  ASSERT_TRUE(r.ok());
  pb::SnapshotReadOutput out;
  ASSERT_TRUE(out.ParseFromString(r->body));
  EXPECT_EQ(out.status(), pb::SR_SUCCESS);
  EXPECT_TRUE(out.read_is_strongly_consistent());
  ASSERT_EQ(out.ranges_size(), 1);
  EXPECT_EQ(out.ranges(0).values_size(), 100);
  r = (*c)->Post("/v2/snapshot_read", h, Fixture("snapshot_read_getmany10.bin"));
  ASSERT_TRUE(out.ParseFromString(r->body));
  ASSERT_EQ(out.ranges_size(), 10);
  for (const auto& range : out.ranges()) EXPECT_EQ(range.values_size(), 1);
  // Multiplexing: many reads in flight on one connection.
  std::vector<std::tuple<std::string, Headers, std::string>> many(
      50, {"/v2/snapshot_read", h, Fixture("snapshot_read_get.bin")});
  auto rs = (*c)->PostMany(many);
  ASSERT_TRUE(rs.ok());
  for (const auto& one : *rs) {
    ASSERT_EQ(one.status, 200);
    ASSERT_TRUE(out.ParseFromString(one.body));
    EXPECT_EQ(out.ranges(0).values_size(), 1);
  }
}

TEST_F(ServerTest, DataPathBadInputIs4xxAndServerKeepsServing) {
  auto c2 = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c2.ok());
  auto [token, db] = Exchange(**c2);
  auto c1 = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c1.ok());
  const Headers h = DataHeaders(token, db);
  pb::AtomicWrite bad_enc;
  auto* m = bad_enc.add_mutations();
  m->set_key(std::string("\x02k\x00", 3));
  m->set_mutation_type(pb::M_SET);
  m->mutable_value()->set_data("x");
  m->mutable_value()->set_encoding(static_cast<pb::ValueEncoding>(7));
  pb::AtomicWrite bad_kind = bad_enc;
  bad_kind.mutable_mutations(0)->mutable_value()->set_encoding(pb::VE_BYTES);
  bad_kind.mutable_mutations(0)->set_mutation_type(static_cast<pb::MutationType>(42));
  pb::AtomicWrite bad_le64 = bad_enc;
  bad_le64.mutable_mutations(0)->mutable_value()->set_encoding(pb::VE_LE64);
  pb::AtomicWrite too_many_checks;
  for (int i = 0; i < 101; ++i) too_many_checks.add_checks()->set_key("k");

  struct Case {
    std::string path;
    Headers headers;
    std::string body;
    int status;
    std::string text;
  } cases[] = {
      {"/v2/atomic_write", h, "\xff\xff\xff garbage", 400, "Request protobuf is invalid"},
      {"/v2/snapshot_read", h, "\x0a\xff", 400, "Request protobuf is invalid"},
      {"/v2/atomic_write", h, bad_enc.SerializeAsString(), 400, "value encoding 7 is unknown"},
      {"/v2/atomic_write", h, bad_kind.SerializeAsString(), 400, "Invalid mutation kind"},
      {"/v2/atomic_write", h, bad_le64.SerializeAsString(), 400, "8 bytes"},
      {"/v2/atomic_write", h, too_many_checks.SerializeAsString(), 400, "Too many checks"},
      {"/v2/atomic_write",
       {{"x-denokv-version", "3"}, {"x-denokv-database-id", db}},
       "",
       401,
       "Malformed authorization header."},
      {"/v2/atomic_write", DataHeaders("kvc1.forged.token", db), "", 401, "authorization"},
      {"/v2/atomic_write", DataHeaders(kToken, db), "", 401, "authorization"},
      {"/v2/atomic_write", DataHeaders(token, "00000000-0000-0000-0000-000000000000"), "", 401,
       "authorization token was issued for another database"},
      {"/v2/atomic_write",
       {{"authorization", "Bearer " + token},
        {"x-denokv-version", "9"},
        {"x-denokv-database-id", db}},
       "",
       400,
       "protocol version"},
      {"/v2/nothing", h, "", 404, "Resource not found."},
      {"/v2/atomic_write", h, std::string(2 << 20, 'x'), 413, "exceeds the limit"},
  };
  for (const auto& tc : cases) {
    for (int proto = 1; proto <= 2; ++proto) {
      auto r = proto == 1 ? (*c1)->Post(tc.path, tc.headers, tc.body)
                          : (*c2)->Post(tc.path, tc.headers, tc.body);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, tc.status) << "HTTP/" << proto << " " << tc.text << ": " << r->body;
      EXPECT_NE(r->body.find(tc.text), std::string::npos) << r->body;
      if (proto == 1 && r->status == 413) {
        c1 = Http1Client::Connect("127.0.0.1", port_);  // 413 closes an HTTP/1.1 connection
        ASSERT_TRUE(c1.ok());
      }
    }
  }
  // Nothing of the failed writes is visible, and the server still answers.
  auto r = (*c2)->Post("/v2/snapshot_read", h, Fixture("snapshot_read_list100.bin"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  // Raw garbage on a fresh connection gets a 400 and a close.
  auto raw = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(raw.ok());
  auto text = (*raw)->SendRaw("NOT HTTP AT ALL\r\n\r\n", std::chrono::milliseconds(3000));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("400"), std::string::npos) << *text;
  auto h2raw = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2raw.ok());
  auto bad_h2 =
      (*h2raw)->SendRaw(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(64, '\xff'),
                        std::chrono::milliseconds(3000));
  ASSERT_TRUE(bad_h2.ok());  // the server sends GOAWAY and closes
  r = (*c2)->Post("/v2/snapshot_read", h, Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, WatchStreamsOverBothProtocols) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto [token, db] = Exchange(**c);
  const Headers h = DataHeaders(token, db);
  pb::Watch watch;
  watch.add_keys()->set_key(std::string("\x02w\x00", 3));
  watch.add_keys()->set_key(
      std::string("\x02"
                  "absent\x00",
                  8));
  pb::AtomicWrite set;
  auto* m = set.add_mutations();
  m->set_key(std::string("\x02w\x00", 3));
  m->set_mutation_type(pb::M_SET);
  m->mutable_value()->set_data("v1");
  m->mutable_value()->set_encoding(pb::VE_BYTES);

  for (int proto = 1; proto <= 2; ++proto) {
    std::unique_ptr<testutil::StreamReader> reader;
    std::unique_ptr<Http1Client> h1;
    if (proto == 1) {
      h1 = std::move(*Http1Client::Connect("127.0.0.1", port_));
      reader = std::move(*h1->OpenStream("/v2/watch", h, watch.SerializeAsString()));
    } else {
      auto s = (*c)->OpenStream("/v2/watch", h, watch.SerializeAsString());
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      reader = std::move(*s);
    }
    ASSERT_EQ(reader->status(), 200);
    EXPECT_EQ(reader->headers().at("content-type"), "application/octet-stream");
    testutil::FrameReader frames(reader.get());
    auto next_data = [&]() -> pb::WatchOutput {
      for (int i = 0; i < 20; ++i) {
        auto f = frames.Next(std::chrono::milliseconds(3000));
        EXPECT_TRUE(f.ok()) << f.status().ToString();
        if (!f.ok() || !f->has_value()) break;
        if ((*f)->empty()) continue;  // keep-alive
        pb::WatchOutput out;
        EXPECT_TRUE(out.ParseFromString(**f));
        return out;
      }
      ADD_FAILURE() << "no data frame";
      return {};
    };
    auto first = next_data();
    EXPECT_EQ(first.status(), pb::SR_SUCCESS);
    ASSERT_EQ(first.keys_size(), 2);
    EXPECT_TRUE(first.keys(0).changed());
    EXPECT_TRUE(first.keys(1).changed());
    EXPECT_FALSE(first.keys(1).has_entry_if_changed());
    m->mutable_value()->set_data("v" + std::to_string(proto + 10));
    auto w = (*c)->Post("/v2/atomic_write", h, set.SerializeAsString());
    ASSERT_TRUE(w.ok());
    ASSERT_EQ(w->status, 200);
    auto second = next_data();
    ASSERT_EQ(second.keys_size(), 2);
    EXPECT_EQ(second.keys(0).entry_if_changed().value(), "v" + std::to_string(proto + 10));
    // Keep-alive frames (every 300 ms here) arrive while nothing changes.
    bool saw_keepalive = false;
    for (int i = 0; i < 5 && !saw_keepalive; ++i) {
      auto f = frames.Next(std::chrono::milliseconds(2000));
      ASSERT_TRUE(f.ok());
      saw_keepalive = f->has_value() && (*f)->empty();
    }
    EXPECT_TRUE(saw_keepalive);
  }
  // Cancelled streams release their subscriptions.
  EXPECT_TRUE(testutil::WaitFor([&] { return engine()->watch_count() == 0; }))
      << "the subscriptions of the cancelled streams to be released";
  EXPECT_EQ(engine()->watch_count(), 0u);
}

TEST_F(ServerTest, GracefulShutdownDrainsOpenWatchesAndConnections) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto [token, db] = Exchange(**c);
  const Headers h = DataHeaders(token, db);
  pb::Watch watch;
  watch.add_keys()->set_key(std::string("\x02g\x00", 3));
  auto stream = (*c)->OpenStream("/v2/watch", h, watch.SerializeAsString());
  ASSERT_TRUE(stream.ok());
  testutil::FrameReader frames(stream->get());
  auto first = frames.Next(std::chrono::milliseconds(3000));
  ASSERT_TRUE(first.ok() && first->has_value());
  // A write just before shutdown must not keep its connection alive.
  auto w = (*c)->Post("/v2/atomic_write", h, Fixture("atomic_write_set.bin"));
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->status, 200);
  auto h1 = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h1.ok());
  ASSERT_TRUE((*h1)->Post("/v2/snapshot_read", h, Fixture("snapshot_read_get.bin")).ok());
  // Generous grace: the test fails only if connections linger until it runs out.
  EXPECT_TRUE(server_->Stop(std::chrono::milliseconds(20000)));
  EXPECT_EQ(server_->connection_count(), 0u);
  // The watch stream ended cleanly and the subscription is gone.
  bool ended = false;
  for (int i = 0; i < 50 && !ended; ++i) {
    auto f = frames.Next(std::chrono::milliseconds(100));
    ended = !f.ok();
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(engine()->watch_count(), 0u);
}

// --portable-v8-values (ServiceOptions::portable_v8_values). Deno 2.9's format 16, re-headed;
// Node's v8.serialize of {v: Uint8Array [1, 2]} (a host-object view) and the same value as V8
// writes it.
const std::string kDenoFormat16 = testutil::FromHex("FF 10 49 54");
const std::string kNodeHostView = testutil::FromHex("FF 0F 6F 22 01 76 5C 01 02 01 02 7B 01");
const std::string kV8View = testutil::FromHex("FF 0F 6F 22 01 76 42 02 01 02 56 42 00 02 00 7B 01");

pb::AtomicWrite SetValue(const std::string& key, const std::string& value,
                         pb::ValueEncoding encoding = pb::VE_V8) {
  pb::AtomicWrite w;
  auto* m = w.add_mutations();
  m->set_key(key);
  m->set_mutation_type(pb::M_SET);
  m->mutable_value()->set_data(value);
  m->mutable_value()->set_encoding(encoding);
  return w;
}

// The value stored at `key` as snapshot_read answers it (hex), or "absent".
template <typename Client>
std::string ReadValueHex(Client& client, const Headers& headers, const std::string& key) {
  pb::SnapshotRead read;
  auto* range = read.add_ranges();
  range->set_start(key);
  range->set_end(key + std::string(1, '\0'));
  range->set_limit(1);
  auto r = client.Post("/v2/snapshot_read", headers, read.SerializeAsString());
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return "error";
  EXPECT_EQ(r->status, 200) << r->body;
  pb::SnapshotReadOutput out;
  EXPECT_TRUE(out.ParseFromString(r->body));
  if (out.ranges_size() != 1 || out.ranges(0).values_size() != 1) return "absent";
  return testutil::ToHex(out.ranges(0).values(0).value());
}

// Values written straight to the engine (as a file Deno wrote would hold them), in format 16.
void StoreVerbatim(engine::Engine& e, const std::string& key, const std::string& value) {
  AtomicWrite w;
  Mutation m = testutil::Set(key, value);
  m.value.encoding = ValueEncoding::kV8;
  w.mutations.push_back(std::move(m));
  auto r = testutil::WriteSync(e, std::move(w));
  ASSERT_TRUE(r.ok() && r->ok);
}

// The first watch frame's value of `key` (hex).
std::string FirstWatchValueHex(Http2Client& client, const Headers& headers,
                               const std::string& key) {
  pb::Watch watch;
  watch.add_keys()->set_key(key);
  auto s = client.OpenStream("/v2/watch", headers, watch.SerializeAsString());
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return "error";
  testutil::FrameReader frames(s->get());
  for (int i = 0; i < 10; ++i) {
    auto f = frames.Next(std::chrono::milliseconds(3000));
    if (!f.ok() || !f->has_value()) break;
    if ((*f)->empty()) continue;  // keep-alive
    pb::WatchOutput out;
    EXPECT_TRUE(out.ParseFromString(**f));
    if (out.keys_size() != 1) return "bad frame";
    return testutil::ToHex(out.keys(0).entry_if_changed().value());
  }
  return "no frame";
}

TEST_F(ServerTest, V8ValuesAreStoredAndServedPortably) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto h1 = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h1.ok());
  auto [token, db] = Exchange(**c);
  const Headers h = DataHeaders(token, db);
  for (int proto = 1; proto <= 2; ++proto) {
    SCOPED_TRACE(proto == 1 ? "HTTP/1.1" : "HTTP/2");
    auto post = [&](const pb::AtomicWrite& w) {
      auto r = proto == 1 ? (*h1)->Post("/v2/atomic_write", h, w.SerializeAsString())
                          : (*c)->Post("/v2/atomic_write", h, w.SerializeAsString());
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->status, 200) << r->body;
    };
    auto read = [&](const std::string& key) {
      return proto == 1 ? ReadValueHex(**h1, h, key) : ReadValueHex(**c, h, key);
    };
    const std::string p = "\x02p" + std::to_string(proto);
    post(SetValue(p + "deno", kDenoFormat16));
    EXPECT_EQ(read(p + "deno"), "FF 0F 49 54");
    post(SetValue(p + "node", kNodeHostView));
    EXPECT_EQ(read(p + "node"), testutil::ToHex(kV8View));
    // Raw bytes (VE_BYTES) that happen to start like format 16 are no V8 value.
    post(SetValue(p + "bytes", kDenoFormat16, pb::VE_BYTES));
    EXPECT_EQ(read(p + "bytes"), "FF 10 49 54");
  }
  // Stored in format 16 before: leaves as 15 from reads and watch frames.
  StoreVerbatim(*engine(), "\x02legacy", kDenoFormat16);
  EXPECT_EQ(ReadValueHex(**h1, h, "\x02legacy"), "FF 0F 49 54");
  EXPECT_EQ(ReadValueHex(**c, h, "\x02legacy"), "FF 0F 49 54");
  EXPECT_EQ(FirstWatchValueHex(**c, h, "\x02legacy"), "FF 0F 49 54");
  auto stored = testutil::ReadSync(*engine(), {ReadRange{"\x02legacy", "\x02legacz", 1, false}});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(testutil::ToHex(stored->ranges[0][0].value), "FF 10 49 54");  // reads change nothing
}

class VerbatimValuesTest : public ServerTest {
 protected:
  void TuneService(service::ServiceOptions& o) override { o.portable_v8_values = false; }
};

TEST_F(VerbatimValuesTest, ValuesStayAsSentWithTheSwitchOff) {
  auto c = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto [token, db] = Exchange(**c);
  const Headers h = DataHeaders(token, db);
  for (const std::string& value : {kDenoFormat16, kNodeHostView}) {
    auto r = (*c)->Post("/v2/atomic_write", h, SetValue("\x02k", value).SerializeAsString());
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(ReadValueHex(**c, h, "\x02k"), testutil::ToHex(value));
  }
  StoreVerbatim(*engine(), "\x02legacy", kDenoFormat16);
  EXPECT_EQ(ReadValueHex(**c, h, "\x02legacy"), "FF 10 49 54");
  EXPECT_EQ(FirstWatchValueHex(**c, h, "\x02legacy"), "FF 10 49 54");
}

// Uploads that never finish must not pin memory: over a per-connection budget streams are
// refused, and streams that do not complete within request_timeout are reset.
class StalledUploadTest : public ServerTest {
 protected:
  void TuneServer(net::ServerOptions& o) override {
    o.h2_max_pending_body_bytes = 100 * 1024;
    o.request_timeout = std::chrono::milliseconds(1500);
  }
};

struct StallingClient {
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::map<int32_t, uint32_t> closed;  // stream id -> RST error code
  std::string chunk = std::string(40 * 1024, 'x');
  std::map<int32_t, size_t> sent;  // body bytes handed to nghttp2 per stream

  static ssize_t Read(nghttp2_session*, int32_t id, uint8_t* buf, size_t len, uint32_t*,
                      nghttp2_data_source*, void* user) {
    auto* self = static_cast<StallingClient*>(user);
    size_t& done = self->sent[id];
    if (done == self->chunk.size()) return NGHTTP2_ERR_DEFERRED;  // never END_STREAM
    const size_t n = std::min(len, self->chunk.size() - done);
    std::memcpy(buf, self->chunk.data() + done, n);
    done += n;
    return static_cast<ssize_t>(n);
  }
  static int OnClose(nghttp2_session*, int32_t id, uint32_t code, void* user) {
    static_cast<StallingClient*>(user)->closed[id] = code;
    return 0;
  }
  bool Pump(std::chrono::milliseconds budget) {
    const auto end = std::chrono::steady_clock::now() + budget;
    while (std::chrono::steady_clock::now() < end) {
      const uint8_t* out;
      ssize_t n;
      while ((n = nghttp2_session_mem_send(session, &out)) > 0) {
        if (::send(fd, out, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return false;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        uint8_t buf[65536];
        ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
        if (r <= 0) return false;
        if (nghttp2_session_mem_recv(session, buf, static_cast<size_t>(r)) < 0) return false;
      }
    }
    return true;
  }
};

TEST_F(StalledUploadTest, BudgetRefusesAndDeadlineResets) {
  StallingClient c;
  c.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  nghttp2_session_callbacks* cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &StallingClient::OnClose);
  nghttp2_session_client_new(&c.session, cbs, &c);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_submit_settings(c.session, NGHTTP2_FLAG_NONE, nullptr, 0);
  const std::string authority = "127.0.0.1:" + std::to_string(port_);
  auto nv = [](const char* k, const std::string& v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(k)),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), std::strlen(k),
                      v.size(), NGHTTP2_NV_FLAG_NONE};
  };
  const std::string post = "POST", scheme = "http", path = "/v2/atomic_write";
  std::vector<int32_t> ids;
  for (int i = 0; i < 5; ++i) {
    nghttp2_nv hdrs[] = {nv(":method", post), nv(":scheme", scheme), nv(":authority", authority),
                         nv(":path", path)};
    nghttp2_data_provider prd{};
    prd.read_callback = &StallingClient::Read;
    ids.push_back(nghttp2_submit_request(c.session, nullptr, hdrs, 4, &prd, nullptr));
  }
  // 5 x 40 KiB against a 100 KiB budget: the later streams are refused at once.
  ASSERT_TRUE(c.Pump(std::chrono::milliseconds(700)));
  int refused = 0;
  for (auto& [id, code] : c.closed) refused += code == NGHTTP2_REFUSED_STREAM;
  EXPECT_GE(refused, 2);
  // The server keeps serving others meanwhile.
  auto other = Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(other.ok());
  auto [token, db] = Exchange(**other);
  auto r =
      (*other)->Post("/v2/snapshot_read", DataHeaders(token, db), Fixture("snapshot_read_get.bin"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  // The streams that fit the budget are reset once request_timeout passes.
  for (int i = 0; i < 80 && c.closed.size() < ids.size(); ++i) {
    ASSERT_TRUE(c.Pump(std::chrono::milliseconds(100)));
  }
  EXPECT_EQ(c.closed.size(), ids.size());
  int cancelled = 0;
  for (auto& [id, code] : c.closed) cancelled += code == NGHTTP2_CANCEL;
  EXPECT_GE(cancelled, 1);
  nghttp2_session_del(c.session);
  ::close(c.fd);
}

// Issue 20: a client still writing a body the server refused from its headers (413) must read
// the answer, not a TCP reset. A raw socket sends Content-Length 16 MiB (over the 1 MiB cap)
// and keeps writing the body from one thread while another reads.
class LingerTest : public ServerTest {
 protected:
  // Generous bounds, so a busy machine cannot end the lingering close before the client has
  // written its 16 MiB.
  void TuneServer(net::ServerOptions& o) override {
    o.linger_timeout = std::chrono::milliseconds(30000);
    o.linger_max_bytes = linger_max_bytes_;
  }
  size_t linger_max_bytes_ = 64 << 20;

  struct Upload {
    std::string received;  // everything read before the connection ended
    int read_errno = 0;    // 0: the read side ended with a clean EOF
    int write_errno = 0;   // 0: the whole body was written
    size_t written = 0;
  };

  // Sends headers announcing `announced` body bytes, then `body_bytes` of them.
  Upload Send(size_t announced, size_t body_bytes) {
    return SendRaw("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                       std::string(kToken) + "\r\nContent-Type: application/json\r\n" +
                       "Content-Length: " + std::to_string(announced) + "\r\n\r\n",
                   body_bytes, '[');
  }

  // Sends `head`, then writes `body_bytes` of `fill` in 64 KiB chunks (stopping at the first
  // error) while reading until EOF or an error.
  Upload SendRaw(const std::string& head, size_t body_bytes, char fill) {
    Upload u;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    timeval tv{20, 0};  // no test hangs forever
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(head.size()));
    std::thread writer([&] {
      const std::string chunk(64 * 1024, fill);
      while (u.written < body_bytes) {
        const size_t n = std::min(chunk.size(), body_bytes - u.written);
        const ssize_t w = ::send(fd, chunk.data(), n, MSG_NOSIGNAL);
        if (w < 0) {
          u.write_errno = errno;
          return;
        }
        u.written += static_cast<size_t>(w);
      }
      ::shutdown(fd, SHUT_WR);
    });
    char buf[16 * 1024];
    for (;;) {
      const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r == 0) break;
      if (r < 0) {
        u.read_errno = errno;
        break;
      }
      u.received.append(buf, static_cast<size_t>(r));
    }
    writer.join();
    ::close(fd);
    return u;
  }

  // True if `raw` holds a complete 413 answer (status line, headers, the whole text body).
  static void ExpectComplete413(const std::string& raw) {
    ASSERT_EQ(raw.rfind("HTTP/1.1 413 ", 0), 0u) << raw.substr(0, 200);
    const size_t end = raw.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos) << raw;
    std::string lower = raw.substr(0, end);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t cl = lower.find("content-length: ");
    ASSERT_NE(cl, std::string::npos) << raw;
    const size_t length = std::stoul(lower.substr(cl + 16));
    EXPECT_EQ(raw.size() - end - 4, length) << raw;
    EXPECT_NE(raw.find("The request body exceeds the limit of 1048576 bytes."), std::string::npos)
        << raw;
  }
};

TEST_F(LingerTest, ClientStillWritingReadsThe413NotAReset) {
  const size_t kBody = 16 << 20;
  Upload u = Send(kBody, kBody);
  ExpectComplete413(u.received);
  // The server ended its side with a FIN after the answer and read on: no reset either way.
  EXPECT_EQ(u.read_errno, 0) << std::strerror(u.read_errno);
  EXPECT_EQ(u.write_errno, 0) << std::strerror(u.write_errno) << " after " << u.written;
  EXPECT_EQ(u.written, kBody);
  // The server keeps serving.
  auto c = Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Post(
      "/",
      {{"authorization", std::string("Bearer ") + kToken}, {"content-type", "application/json"}},
      R"({"supportedVersions":[1,2,3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
}

// HTTP/2: a protocol error ends the connection with a GOAWAY. A client still sending (here
// 16 MiB more of the same garbage) reads the GOAWAY and the end of the connection, not a reset.
TEST_F(LingerTest, Http2ProtocolErrorGoawayIsReadNotAReset) {
  const size_t kMore = 16 << 20;
  Upload u = SendRaw(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(64, '\xff'),
                     kMore, '\xff');
  bool goaway = false;
  for (size_t at = 0; at + 9 <= u.received.size();) {  // walk the frames: 9-byte headers
    const auto* b = reinterpret_cast<const unsigned char*>(u.received.data() + at);
    const size_t length = (size_t{b[0]} << 16) | (size_t{b[1]} << 8) | b[2];
    goaway = goaway || b[3] == 0x7;
    at += 9 + length;
  }
  EXPECT_TRUE(goaway) << u.received.size() << " bytes";
  EXPECT_EQ(u.read_errno, 0) << std::strerror(u.read_errno);
  EXPECT_EQ(u.write_errno, 0) << std::strerror(u.write_errno) << " after " << u.written;
  EXPECT_EQ(u.written, kMore);
}

class LingerBoundTest : public LingerTest {
 protected:
  void SetUp() override {
    linger_max_bytes_ = 1 << 20;
    LingerTest::SetUp();
  }
};

// Lingering is bounded: a client that writes on and on (here 256 MiB announced, 64 MiB sent)
// is cut off once linger_max_bytes were discarded, and still got its answer first.
TEST_F(LingerBoundTest, EndlessWriterIsCutOffAfterLingerMaxBytes) {
  Upload u = Send(size_t{256} << 20, size_t{64} << 20);
  ExpectComplete413(u.received);
  EXPECT_NE(u.write_errno, 0);
  EXPECT_LT(u.written, size_t{64} << 20);
  EXPECT_TRUE(testutil::WaitFor([&] { return server_->connection_count() == 0; }))
      << "the cut-off connection to be closed";
  EXPECT_EQ(server_->connection_count(), 0u);
}

}  // namespace
}  // namespace kvc
