// Several nodes on one PostgreSQL (storage/postgres): engines opened on the same database through
// separate storages, as separate kvconnect processes would. Concurrent check-and-set across
// nodes never lets two writers win, versionstamps are strictly increasing in commit order across
// nodes, a write on one node wakes a watcher on the other, expired keys are swept by one node
// and another takes over when it goes, the catalog and secrets are shared, and a failover to a
// promoted synchronous standby neither loses an acknowledged write nor issues a versionstamp
// twice (versions jump by 2^32 on the new timeline).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "storage/change_log.h"
#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_schema.h"
#include "storage/storage.h"
#include "testutil/engine_sync.h"
#include "testutil/pg_server.h"
#include "testutil/pg_shared.h"
#include "testutil/wait.h"

namespace kvc {
namespace {

using engine::Engine;
using engine::EngineOptions;
using engine::WatchHub;
using testutil::ReadSync;
using testutil::Set;
using testutil::WriteSync;

ReadRange Point(const std::string& k) { return ReadRange{k, k + std::string(1, '\0'), 1, false}; }

std::string Stamp(int64_t v) { return codec::VersionstampToBytes(codec::VersionToVersionstamp(v)); }

// One "node": its own storage (catalog connection) and an engine on the shared database.
struct Node {
  std::unique_ptr<storage::Storage> storage;
  std::unique_ptr<Engine> engine;
  void Close() {
    if (engine) engine->Shutdown();
    engine.reset();
    storage.reset();
  }
  ~Node() { Close(); }
};

std::unique_ptr<Node> OpenNode(const std::string& conninfo, const std::string& name = "kvconnect",
                               EngineOptions eo = {}) {
  auto n = std::make_unique<Node>();
  storage::StorageOptions so;
  so.kind = "postgres";
  so.location = conninfo;
  so.pg.feed_poll_ms = 200;
  so.pg.expiry_leader_retry_ms = 300;
  so.pg.application_name = name;
  auto st = storage::OpenStorage(so);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  if (!st.ok()) return nullptr;
  n->storage = std::move(*st);
  auto rec = n->storage->catalog().FindDatabase(storage::kDefaultDatabase);
  EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  if (!rec.ok()) return nullptr;
  auto b = n->storage->OpenBackend(*rec);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return nullptr;
  auto e = Engine::Open(std::move(*b), eo);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return nullptr;
  n->engine = std::move(*e);
  return n;
}

// A multi-host conninfo naming the primary first, then the standby (each by its Unix socket
// directory): libpq tries them in order, so a node follows a promotion by itself.
std::string TwoHostConninfo(const testutil::PgServer& primary, const testutil::PgServer& standby) {
  return "host='" + primary.socket_dir() + "," + standby.socket_dir() +
         "' port=" + std::to_string(primary.port()) + "," + std::to_string(standby.port()) +
         " user=kvc dbname=kvc connect_timeout=2";
}

class PostgresNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = testutil::FreshPgDatabase();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conninfo_ = *c;
    a_ = OpenNode(conninfo_, "node-a");
    b_ = OpenNode(conninfo_, "node-b");
    ASSERT_TRUE(a_ && b_);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    testutil::DropPgDatabase(conninfo_);
  }
  std::string conninfo_;
  std::unique_ptr<Node> a_, b_;
};

TEST_F(PostgresNodesTest, BothNodesShareOneDatabaseCatalogAndSecrets) {
  EXPECT_EQ(a_->engine->database_id(), b_->engine->database_id());
  bool created = false;
  auto s1 = a_->storage->LoadOrCreateSecret(
      "server-secret", [] { return std::string("one"); }, &created);
  ASSERT_TRUE(s1.ok());
  auto s2 = b_->storage->LoadOrCreateSecret(
      "server-secret", [] { return std::string("two"); }, &created);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(*s1, *s2);
  EXPECT_FALSE(created);
  auto made = a_->storage->Create("second");
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE(a_->storage->catalog().AddDatabase(*made).ok());
  auto seen = b_->storage->catalog().FindDatabase("second");
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->id, made->id);
  auto w = WriteSync(*a_->engine, AtomicWrite{{}, {Set("k", "from-a")}, {}});
  ASSERT_TRUE(w.ok() && w->ok);
  auto r = ReadSync(*b_->engine, {Point("k")});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ranges[0].size(), 1u);
  EXPECT_EQ(r->ranges[0][0].value, "from-a");
  EXPECT_EQ(r->ranges[0][0].version, w->version);
}

