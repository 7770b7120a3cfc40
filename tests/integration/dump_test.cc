// Export and import: the engine's snapshot scan, the CLI's direct paths on a data directory,
// the admin API over HTTP/1.1 and HTTP/2 (server in-process), and the CLI through the API.
// Round trips carry every value the V8 fixture corpus holds (Deno's and Node's bytes, KvU64,
// raw bytes) and every key-part type; only versionstamps may differ afterwards.
#include "cli/dump.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/application.h"
#include "codec/admin_json.h"
#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "service/admin/admin_ops.h"
#include "service/admin/dump.h"
#include "storage/storage.h"
#include "testutil/engine_sync.h"
#include "testutil/http_client.h"
#include "testutil/wait.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using testutil::WriteSync;

constexpr char kToken[] = "dump-test-access-token-0123";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The dump with every versionstamp blanked: what must survive a round trip.
std::string WithoutVersionstamps(const std::string& dump) {
  static const std::regex kStamp("\"versionstamp\":\"[0-9a-f]{20}\"");
  return std::regex_replace(dump, kStamp, "\"versionstamp\":\"-\"");
}

size_t CountLines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string StringKey(const std::string& prefix, int i) {
  return codec::EncodeKey({codec::KeyPart::String(prefix), codec::KeyPart::Int(i)});
}

std::string DumpLineOf(const std::string& key, const std::string& value_json) {
  auto v = codec::KvValueFromJson(value_json);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  auto line = service::DumpLine(Entry{key, v->data, v->encoding, 1});
  EXPECT_TRUE(line.ok());
  return *line;
}

// --- Engine::SnapshotScan -------------------------------------------------------------------

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-scan-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    storage::StorageOptions so;
    so.location = dir_.string();
    auto s = storage::OpenStorage(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    storage_ = std::move(*s);
    auto rec = storage_->catalog().FindDatabase("default");
    ASSERT_TRUE(rec.ok());
    auto backend = storage_->OpenBackend(*rec);
    ASSERT_TRUE(backend.ok());
    engine::EngineOptions eo;
    eo.reader_threads = 2;
    auto e = engine::Engine::Open(std::move(*backend), eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
    for (int b = 0; b < 5; ++b) {
      AtomicWrite w;
      for (int i = 0; i < 500; ++i) {
        w.mutations.push_back(testutil::Set(StringKey("k", b * 500 + i), "v"));
      }
      ASSERT_TRUE(WriteSync(*engine_, std::move(w)).ok());
    }
  }
  void TearDown() override {
    engine_.reset();
    storage_.reset();
    fs::remove_all(dir_);
  }

  fs::path dir_;
  std::unique_ptr<storage::Storage> storage_;
  std::shared_ptr<engine::Engine> engine_;
};

TEST_F(ScanTest, PagesComeFromOneSnapshotWhileWritesCommit) {
  std::promise<void> finished;
  std::vector<std::string> keys;
  std::vector<int64_t> versions;
  std::vector<int64_t> page_sizes;
  bool wrote = false;
  engine_->SnapshotScan("\x00", "\xff", 1000, [&](Result<engine::ScanPage> page) {
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) {
      finished.set_value();
      return false;
    }
    page_sizes.push_back(static_cast<int64_t>(page->entries.size()));
    versions.push_back(page->version);
    for (const Entry& e : page->entries) keys.push_back(e.key);
    if (!wrote) {
      // Commits between pages: a key after every one, and a deletion of a later one. The
      // scan must see neither (this runs on the reader thread; the writer is independent).
      wrote = true;
      AtomicWrite w;
      w.mutations.push_back(testutil::Set(StringKey("z", 1), "new"));
      w.mutations.push_back(Mutation{StringKey("k", 2400), MutationType::kDelete});
      auto r = WriteSync(*engine_, std::move(w));
      EXPECT_TRUE(r.ok() && r->ok);
    }
    if (page->last) finished.set_value();
    return true;
  });
  ASSERT_EQ(finished.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(keys.size(), 2500u);
  EXPECT_EQ(page_sizes, (std::vector<int64_t>{1000, 1000, 500}));
  for (int64_t v : versions) EXPECT_EQ(v, versions.front());
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_GT(engine_->committed_version(), versions.front());
}

