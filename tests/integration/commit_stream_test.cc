// The engine's commit stream and what listens to it: records published once per commit in
// version order, watchers that apply changes without reading storage, retiring an engine,
// writer tasks on an injected clock, and engines that share one database (not the sole
// writer: versions allocated under the storage lock, changes through the change feed).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "codec/datapath_codec.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "service/http_status.h"
#include "service/kvconnect/watch_stream.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/engine_sync.h"
#include "testutil/shared_backend.h"
#include "testutil/wait.h"

namespace kvc::engine {
namespace {
namespace fs = std::filesystem;

// Counts snapshot reads (Reader::Begin) across every reader of a backend.
class CountingReader : public storage::Reader {
 public:
  CountingReader(std::unique_ptr<storage::Reader> inner, std::atomic<int64_t>* begins)
      : inner_(std::move(inner)), begins_(begins) {}
  Status Begin() override {
    begins_->fetch_add(1);
    return inner_->Begin();
  }
  Status Scan(const ReadRange& r, int64_t now, std::vector<Entry>* out) override {
    return inner_->Scan(r, now, out);
  }
  Result<std::optional<storage::StoredRow>> Get(std::string_view key) override {
    return inner_->Get(key);
  }
  Result<int64_t> DataVersion() override { return inner_->DataVersion(); }
  void End() override { inner_->End(); }
  Result<storage::StorageStats> Stats() override { return inner_->Stats(); }

 private:
  std::unique_ptr<storage::Reader> inner_;
  std::atomic<int64_t>* begins_;
};

class CountingBackend : public storage::Backend {
 public:
  explicit CountingBackend(std::unique_ptr<storage::Backend> inner) : inner_(std::move(inner)) {}
  const std::string& database_id() const override { return inner_->database_id(); }
  storage::BackendCapabilities capabilities() const override { return inner_->capabilities(); }
  Result<int64_t> LoadDataVersion() override { return inner_->LoadDataVersion(); }
  Result<std::unique_ptr<storage::Reader>> OpenReader() override {
    KVC_ASSIGN_OR_RETURN(auto r, inner_->OpenReader());
    return std::unique_ptr<storage::Reader>(
        std::make_unique<CountingReader>(std::move(r), &begins));
  }
  Result<std::unique_ptr<storage::Writer>> OpenWriter() override { return inner_->OpenWriter(); }
  std::atomic<int64_t> begins{0};

 private:
  std::unique_ptr<storage::Backend> inner_;
};

// Keeps every published group.
class Recorder : public CommitListener {
 public:
  void OnCommit(const storage::CommitGroup& g) override {
    std::lock_guard<std::mutex> lock(mu);
    groups.push_back(g);
    cv.notify_all();
  }
  void OnRetire() override { retired = true; }
  // Waits until a record with `version` was published.
  bool WaitFor(int64_t version) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] {
      for (const auto& g : groups) {
        for (const auto& r : g.records) {
          if (r.version == version) return true;
        }
      }
      return false;
    });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<storage::CommitGroup> groups;
  std::atomic<bool> retired{false};
};

// Collects watch frames.
class FrameSink : public service::StreamSink {
 public:
  void Send(std::string bytes) override {
    std::lock_guard<std::mutex> lock(mu);
    frames.push_back(std::move(bytes));
    cv.notify_all();
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    cv.notify_all();
  }
  bool WaitFrames(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return frames.size() >= n; });
  }
  bool WaitClosed() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return closed; });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return frames.size();
  }
  std::string last() {
    std::lock_guard<std::mutex> lock(mu);
    return frames.empty() ? std::string() : frames.back();
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> frames;
  bool closed = false;
};

using testutil::Set;

class CommitStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-stream-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path() const { return (dir_ / "db.sqlite3").string(); }

  std::unique_ptr<Engine> OpenEngine(EngineOptions o = {}, CountingBackend** counting = nullptr) {
    auto b = storage::SqliteBackend::Open(Path(), {});
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    auto cb = std::make_unique<CountingBackend>(std::move(*b));
    if (counting) *counting = cb.get();
    auto e = Engine::Open(std::move(cb), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(*e) : nullptr;
  }
  static Result<CommitResult> Write(Engine& e, AtomicWrite w) {
    return testutil::WriteSync(e, std::move(w));
  }
  static Result<ReadResult> Read(Engine& e, std::vector<ReadRange> ranges) {
    return testutil::ReadSync(e, std::move(ranges));
  }

  fs::path dir_;
};