// Clients on both nodes increment one counter by check-and-set, retrying on a failed check:
// the final count is the number of successful commits (no lost update, never two winners).
// The PostgreSQL storage stages backup snapshot copies in $TMPDIR/kvconnect-<uid> (the
// "scratch directory"): a directory of that name another user made first (they could read the
// copies or swap them) is refused; our own is made, or set back to, 0700.
TEST_F(PostgresNodesTest, ScratchDirectoryOfAnotherUserUnderTmpIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a directory another user owns";
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvc-pg-scratch-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const char* old_tmpdir = std::getenv("TMPDIR");
  const std::string saved = old_tmpdir ? old_tmpdir : "";
  ::setenv("TMPDIR", tmpl.c_str(), 1);
  const std::string scratch = tmpl + "/kvconnect-" + std::to_string(::getuid());
  ASSERT_EQ(::mkdir(scratch.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(scratch.c_str(), 0777), 0);
  ASSERT_EQ(::chown(scratch.c_str(), 65534, 65534), 0);
  auto refused = a_->storage->ScratchDirectory();
  EXPECT_EQ(refused.status().code(), StatusCode::kIoError);
  EXPECT_NE(refused.status().message().find("belongs to user id 65534"), std::string::npos)
      << refused.status().message();
  ASSERT_EQ(::rmdir(scratch.c_str()), 0);
  auto made = a_->storage->ScratchDirectory();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(*made, scratch);
  struct stat st {};
  ASSERT_EQ(::stat(scratch.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  if (old_tmpdir) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

TEST_F(PostgresNodesTest, CheckAndSetAcrossNodesNeverLetsTwoWritersWin) {
  ASSERT_TRUE(WriteSync(*a_->engine, AtomicWrite{{}, {Set("counter", "0")}, {}}).ok());
  constexpr int kClients = 8;
  constexpr int kIncrements = 25;
  std::atomic<int> commits{0}, conflicts{0}, errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    Engine* e = (c % 2 == 0 ? a_ : b_)->engine.get();
    threads.emplace_back([&, e] {
      for (int i = 0; i < kIncrements;) {
        auto r = ReadSync(*e, {Point("counter")});
        if (!r.ok() || r->ranges[0].size() != 1) {
          ++errors;
          return;
        }
        const Entry& cur = r->ranges[0][0];
        const int next = std::stoi(cur.value) + 1;
        auto w = WriteSync(*e, AtomicWrite{{Check{"counter", Stamp(cur.version)}},
                                           {Set("counter", std::to_string(next))},
                                           {}});
        if (!w.ok()) {
          ++errors;
          return;
        }
        if (w->ok) {
          ++commits;
          ++i;
        } else {
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);
  auto r = ReadSync(*b_->engine, {Point("counter")});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ranges[0].size(), 1u);
  EXPECT_EQ(commits.load(), kClients * kIncrements);
  EXPECT_EQ(std::stoi(r->ranges[0][0].value), commits.load());
  EXPECT_GT(conflicts.load(), 0) << "the clients never contended; the test proves nothing";
  std::cout << "[ info ] " << commits.load() << " check-and-set commits over two nodes, "
            << conflicts.load() << " refused checks, final counter " << r->ranges[0][0].value
            << "\n";
}

// Writes alternate between the nodes; each acknowledged version is above every version
// acknowledged before it (commit order), and no version repeats.
TEST_F(PostgresNodesTest, VersionstampsIncreaseInCommitOrderAcrossNodes) {
  int64_t last = 0;
  std::set<int64_t> seen;
  for (int i = 0; i < 60; ++i) {
    Engine& e = *(i % 2 ? b_ : a_)->engine;
    auto w = WriteSync(e, AtomicWrite{{}, {Set("v" + std::to_string(i % 5), "x")}, {}});
    ASSERT_TRUE(w.ok() && w->ok);
    EXPECT_GT(w->version, last);
    last = w->version;
    EXPECT_TRUE(seen.insert(w->version).second);
  }
  // Concurrent writers on both nodes: all versions distinct.
  std::mutex mu;
  std::vector<int64_t> versions;
  std::vector<std::thread> threads;
  for (int c = 0; c < 6; ++c) {
    Engine* e = (c % 2 ? b_ : a_)->engine.get();
    threads.emplace_back([&, e, c] {
      for (int i = 0; i < 30; ++i) {
        auto w = WriteSync(*e, AtomicWrite{{}, {Set("c" + std::to_string(c), "y")}, {}});
        if (w.ok() && w->ok) {
          std::lock_guard<std::mutex> lock(mu);
          versions.push_back(w->version);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(versions.size(), 180u);
  std::set<int64_t> distinct(versions.begin(), versions.end());
  EXPECT_EQ(distinct.size(), versions.size());
  EXPECT_GT(*distinct.begin(), last);
}

TEST_F(PostgresNodesTest, AWriteOnOneNodeWakesAWatcherOnTheOther) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> seen;
  WatchHub::Callbacks cb;
  cb.on_change = [&](const std::vector<WatchHub::Change>& changes) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& c : changes) seen.push_back(c.version);
    cv.notify_all();
  };
  auto sub = b_->engine->Subscribe({"w"}, cb);
  std::vector<int64_t> written;
  for (int i = 0; i < 20; ++i) {
    auto w = WriteSync(*a_->engine, AtomicWrite{{}, {Set("w", std::to_string(i))}, {}});
    ASSERT_TRUE(w.ok() && w->ok);
    written.push_back(w->version);
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10),
                          [&] { return !seen.empty() && seen.back() == written.back(); }))
      << "node B's watcher saw " << seen.size() << " changes";
  EXPECT_EQ(seen, written);  // every commit, in order, once
  lock.unlock();
  sub.reset();
}

// A node whose change feed finds commits missing (pruned while it was away) re-reads every
// watched key, so its watchers still end on the current state.
TEST_F(PostgresNodesTest, AFeedThatMissedCommitsReReadsTheWatchedKeys) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int64_t, std::string>> seen;
  WatchHub::Callbacks cb;
  cb.on_change = [&](const std::vector<WatchHub::Change>& changes) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& c : changes) seen.emplace_back(c.version, c.row ? c.row->value : "");
    cv.notify_all();
  };
  auto sub = b_->engine->Subscribe({"g"}, cb);
  auto w = WriteSync(*a_->engine, AtomicWrite{{}, {Set("g", "one")}, {}});
  ASSERT_TRUE(w.ok() && w->ok);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() == 1; }));
  }
  // Another writer changes "g" and commits 50 more times; only the last commit's record is
  // left in the change table, the others were pruned.
  const int64_t v = w->version + 60;
  storage::CommitRecord rec;
  rec.version = v;
  rec.changes.push_back(storage::KeyChange{"h", storage::StoredRow{"x", ValueEncoding::kBytes, v}});
  const std::string db = a_->engine->database_id();
  storage::pg::Connection c(conninfo_, {}, "test");
  ASSERT_TRUE(c.Exec("begin").ok());
  using storage::pg::Params;
  ASSERT_TRUE(c.Query("update kvc_kv set v = $2, version = $3 where db = $1::uuid and k = 'g'",
                      Params().Text(db).Bytes("two").Int64(v - 5))
                  .ok());
  ASSERT_TRUE(c.Query("update kvc_data_version set version = $2 where db = $1::uuid",
                      Params().Text(db).Int64(v))
                  .ok());
  ASSERT_TRUE(c.Query("insert into kvc_changes (db, version, prev_version, time_ms, record) "
                      "values ($1::uuid, $2, $3, $4, $5)",
                      Params()
                          .Text(db)
                          .Int64(v)
                          .Int64(v - 1)
                          .Int64(NowUnixMs())
                          .Bytes(storage::EncodeLoggedCommit(rec, v - 1, NowUnixMs())))
                  .ok());
  ASSERT_TRUE(c.Query("select pg_notify($1, $2)",
                      Params().Text("kvc_" + storage::pg::UuidHex(db)).Text(std::to_string(v)))
                  .ok());
  ASSERT_TRUE(c.Exec("commit").ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() == 2; }));
  EXPECT_EQ(seen[1].second, "two");
  EXPECT_EQ(seen[1].first, v);
  lock.unlock();
  sub.reset();
}