TEST_F(ScanTest, StopsEarlyAndRefusesBeyondTheLimit) {
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::promise<int> pages_seen;
  int pages = 0;
  engine_->SnapshotScan("\x00", "\xff", 100, [&](Result<engine::ScanPage> page) {
    EXPECT_TRUE(page.ok());
    if (++pages == 1) {
      entered.set_value();
      released.wait();
      return true;
    }
    pages_seen.set_value(pages);
    return false;  // stop after the second page
  });
  entered.get_future().wait();
  // The first scan holds its reader: a second one (max_snapshot_scans = 1) is refused at once.
  std::optional<Status> refused;
  engine_->SnapshotScan("\x00", "\xff", 100, [&](Result<engine::ScanPage> page) {
    refused = page.status();
    return false;
  });
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code(), StatusCode::kUnavailable);
  EXPECT_NE(refused->message().find("Another export"), std::string::npos);
  // Point reads still work on the other reader.
  auto r = testutil::ReadSync(*engine_, {ReadRange{StringKey("k", 1), StringKey("k", 1) + '\0'}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ranges[0].size(), 1u);
  release.set_value();
  EXPECT_EQ(pages_seen.get_future().get(), 2);
  // Once it ended (its slot is freed after on_page returned false), a new scan may run.
  Result<size_t> got = Unavailable("no scan ran");
  const bool ran = testutil::WaitFor([&] {
    std::promise<Result<size_t>> total;
    size_t n = 0;
    engine_->SnapshotScan(StringKey("k", 0), StringKey("k", 10), 3,
                          [&](Result<engine::ScanPage> p) {
                            if (!p.ok()) {
                              total.set_value(p.status());
                              return false;
                            }
                            n += p->entries.size();
                            if (p->last) total.set_value(n);
                            return true;
                          });
    got = total.get_future().get();
    return got.ok();
  });
  ASSERT_TRUE(ran) << "a new scan after the first one ended: " << got.status().ToString();
  EXPECT_EQ(*got, 10u);
}