TEST_F(CommitStreamTest, EveryCommitIsPublishedOnceInVersionOrder) {
  auto engine = OpenEngine();
  auto rec = std::make_shared<Recorder>();
  engine->AddListener(rec);
  constexpr int kThreads = 6, kPerThread = 60;
  std::mutex mu;
  std::map<int64_t, std::string> acked;  // version -> key written
  std::atomic<int> check_failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = "k" + std::to_string(t) + "-" + std::to_string(i % 7);
        AtomicWrite w;
        if (i % 5 == 4) w.checks.push_back(Check{key, std::string(10, '\x01')});  // fails
        w.mutations.push_back(Set(key, std::to_string(i)));
        auto r = Write(*engine, std::move(w));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        std::lock_guard<std::mutex> lock(mu);
        if (r->ok) {
          acked[r->version] = key;
        } else {
          ++check_failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(rec->WaitFor(acked.rbegin()->first));
  engine->RemoveListener(rec.get());
  std::map<int64_t, std::string> published;
  int64_t last = -1;
  size_t max_group = 0;
  for (const auto& g : rec->groups) {
    EXPECT_EQ(g.origin, storage::CommitOrigin::kWrite);
    EXPECT_GT(g.commit_us, 0);
    max_group = std::max(max_group, g.records.size());
    for (const auto& r : g.records) {
      EXPECT_GT(r.version, last) << "records must come in increasing version order";
      last = r.version;
      ASSERT_EQ(r.changes.size(), 1u);
      ASSERT_TRUE(r.changes[0].row.has_value());
      EXPECT_EQ(r.changes[0].row->version, r.version);
      EXPECT_TRUE(published.emplace(r.version, r.changes[0].key).second) << "published twice";
    }
  }
  EXPECT_EQ(published, acked) << "exactly the acknowledged writes, each once";
  EXPECT_EQ(check_failures.load(), kThreads * (kPerThread / 5));
  EXPECT_EQ(last, engine->committed_version());
}

TEST_F(CommitStreamTest, WatchersApplyChangesWithoutReadingStorage) {
  CountingBackend* counting = nullptr;
  EngineOptions o;
  o.read_cache_bytes = 0;  // every read would show in the count
  auto engine = OpenEngine(o, &counting);
  std::shared_ptr<Engine> shared(std::move(engine));
  constexpr int kWatchers = 200;
  std::vector<std::shared_ptr<service::WatchStream>> streams;
  std::vector<std::shared_ptr<FrameSink>> sinks;
  for (int i = 0; i < kWatchers; ++i) {
    auto s = std::make_shared<service::WatchStream>(shared, std::vector<std::string>{"a", "b"});
    auto sink = std::make_shared<FrameSink>();
    s->Start(sink);
    streams.push_back(s);
    sinks.push_back(sink);
  }
  for (auto& sink : sinks) ASSERT_TRUE(sink->WaitFrames(1));
  const int64_t reads_after_first_frames = counting->begins.load();
  EXPECT_EQ(reads_after_first_frames, kWatchers) << "one snapshot per stream for its first frame";
  constexpr int kWrites = 20;
  for (int i = 0; i < kWrites; ++i) {
    AtomicWrite w;
    w.mutations.push_back(Set(i % 2 ? "a" : "b", "v" + std::to_string(i)));
    w.mutations.push_back(Set("unwatched", "x"));
    ASSERT_TRUE(Write(*shared, std::move(w)).ok());
  }
  for (auto& sink : sinks) ASSERT_TRUE(sink->WaitFrames(1 + kWrites));
  EXPECT_EQ(counting->begins.load(), reads_after_first_frames)
      << "watchers must not re-read storage per change";
  // The last frame carries the latest values of both keys.
  auto r = Read(*shared, {ReadRange{"a", std::string("a\0", 2), 1, false},
                          ReadRange{"b", std::string("b\0", 2), 1, false}});
  ASSERT_TRUE(r.ok());
  std::vector<std::optional<Entry>> expected = {r->ranges[0][0], r->ranges[1][0]};
  EXPECT_EQ(sinks[0]->last(), codec::EncodeWatchFrame(expected));
  EXPECT_EQ(sinks[kWatchers - 1]->last(), codec::EncodeWatchFrame(expected));
  // A delete shows as an absent key.
  AtomicWrite del;
  Mutation d;
  d.key = "a";
  d.type = MutationType::kDelete;
  del.mutations.push_back(d);
  ASSERT_TRUE(Write(*shared, std::move(del)).ok());
  ASSERT_TRUE(sinks[0]->WaitFrames(2 + kWrites));
  expected[0].reset();
  EXPECT_EQ(sinks[0]->last(), codec::EncodeWatchFrame(expected));
  for (auto& s : streams) s->Cancel();
  EXPECT_EQ(shared->watch_count(), 0u);
  // An engine thread may still hold a stream (and so the engine) for a moment; the owner shuts
  // the engine down first, as the Directory does, so its last reference can go anywhere.
  shared->Shutdown();
}

TEST_F(CommitStreamTest, WatchFirstSnapshotIsNotRefusedWhenTheReadQueueIsFull) {
  EngineOptions o;
  o.max_queued_reads = 0;  // every ordinary queued read is refused
  o.read_cache_bytes = 0;
  auto engine = OpenEngine(o);
  std::shared_ptr<Engine> shared(std::move(engine));
  auto r = Read(*shared, {ReadRange{"a", std::string("a\0", 2), 1, false}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  auto s = std::make_shared<service::WatchStream>(shared, std::vector<std::string>{"a"});
  auto sink = std::make_shared<FrameSink>();
  s->Start(sink);
  ASSERT_TRUE(sink->WaitFrames(1));
  EXPECT_FALSE(sink->closed);
  AtomicWrite w;
  w.mutations.push_back(Set("a", "1"));
  ASSERT_TRUE(Write(*shared, std::move(w)).ok());
  ASSERT_TRUE(sink->WaitFrames(2));
  s->Cancel();
  shared->Shutdown();
}

TEST_F(CommitStreamTest, RetiringAnEngineEndsItsWatchStreams) {
  auto engine = OpenEngine();
  std::shared_ptr<Engine> shared(std::move(engine));
  auto rec = std::make_shared<Recorder>();
  shared->AddListener(rec);
  auto s = std::make_shared<service::WatchStream>(shared, std::vector<std::string>{"a"});
  auto sink = std::make_shared<FrameSink>();
  s->Start(sink);
  ASSERT_TRUE(sink->WaitFrames(1));
  shared->Retire();
  EXPECT_TRUE(sink->WaitClosed());
  EXPECT_TRUE(rec->retired);
  // A watch that starts on a retired engine ends at once too.
  auto late = std::make_shared<service::WatchStream>(shared, std::vector<std::string>{"a"});
  auto late_sink = std::make_shared<FrameSink>();
  late->Start(late_sink);
  EXPECT_TRUE(late_sink->WaitClosed());
  // Reads and writes still work until shutdown.
  AtomicWrite w;
  w.mutations.push_back(Set("a", "1"));
  EXPECT_TRUE(Write(*shared, std::move(w)).ok());
  s->Cancel();
  late->Cancel();
  shared->Shutdown();
}

TEST_F(CommitStreamTest, ExpiryRunsOnTheInjectedClockWithoutSleeping) {
  ManualClock clock(1'000'000'000'000);
  EngineOptions o;
  o.clock = &clock;
  auto engine = OpenEngine(o);
  auto rec = std::make_shared<Recorder>();
  engine->AddListener(rec);
  AtomicWrite w;
  w.mutations.push_back(Set("soon", "x", clock.NowMs() + 60'000));
  w.mutations.push_back(Set("later", "y", clock.NowMs() + 3'600'000));
  auto r = Write(*engine, std::move(w));
  ASSERT_TRUE(r.ok() && r->ok);
  clock.Advance(60'001);
  // Reads hide the expired key at once, before any sweep.
  auto read = Read(*engine, {ReadRange{"", "\xff", 10, false}});
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(read->ranges[0].size(), 1u);
  EXPECT_EQ(read->ranges[0][0].key, "later");
  engine->WakeWriter();
  ASSERT_TRUE(rec->WaitFor(r->version + 1)) << "the sweep commits at the next version";
  std::lock_guard<std::mutex> lock(rec->mu);
  const auto& g = rec->groups.back();
  EXPECT_EQ(g.origin, storage::CommitOrigin::kExpiry);
  EXPECT_EQ(g.time_ms, clock.NowMs());
  ASSERT_EQ(g.records.size(), 1u);
  ASSERT_EQ(g.records[0].changes.size(), 1u);
  EXPECT_EQ(g.records[0].changes[0].key, "soon");
  EXPECT_FALSE(g.records[0].changes[0].row.has_value());
}

TEST_F(CommitStreamTest, EnginesSharingADatabaseAllocateVersionsUnderTheStorageLock) {
  auto bus = std::make_shared<testutil::CommitBus>();
  auto open = [&]() -> std::shared_ptr<Engine> {
    auto b = storage::SqliteBackend::Open(Path(), {});
    EXPECT_TRUE(b.ok());
    auto e = Engine::Open(std::make_unique<testutil::SharedBackend>(std::move(*b), bus), {});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::shared_ptr<Engine>(std::move(*e));
  };
  auto a = open();
  auto b = open();
  EXPECT_FALSE(a->capabilities().exclusive_writer);
  EXPECT_FALSE(a->read_cache().enabled()) << "another writer would make cached rows stale";
  auto rec_a = std::make_shared<Recorder>();
  auto rec_b = std::make_shared<Recorder>();
  a->AddListener(rec_a);
  b->AddListener(rec_b);
  // A watcher on b sees writes made through a.
  auto s = std::make_shared<service::WatchStream>(b, std::vector<std::string>{"shared"});
  auto sink = std::make_shared<FrameSink>();
  s->Start(sink);
  ASSERT_TRUE(sink->WaitFrames(1));

  constexpr int kPerEngine = 100;
  std::mutex mu;
  std::set<int64_t> versions;
  std::vector<std::thread> threads;
  for (Engine* e : {a.get(), b.get()}) {
    threads.emplace_back([&, e] {
      for (int i = 0; i < kPerEngine; ++i) {
        AtomicWrite w;
        w.mutations.push_back(Set("shared", std::to_string(i)));
        auto r = Write(*e, std::move(w));
        ASSERT_TRUE(r.ok() && r->ok);
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_TRUE(versions.insert(r->version).second) << "two writers got one version";
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(versions.size(), 2u * kPerEngine);
  const int64_t last = *versions.rbegin();
  ASSERT_TRUE(rec_a->WaitFor(last));
  ASSERT_TRUE(rec_b->WaitFor(last));
  for (Recorder* rec : {rec_a.get(), rec_b.get()}) {
    std::lock_guard<std::mutex> lock(rec->mu);
    int64_t prev = -1;
    std::set<int64_t> seen;
    for (const auto& g : rec->groups) {
      EXPECT_EQ(g.origin, storage::CommitOrigin::kOtherWriter);
      for (const auto& r : g.records) {
        EXPECT_GT(r.version, prev);
        prev = r.version;
        for (const auto& c : r.changes) {
          if (c.row) seen.insert(c.row->version);
        }
      }
    }
    EXPECT_EQ(seen, versions) << "each engine hears every commit, its own and the other's";
  }
  // Both engines agree on the committed version and the watcher's last frame is the latest.
  EXPECT_EQ(a->committed_version(), last);
  EXPECT_EQ(b->committed_version(), last);
  auto r = Read(*a, {ReadRange{"shared", std::string("shared\0", 7), 1, false}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ranges[0].size(), 1u);
  EXPECT_EQ(r->ranges[0][0].version, last);
  const std::string want = codec::EncodeWatchFrame({r->ranges[0][0]});
  EXPECT_TRUE(testutil::WaitFor([&] { return sink->last() == want; }))
      << "the watcher's frame of the last commit";
  EXPECT_EQ(sink->last(), want);
  s->Cancel();
  a->Shutdown();
  b->Shutdown();
}

TEST_F(CommitStreamTest, CorruptRowIsAServerErrorWithALogLineNotAClientError) {
  auto engine = OpenEngine();
  AtomicWrite w;
  w.mutations.push_back(Set("bad", "x"));
  ASSERT_TRUE(Write(*engine, std::move(w)).ok());
  engine.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "update kv set v_encoding = 77", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EngineOptions o;
  o.read_cache_bytes = 0;
  engine = OpenEngine(o);
  auto r = Read(*engine, {ReadRange{"", "\xff", 10, false}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  service::HttpResponse resp = service::ErrorResponse(r.status());
  EXPECT_EQ(resp.status, 500);
  EXPECT_EQ(resp.body.find("77"), std::string::npos) << "no storage detail in the client text";
  EXPECT_NE(resp.body.find("damaged"), std::string::npos);
}

}  // namespace
}  // namespace kvc::engine