// Expired keys are invisible on both nodes at once; one node sweeps them, and when it goes the
// other takes over.
TEST_F(PostgresNodesTest, ExpirySweepHasOneLeaderAndATakeover) {
  const int64_t soon = NowUnixMs() + 300;
  ASSERT_TRUE(WriteSync(*a_->engine, AtomicWrite{{}, {Set("e1", "x", soon)}, {}}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  for (Node* n : {a_.get(), b_.get()}) {
    auto r = ReadSync(*n->engine, {Point("e1")});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->ranges[0].empty());
  }
  auto rows = [&](const std::string& key) -> int64_t {
    Node* s = a_ ? a_.get() : b_.get();
    auto rec = s->storage->catalog().FindDatabase(storage::kDefaultDatabase);
    auto backend = s->storage->OpenBackend(*rec);
    auto reader = (*backend)->OpenReader();
    EXPECT_TRUE((*reader)->Begin().ok());
    auto row = (*reader)->Get(key);
    (*reader)->End();
    return row.ok() && row->has_value() ? 1 : 0;
  };
  // Swept by whichever node leads, within a few seconds.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rows("e1") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(rows("e1"), 0);
  // The leader goes (its session, and with it the advisory lock, ends); the other sweeps.
  auto leader = [&]() -> std::string {
    storage::pg::Connection c(conninfo_, {}, "test");
    auto r = c.Query(
        "select a.application_name from pg_locks l join pg_stat_activity a on a.pid = l.pid "
        "where l.locktype = 'advisory' and l.classid = " +
            std::to_string(storage::pg::kLockExpiry) + " and l.granted",
        {});
    return r.ok() && r->rows() == 1 ? r->Bytes(0, 0) : "";
  };
  const std::string first = leader();
  ASSERT_TRUE(first == "node-a" || first == "node-b") << "leader: '" << first << "'";
  std::unique_ptr<Node>& gone = first == "node-a" ? a_ : b_;
  std::unique_ptr<Node>& stays = first == "node-a" ? b_ : a_;
  gone->Close();
  gone.reset();
  ASSERT_TRUE(
      WriteSync(*stays->engine, AtomicWrite{{}, {Set("e2", "x", NowUnixMs() + 200)}, {}}).ok());
  const auto deadline2 = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rows("e2") && std::chrono::steady_clock::now() < deadline2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(rows("e2"), 0) << "no node took over the sweep";
  EXPECT_EQ(leader(), first == "node-a" ? "node-b" : "node-a");
}

// A failover: a writer on a primary with a synchronous standby; the primary crashes, the
// standby is promoted, the engine reconnects by itself (multi-host conninfo), every
// acknowledged write is there, and every version issued after the promotion is above every
// one before it, by the timeline jump.
TEST(PostgresFailoverTest, NoAcknowledgedWriteLostAndNoVersionReissued) {
  testutil::PgServerOptions po;
  auto primary = testutil::PgServer::Start(po);
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  auto standby = (*primary)->StartStandby(/*synchronous=*/true);
  ASSERT_TRUE(standby.ok()) << standby.status().ToString();
  const std::string conninfo = TwoHostConninfo(**primary, **standby);
  auto node = OpenNode(conninfo);
  ASSERT_TRUE(node);
  Engine& e = *node->engine;

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::pair<std::string, int64_t>> acked;  // key, version, in ack order
  std::atomic<int> failed{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string key = "f" + std::to_string(i);
      auto w = WriteSync(e, AtomicWrite{{}, {Set(key, "v")}, {}});
      if (w.ok() && w->ok) {
        std::lock_guard<std::mutex> lock(mu);
        acked.emplace_back(key, w->version);
      } else {
        ++failed;  // 503 during the failover; a client retries
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
  // A run of writes on the first primary (0.7 s, and at least 20 acknowledged however slow the
  // machine), so that the crash has something to lose.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto acked_count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return acked.size();
  };
  const bool written =
      testutil::WaitFor([&] { return acked_count() >= 20; }, std::chrono::seconds(30));
  const size_t before_crash = acked_count();
  if (!written) {
    stop = true;
    writer.join();
    FAIL() << "20 writes acknowledged before the crash (got " << before_crash << ", "
           << failed.load() << " failed)";
  }
  ASSERT_TRUE((*primary)->Stop(testutil::PgStopMode::kImmediate).ok());
  ASSERT_TRUE((*standby)->Promote().ok());
  size_t promoted_at;
  {
    std::lock_guard<std::mutex> lock(mu);
    promoted_at = acked.size();
  }
  // Writes resume on the new primary.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (acked.size() >= promoted_at + 50) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "writes never resumed";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  writer.join();

  // Every acknowledged write is on the promoted standby, with its version.
  std::vector<ReadRange> all;
  int lost = 0;
  for (const auto& [key, version] : acked) {
    auto r = ReadSync(e, {Point(key)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->ranges[0].size() != 1 || r->ranges[0][0].version != version) ++lost;
  }
  EXPECT_EQ(lost, 0);
  // Versions strictly increase in acknowledgement order, and the ones after the promotion
  // start on the next 2^32 boundary.
  int64_t prev = 0;
  int64_t first_after = 0;
  int64_t last_before = 0;
  for (size_t i = 0; i < acked.size(); ++i) {
    EXPECT_GT(acked[i].second, prev);
    prev = acked[i].second;
    if (acked[i].second >= (int64_t{1} << 32)) {
      if (!first_after) first_after = acked[i].second;
    } else {
      last_before = acked[i].second;
    }
  }
  EXPECT_GT(first_after, 0) << "versions did not jump on the new timeline";
  EXPECT_GT(first_after, last_before);
  std::cout << "[ info ] failover: " << acked.size() << " acknowledged writes (" << before_crash
            << " before the crash), " << failed.load() << " refused during it, lost " << lost
            << "; last version before " << last_before << ", first after " << first_after << "\n";
  node.reset();
}

// A primary, an asynchronous standby and a node whose conninfo lists both, for a commit that
// the primary's death cuts off: Hang() makes the primary's commits wait for a synchronous
// standby that never comes (each is written, and streamed to the standby if it runs, but
// never answered) and starts a write that waits so.
class CutCommit {
 public:
  void Start() {
    auto primary = testutil::PgServer::Start();
    ASSERT_TRUE(primary.ok()) << primary.status().ToString();
    primary_ = std::move(*primary);
    auto standby = primary_->StartStandby(/*synchronous=*/false);
    ASSERT_TRUE(standby.ok()) << standby.status().ToString();
    standby_ = std::move(*standby);
    node_ = OpenNode(TwoHostConninfo(*primary_, *standby_));
    ASSERT_TRUE(node_);
    auto first = WriteSync(engine(), AtomicWrite{{}, {Set("before", "v")}, {}});
    ASSERT_TRUE(first.ok() && first->ok) << first.status().ToString();
    ASSERT_TRUE(standby_->WaitForReplay(*primary_).ok());
  }
  // The node's backend applies the reloaded setting when it next gets around to it, so a write
  // may still commit at once: then the next one is tried, under another key (cut_key()).
  void Hang() {
    ASSERT_TRUE(primary_->Exec("alter system set synchronous_standby_names = 'nobody'").ok());
    ASSERT_TRUE(primary_->Exec("select pg_reload_conf()").ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int attempt = 0;; ++attempt) {
      cut_key_ = "cut" + std::to_string(attempt);
      cut_ = std::async(std::launch::async, [this, key = cut_key_] {
        return WriteSync(engine(), AtomicWrite{{}, {Set(key, "v")}, {}});
      });
      for (;;) {
        auto waiting = primary_->QueryValue(
            "select count(*) from pg_stat_activity where wait_event = 'SyncRep'");
        if (waiting.ok() && *waiting != "0") return;
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no commit ever waited";
        if (cut_.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) break;
      }
      auto done = cut_.get();
      ASSERT_TRUE(done.ok() && done->ok) << done.status().ToString();
    }
  }
  const std::string& cut_key() const { return cut_key_; }
  Engine& engine() { return *node_->engine; }
  testutil::PgServer& primary() { return *primary_; }
  testutil::PgServer& standby() { return *standby_; }
  Result<CommitResult> Answer() { return cut_.get(); }
  ~CutCommit() { node_.reset(); }

 private:
  std::unique_ptr<testutil::PgServer> primary_, standby_;
  std::unique_ptr<Node> node_;
  std::future<Result<CommitResult>> cut_;
  std::string cut_key_;
};

// The connection breaks during COMMIT and a standby is promoted meanwhile. The commit had
// been streamed to the standby, so the promoted primary holds it: the writer, asking again on
// the new timeline, finds the commit's change record and answers it as landed. A 503 there
// would make a client send the write again and apply it twice.
TEST(PostgresFailoverTest, ACommitCutOffByAFailoverIsAnsweredAsLandedWhenItWasReplicated) {
  CutCommit c;
  ASSERT_NO_FATAL_FAILURE(c.Start());
  ASSERT_NO_FATAL_FAILURE(c.Hang());
  ASSERT_TRUE(c.standby().WaitForReplay(c.primary()).ok());
  ASSERT_TRUE(c.primary().Stop(testutil::PgStopMode::kImmediate).ok());
  ASSERT_TRUE(c.standby().Promote().ok());

  auto w = c.Answer();
  ASSERT_TRUE(w.ok()) << "answered " << w.status().ToString()
                      << " for a commit the promoted primary holds";
  ASSERT_TRUE(w->ok);
  EXPECT_LT(w->version, int64_t{1} << 32);  // issued on the old timeline
  auto r = ReadSync(c.engine(), {Point(c.cut_key())});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->ranges[0].size(), 1u);
  EXPECT_EQ(r->ranges[0][0].version, w->version);
  auto after = WriteSync(c.engine(), AtomicWrite{{}, {Set("after", "v")}, {}});
  ASSERT_TRUE(after.ok() && after->ok) << after.status().ToString();
  EXPECT_GE(after->version, int64_t{1} << 32);
}

// The same cut, but the standby never received the commit (it was down): the promoted primary
// does not hold it and never will, so the answer is an error a client retries (503), and the
// key is absent until the retry lands it once.
TEST(PostgresFailoverTest, ACommitLostWithTheOldPrimarysTailIsAnsweredAsNotLanded) {
  CutCommit c;
  ASSERT_NO_FATAL_FAILURE(c.Start());
  ASSERT_TRUE(c.standby().Stop().ok());
  ASSERT_NO_FATAL_FAILURE(c.Hang());
  ASSERT_TRUE(c.primary().Stop(testutil::PgStopMode::kImmediate).ok());
  ASSERT_TRUE(c.standby().Restart().ok());
  ASSERT_TRUE(c.standby().Promote().ok());

  auto w = c.Answer();
  ASSERT_FALSE(w.ok()) << "a commit the promoted primary does not hold was acknowledged";
  EXPECT_EQ(w.status().code(), StatusCode::kUnavailable) << w.status().ToString();
  auto r = ReadSync(c.engine(), {Point(c.cut_key())});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ranges[0].empty());
  auto retry = WriteSync(c.engine(), AtomicWrite{{}, {Set(c.cut_key(), "v")}, {}});
  ASSERT_TRUE(retry.ok() && retry->ok) << retry.status().ToString();
  EXPECT_GE(retry->version, int64_t{1} << 32);
}

}  // namespace
}  // namespace kvc