// --- The CLI on a data directory --------------------------------------------------------------

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-dump-" + HexEncode(RandomBytes(6)));
    storage::StorageOptions so;
    so.location = dir_.string();
    auto s = storage::OpenStorage(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    storage_ = std::move(*s);
    service::AdminOps ops(&storage_->catalog(), storage_.get());
    for (const char* name : {"src", "dst"}) ASSERT_TRUE(ops.CreateDatabase(name).ok());
  }
  void TearDown() override {
    storage_.reset();
    fs::remove_all(dir_);
  }

  std::shared_ptr<engine::Engine> OpenEngine(const std::string& db) {
    auto rec = storage_->catalog().FindDatabase(db);
    EXPECT_TRUE(rec.ok());
    auto backend = storage_->OpenBackend(*rec);
    EXPECT_TRUE(backend.ok());
    auto e = engine::Engine::Open(std::move(*backend), engine::EngineOptions{});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(*e);
  }

  // Every V8 sample of the fixture corpus, KvU64 and raw bytes, under every key-part type.
  void FillWithEveryValue(const std::string& db) {
    auto engine = OpenEngine(db);
    const std::string dir = std::string(KVC_FIXTURES_DIR) + "/v8/";
    rapidjson::Document manifest;
    const std::string text = ReadFile(dir + "manifest.json");
    manifest.Parse(text.data(), text.size());
    ASSERT_FALSE(manifest.HasParseError());
    AtomicWrite w;
    for (const auto& s : manifest["samples"].GetArray()) {
      const std::string file = s["file"].GetString();
      Mutation m;
      m.key = codec::EncodeKey({codec::KeyPart::String("fx"), codec::KeyPart::String(file)});
      m.value = KvValue{ReadFile(dir + file), static_cast<ValueEncoding>(s["encoding"].GetInt())};
      w.mutations.push_back(std::move(m));
      if (w.mutations.size() == 50) {
        auto r = WriteSync(*engine, std::move(w));
        ASSERT_TRUE(r.ok() && r->ok) << (r.ok() ? "check" : r.status().ToString());
        w = AtomicWrite();
      }
    }
    const std::vector<codec::KeyPart> parts = {
        codec::KeyPart::Bytes(std::string("\x00\x01\xff", 3)),
        codec::KeyPart::String("s"),
        codec::KeyPart::Int(-12345678901234),
        codec::KeyPart::Float(-0.5),
        codec::KeyPart::Bool(false),
        codec::KeyPart::Bool(true)};
    for (size_t i = 0; i < parts.size(); ++i) {
      Mutation m;
      m.key = codec::EncodeKey({codec::KeyPart::String("parts"), parts[i]});
      m.value = i % 2 ? KvValue{std::string("\x05\0\0\0\0\0\0\0", 8), ValueEncoding::kLe64}
                      : KvValue{std::string("raw\0bytes", 9), ValueEncoding::kBytes};
      w.mutations.push_back(std::move(m));
    }
    auto r = WriteSync(*engine, std::move(w));
    ASSERT_TRUE(r.ok() && r->ok);
  }

  cli::DumpConfig Config(const std::string& db) const {
    cli::DumpConfig c;
    c.db = db;
    c.data_dir = dir_.string();
    c.quiet = true;
    return c;
  }

  std::string Export(const std::string& db, const std::string& prefix = "") {
    cli::DumpConfig c = Config(db);
    c.prefix = prefix;
    std::ostringstream out;
    auto s = cli::RunExport(c, out);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      EXPECT_EQ(static_cast<size_t>(s->entries), CountLines(out.str()));
    }
    return out.str();
  }

  Result<service::ImportStats> Import(cli::DumpConfig c, const std::string& dump) {
    std::istringstream in(dump);
    std::ostringstream log;
    return cli::RunImport(c, in, log);
  }

  fs::path dir_;
  std::unique_ptr<storage::Storage> storage_;
};

TEST_F(DumpTest, RoundTripKeepsEveryValueButNotVersionstamps) {
  FillWithEveryValue("src");
  const std::string dump = Export("src");
  ASSERT_GE(CountLines(dump), 240u);
  auto stats = Import(Config("dst"), dump);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(static_cast<size_t>(stats->entries), CountLines(dump));
  EXPECT_EQ(stats->bytes, static_cast<int64_t>(dump.size()));
  EXPECT_EQ(stats->batches, 1);  // 243 entries fit one batch of 500
  const std::string copy = Export("dst");
  EXPECT_EQ(WithoutVersionstamps(copy), WithoutVersionstamps(dump));
  EXPECT_NE(copy, dump);  // new versionstamps
  // KvU64 and raw bytes keep their encodings byte for byte.
  EXPECT_NE(dump.find(R"({"type":"KvU64","value":"5"})"), std::string::npos);
  EXPECT_NE(dump.find(R"({"type":"Uint8Array","value":"cmF3AGJ5dGVz"})"), std::string::npos);

  // A prefix exports only what is under it; merge adds to what is there.
  const std::string parts = Export("dst", R"([{"type":"string","value":"parts"}])");
  EXPECT_EQ(CountLines(parts), 6u);
}

TEST_F(DumpTest, BadLineAppliesOnlyEarlierCompleteBatches) {
  std::string dump;
  for (int i = 1; i <= 1200; ++i) {
    dump += i == 1100 ? "{\"key\": oops}\n"
                      : DumpLineOf(StringKey("n", i),
                                   R"({"type":"number","value":)" + std::to_string(i) + "}");
  }
  auto stats = Import(Config("dst"), dump);  // batches of 500
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = stats.status().message();
  EXPECT_EQ(msg.rfind("line 1100: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("the 1000 entries of lines 1-1000 (2 complete batches) were imported; "
                     "nothing from line 1001 on was written."),
            std::string::npos)
      << msg;
  const std::string now = Export("dst");
  EXPECT_EQ(CountLines(now), 1000u);
  EXPECT_NE(now.find(R"("value":1000})"), std::string::npos);
  EXPECT_EQ(now.find(R"("value":1001})"), std::string::npos);
}

TEST_F(DumpTest, ReplaceDeletesFirstOnlyOnceADumpParses) {
  std::string old_dump;
  for (int i = 0; i < 700; ++i)
    old_dump += DumpLineOf(StringKey("old", i), R"({"type":"null","value":null})");
  old_dump += DumpLineOf(codec::EncodeKey({codec::KeyPart::String("keep")}),
                         R"({"type":"boolean","value":true})");
  ASSERT_TRUE(Import(Config("dst"), old_dump).ok());

  // Not a dump: nothing is deleted.
  cli::DumpConfig replace = Config("dst");
  replace.mode = "replace";
  EXPECT_FALSE(Import(replace, "this is not json\n").ok());
  EXPECT_EQ(CountLines(Export("dst")), 701u);

  // Replace under a prefix: only the keys under it go.
  const std::string fresh = DumpLineOf(StringKey("old", 5000), R"({"type":"string","value":"x"})");
  replace.prefix = R"([{"type":"string","value":"old"}])";
  auto st = Import(replace, fresh);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->deleted, 700);
  EXPECT_EQ(st->entries, 1);
  std::string now = Export("dst");
  EXPECT_EQ(CountLines(now), 2u);
  EXPECT_NE(now.find("keep"), std::string::npos);

  // A key outside the prefix is a bad line.
  auto outside = Import(replace, DumpLineOf(codec::EncodeKey({codec::KeyPart::String("new")}),
                                            R"({"type":"null","value":null})"));
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("line 1: the key is not under the prefix"),
            std::string::npos);

  // Replace everything.
  replace.prefix.clear();
  st = Import(replace, fresh);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->deleted, 2);
  EXPECT_EQ(WithoutVersionstamps(Export("dst")), WithoutVersionstamps(fresh));
}

TEST_F(DumpTest, MissingDatabaseAndDirectory) {
  auto missing = cli::RunExport(Config("nope"), std::cout);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  cli::DumpConfig c = Config("src");
  c.data_dir = (dir_ / "absent").string();
  auto no_dir = Import(c, "");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "absent"));  // never made by a failed export or import
}

// --- Through a running server -------------------------------------------------------------------

class DumpServerTest : public DumpTest {
 protected:
  void SetUp() override {
    DumpTest::SetUp();
    FillWithEveryValue("src");
  }
  void TearDown() override {
    app_.reset();
    DumpTest::TearDown();
  }

  void StartServer(int64_t stall_timeout_ms = 60000) {
    cli::ServeConfig c;
    c.data_dir = dir_.string();
    c.access_token = kToken;
    c.net.host = "127.0.0.1";
    c.net.port = 0;
    c.sync = "normal";
    c.admin.export_options.stall_timeout_ms = stall_timeout_ms;
    auto app = cli::Application::Open(c);
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    const std::string url = app_->url();
    port_ = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
  }

  testutil::Headers Auth() const { return {{"authorization", std::string("Bearer ") + kToken}}; }

  cli::DumpConfig UrlConfig(const std::string& db) const {
    cli::DumpConfig c = Config(db);
    c.url = app_->url();
    c.token = kToken;
    return c;
  }

  std::unique_ptr<cli::Application> app_;
  uint16_t port_ = 0;
};

TEST_F(DumpServerTest, ExportOverBothProtocolsIsTheDirectExport) {
  const std::string direct = Export("src");  // the data directory, before the server runs
  StartServer();
  const std::string path = "/admin/v1/databases/src/export";
  auto h1 = testutil::Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h1.ok());
  auto r1 = (*h1)->Post(path, Auth(), "");
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->status, 200) << r1->body;
  EXPECT_EQ(r1->headers["content-type"], "application/x-ndjson");
  EXPECT_EQ(r1->headers["x-kvc-versionstamp"].size(), 20u);
  EXPECT_EQ(r1->body, direct);
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  auto r2 = (*h2)->Post(path, Auth(), R"({"prefix":[{"type":"string","value":"parts"}]})");
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->status, 200);
  EXPECT_EQ(CountLines(r2->body), 6u);
  EXPECT_EQ(r2->headers["x-kvc-versionstamp"], r1->headers["x-kvc-versionstamp"]);
  // The direct export works beside the server too (readers need no claim).
  EXPECT_EQ(Export("src"), direct);
  // A bad selector is a 400 with the admin error body.
  auto bad = (*h2)->Post(path, Auth(), R"({"prefix":"nope"})");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_TRUE(codec::ValidateAdminJson("Error", bad->body).ok()) << bad->body;
}

TEST_F(DumpServerTest, ImportOverTheApi) {
  const std::string dump = Export("src");
  StartServer();
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  const std::string base = "/admin/v1/databases/dst/import";
  auto ok = (*h2)->Post(base + "?mode=replace", Auth(), dump);
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(codec::ValidateAdminJson("ImportResult", ok->body).ok()) << ok->body;
  auto answer = codec::ParseAdminImportAnswer(ok->body);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(static_cast<size_t>(answer->stats.entries), CountLines(dump));
  EXPECT_EQ(answer->stats.bytes, static_cast<int64_t>(dump.size()));
  auto copy = (*h2)->Post("/admin/v1/databases/dst/export", Auth(), "");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(WithoutVersionstamps(copy->body), WithoutVersionstamps(dump));

  // A bad line, numbered from first_line: 400 naming it, earlier complete batches written.
  std::string body;
  for (int i = 0; i < 600; ++i) {
    body += i == 550 ? "{}\n" : DumpLineOf(StringKey("api", i), R"({"type":"null","value":null})");
  }
  auto bad = (*h2)->Post(base + "?first_line=1001", Auth(), body);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_TRUE(codec::ValidateAdminJson("ImportError", bad->body).ok()) << bad->body;
  auto err = codec::ParseAdminImportAnswer(bad->body);
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->line, 1551);
  EXPECT_EQ(err->stats.entries, 500);
  EXPECT_EQ(err->stats.last_line, 1500);
  EXPECT_EQ(err->error.rfind("line 1551: ", 0), 0u) << err->error;

  // Bad query parameters are refused before anything is written.
  for (const std::string q :
       {"?mode=overwrite", "?mdoe=replace", "?first_line=0", "?prefix=%5Bnot-json"}) {
    auto r = (*h2)->Post(base + q, Auth(), dump);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << q << ": " << r->body;
  }
  // Over HTTP/1.1 too.
  auto h1 = testutil::Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h1.ok());
  auto r = (*h1)->Post(base + "?mode=merge", Auth(), dump);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(DumpServerTest, CliThroughTheServerInSeveralRequests) {
  StartServer();
  cli::DumpConfig ex = UrlConfig("src");
  std::ostringstream out;
  auto exported = cli::RunExport(ex, out);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  const std::string dump = out.str();
  EXPECT_EQ(static_cast<size_t>(exported->entries), CountLines(dump));
  cli::DumpConfig im = UrlConfig("dst");
  im.mode = "replace";
  im.request_bytes = 64 * 1024;  // several requests
  im.batch_entries = 20;
  auto stats = Import(im, dump);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(static_cast<size_t>(stats->entries), CountLines(dump));
  EXPECT_GT(stats->batches, 3);
  std::ostringstream copy;
  ASSERT_TRUE(cli::RunExport(UrlConfig("dst"), copy).ok());
  EXPECT_EQ(WithoutVersionstamps(copy.str()), WithoutVersionstamps(dump));

  // A bad line in a later request is named by its line in the whole dump.
  std::string big;
  for (int i = 1; i <= 3000; ++i) {
    big += i == 2500 ? "nope\n" : DumpLineOf(StringKey("cli", i), R"({"type":"number","value":1})");
  }
  auto bad = Import(im, big);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("line 2500: ", 0), 0u) << bad.status().message();
  EXPECT_NE(bad.status().message().find("Earlier requests had imported"), std::string::npos);
  cli::DumpConfig wrong = UrlConfig("dst");
  wrong.token = "not-the-token-at-all";
  auto denied = Import(wrong, big);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kUnauthenticated);
}

TEST_F(DumpServerTest, DirectImportIsRefusedWhileTheServerRuns) {
  StartServer();
  auto refused = Import(Config("dst"), "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("kvconnect.lock"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--url"), std::string::npos);
  // A second server on the same directory is refused as well.
  cli::ServeConfig c;
  c.data_dir = dir_.string();
  c.access_token = kToken;
  c.net.host = "127.0.0.1";
  auto second = cli::Application::Open(c);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  // Once the server is gone, the claim is free.
  app_.reset();
  auto ok = Import(Config("dst"), "");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST_F(DumpServerTest, StalledClientIsCutOffAndExportsAreLimited) {
  {  // ~53 MB of dump, far more than the window and the socket buffers
    auto engine = OpenEngine("dst");
    for (int b = 0; b < 80; ++b) {
      AtomicWrite w;
      for (int i = 0; i < 50; ++i) {
        w.mutations.push_back(testutil::Set(StringKey("big", b * 50 + i), std::string(10000, 'x')));
      }
      ASSERT_TRUE(WriteSync(*engine, std::move(w)).ok());
    }
  }
  StartServer(/*stall_timeout_ms=*/1000);
  auto h1 = testutil::Http1Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h1.ok());
  auto stream = (*h1)->OpenStream("/admin/v1/databases/dst/export", Auth(), "");
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  // The 200 came with the scan's first page: the scan, and with it the database's one export
  // slot, is running. While the client stalls it holds that slot.
  ASSERT_EQ((*stream)->status(), 200);
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  auto second = (*h2)->Post("/admin/v1/databases/dst/export", Auth(), "");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, 503) << second->body.substr(0, 200);
  // Take nothing until the server has cut the stalled export off (after the 1 s stall timeout),
  // which frees the slot. An export of an empty range probes for it: it ends at once, so it never
  // holds the slot itself. (Probing with the whole 53 MB export did: under ThreadSanitizer on a
  // loaded machine its reader could not keep up either, was cut off for stalling in turn, and
  // every later probe found the slot taken.)
  const std::string none = R"({"prefix":[{"type":"string","value":"none"}]})";
  Result<testutil::HttpResponse> r = Unavailable("no export tried");
  ASSERT_TRUE(testutil::WaitFor(
      [&] {
        r = (*h2)->Post("/admin/v1/databases/dst/export", Auth(), none);
        return r.ok() && r->status != 503;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100)))
      << "the stalled export's slot to be freed; last answer: "
      << (r.ok() ? std::to_string(r->status) + " " + r->body.substr(0, 200)
                 : r.status().ToString());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(CountLines(r->body), 0u);
  // Then a reader that keeps up gets a whole export: the first 100 entries (1 MB).
  r = (*h2)->Post("/admin/v1/databases/dst/export", Auth(),
                  R"({"start":[{"type":"string","value":"big"},{"type":"bigint","value":"0"}],)"
                  R"("end":[{"type":"string","value":"big"},{"type":"bigint","value":"100"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 200);
  EXPECT_EQ(CountLines(r->body), 100u);
  // The stalled body ends broken, never cleanly.
  size_t got = 0;
  for (;;) {
    auto piece = (*stream)->Read(std::chrono::milliseconds(2000));
    if (!piece.ok() || piece->empty()) break;
    got += piece->size();
  }
  EXPECT_FALSE((*stream)->finished());
  EXPECT_LT(got, size_t{40} << 20);
}

TEST_F(DumpServerTest, SlowReaderThatKeepsTakingIsNotCutOff) {
  {  // ~4 MB: a page (256 entries) alone is 2.5 MB, more than the 1 MB window
    auto engine = OpenEngine("dst");
    for (int b = 0; b < 8; ++b) {
      AtomicWrite w;
      for (int i = 0; i < 50; ++i) {
        w.mutations.push_back(testutil::Set(StringKey("big", b * 50 + i), std::string(10000, 'x')));
      }
      ASSERT_TRUE(WriteSync(*engine, std::move(w)).ok());
    }
  }
  StartServer(/*stall_timeout_ms=*/1000);
  // HTTP/2, where flow control holds the dump in the session until the client takes it
  // (over HTTP/1.1 the kernel's socket buffers would swallow a page at once).
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  auto stream = (*h2)->OpenStream("/admin/v1/databases/dst/export", Auth(), "");
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  ASSERT_EQ((*stream)->status(), 200);
  // Pauses 300 ms after each 200 KB it takes (about 0.7 MB/s): draining one page takes this
  // reader longer than the stall timeout, but it never goes a stall timeout without taking.
  std::string body;
  size_t since_pause = 0;
  for (;;) {
    auto piece = (*stream)->Read(std::chrono::milliseconds(500));
    if (!piece.ok()) break;
    body += *piece;
    since_pause += piece->size();
    if (since_pause >= (size_t{200} << 10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      since_pause = 0;
    }
  }
  EXPECT_TRUE((*stream)->finished()) << "cut off after " << body.size() << " bytes";
  EXPECT_EQ(CountLines(body), 400u);
}

// --- Expiry -------------------------------------------------------------------------------------

// Writes "hour" (expiring in an hour), "never" and "short" (expiring `short_ms` from now) into
// `db`; returns the absolute expiries of hour and short.
std::pair<int64_t, int64_t> WriteExpiring(engine::Engine& engine, int64_t short_ms) {
  const int64_t now = NowUnixMs();
  const std::pair<int64_t, int64_t> at{now + 3'600'000, now + short_ms};
  AtomicWrite w;
  w.mutations.push_back(testutil::Set(StringKey("hour", 1), "h", at.first));
  w.mutations.push_back(testutil::Set(StringKey("never", 1), "n"));
  w.mutations.push_back(testutil::Set(StringKey("short", 1), "s", at.second));
  auto r = WriteSync(engine, std::move(w));
  EXPECT_TRUE(r.ok() && r->ok);
  return at;
}

// The stored row of `key` in `db` (expired or not), read straight from storage.
std::optional<storage::StoredRow> RowOf(storage::Storage& s, const std::string& db,
                                        const std::string& key) {
  auto rec = s.catalog().FindDatabase(db);
  EXPECT_TRUE(rec.ok());
  auto backend = s.OpenBackend(*rec);
  EXPECT_TRUE(backend.ok());
  auto reader = (*backend)->OpenReader();
  EXPECT_TRUE(reader.ok() && (*reader)->Begin().ok());
  auto row = (*reader)->Get(key);
  (*reader)->End();
  EXPECT_TRUE(row.ok());
  return row.ok() ? *row : std::nullopt;
}

// A dump carries each entry's expiry; an import keeps it, and leaves out (and counts) an entry
// whose expiry passed between the export and the import.
TEST_F(DumpTest, ExpiryRoundTripsAndEntriesExpiredByImportAreSkipped) {
  std::pair<int64_t, int64_t> at;
  {
    auto engine = OpenEngine("src");
    at = WriteExpiring(*engine, 4000);
  }
  const std::string dump = Export("src");
  ASSERT_EQ(CountLines(dump), 3u) << dump;  // exported while "short" was still live
  const std::string hour_at = FormatRfc3339Utc(at.first);
  EXPECT_NE(dump.find(R"(,"expires_at":")" + hour_at + "\"}\n"), std::string::npos) << dump;
  EXPECT_NE(dump.find(R"(,"expires_at":")" + FormatRfc3339Utc(at.second) + "\"}\n"),
            std::string::npos)
      << dump;
  // Past short's expiry, the import skips it.
  while (NowUnixMs() <= at.second) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto stats = Import(Config("dst"), dump);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->entries, 2);
  EXPECT_EQ(stats->skipped, 1);
  auto hour = RowOf(*storage_, "dst", StringKey("hour", 1));
  ASSERT_TRUE(hour.has_value());
  EXPECT_EQ(hour->expire_at_ms, at.first);
  auto never = RowOf(*storage_, "dst", StringKey("never", 1));
  ASSERT_TRUE(never.has_value());
  EXPECT_EQ(never->expire_at_ms, -1);
  EXPECT_FALSE(RowOf(*storage_, "dst", StringKey("short", 1)).has_value());
  // The copy exports as the source did, but for the skipped entry and the versionstamps.
  const std::string copy = Export("dst");
  ASSERT_EQ(CountLines(copy), 2u) << copy;
  EXPECT_NE(copy.find(R"(,"expires_at":")" + hour_at + "\"}\n"), std::string::npos) << copy;
}

TEST_F(DumpServerTest, ExpiryThroughTheApi) {
  std::pair<int64_t, int64_t> at;
  {
    auto engine = OpenEngine("dst");
    at = WriteExpiring(*engine, 3'600'000);
  }
  const std::string direct = Export("dst");
  StartServer();
  auto h2 = testutil::Http2Client::Connect("127.0.0.1", port_);
  ASSERT_TRUE(h2.ok());
  // The API's export is the data directory's, expiry included.
  auto exported = (*h2)->Post("/admin/v1/databases/dst/export", Auth(),
                              R"({"prefix":[{"type":"string","value":"hour"}]})");
  ASSERT_TRUE(exported.ok());
  ASSERT_EQ(exported->status, 200);
  EXPECT_NE(direct.find(exported->body), std::string::npos) << exported->body;
  EXPECT_NE(exported->body.find(FormatRfc3339Utc(at.first)), std::string::npos);
  // An import answer counts what it skipped; an entry without expires_at never expires.
  const std::string stale =
      R"({"key":[{"type":"string","value":"stale"}],"value":{"type":"null","value":null},)"
      R"("versionstamp":"00000000000000010000","expires_at":"2001-02-03T04:05:06Z"})"
      "\n";
  auto ok = (*h2)->Post("/admin/v1/databases/src/import", Auth(), exported->body + stale);
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(codec::ValidateAdminJson("ImportResult", ok->body).ok()) << ok->body;
  auto answer = codec::ParseAdminImportAnswer(ok->body);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->stats.entries, 1);
  EXPECT_EQ(answer->stats.skipped, 1);
  auto got =
      (*h2)->Post("/admin/v1/databases/src/entries/get", Auth(),
                  R"({"key":[{"type":"string","value":"hour"},{"type":"bigint","value":"1"}]})");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(codec::ValidateAdminJson("GetResponse", got->body).ok()) << got->body;
  EXPECT_NE(got->body.find(R"("expires_at":")" + FormatRfc3339Utc(at.first) + "\""),
            std::string::npos)
      << got->body;
  // `kvconnect import --url` adds up what each request skipped.
  cli::DumpConfig c = UrlConfig("src");
  c.request_bytes = 1;  // one line per request
  auto stats = Import(c, stale + stale + exported->body);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->entries, 1);
  EXPECT_EQ(stats->skipped, 2);
}

}  // namespace
}  // namespace kvc
