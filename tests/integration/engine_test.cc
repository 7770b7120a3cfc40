// The engine on a real SQLite file and on a real PostgreSQL (every test runs on both storages):
// differential test against an in-memory model, atomicity, versionstamps across restarts,
// expiry, watch notification and concurrent group commit.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/random.h"
#include "storage/postgres/pg_storage.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/engine_sync.h"
#include "testutil/kv_model.h"
#include "testutil/pg_shared.h"
#include "testutil/wait.h"

namespace kvc::engine {
namespace {
namespace fs = std::filesystem;

// Watch callbacks that report only the version of each change.
WatchHub::Callbacks OnChange(std::function<void(int64_t)> f) {
  WatchHub::Callbacks cb;
  cb.on_change = [f = std::move(f)](const std::vector<WatchHub::Change>& changes) {
    for (const auto& c : changes) f(c.version);
  };
  return cb;
}

// The parameter names the storage: "sqlite" (a file) or "postgres" (a fresh database on the
// binary's shared PostgreSQL server).
class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-engine-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    if (GetParam() == "postgres") {
      auto conninfo = testutil::FreshPgDatabase();
      ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
      pg_conninfo_ = *conninfo;
      storage::StorageOptions so;
      so.kind = "postgres";
      so.location = pg_conninfo_;
      auto st = storage::OpenStorage(so);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      pg_ = std::move(*st);
      auto rec = pg_->catalog().FindDatabase(storage::kDefaultDatabase);
      ASSERT_TRUE(rec.ok()) << rec.status().ToString();
      pg_db_ = *rec;
    }
    Reopen();
  }
  void TearDown() override {
    engine_.reset();
    pg_.reset();
    if (!pg_conninfo_.empty()) testutil::DropPgDatabase(pg_conninfo_);
    fs::remove_all(dir_);
  }
  bool postgres() const { return GetParam() == "postgres"; }
  Result<std::unique_ptr<storage::Backend>> OpenBackend() {
    if (pg_) return pg_->OpenBackend(pg_db_);
    KVC_ASSIGN_OR_RETURN(auto b, storage::SqliteBackend::Open((dir_ / "db.sqlite3").string(), {}));
    return std::unique_ptr<storage::Backend>(std::move(b));
  }
  void Reopen(EngineOptions o = {}) {
    engine_.reset();
    auto b = OpenBackend();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    auto e = Engine::Open(std::move(*b), o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }
  Result<CommitResult> Write(AtomicWrite w) { return testutil::WriteSync(*engine_, std::move(w)); }
  Result<ReadResult> Read(std::vector<ReadRange> ranges) {
    return testutil::ReadSync(*engine_, std::move(ranges));
  }
  std::vector<Entry> All() {
    auto r = Read({ReadRange{"", "\xff\xff", 1000, false}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->ranges[0] : std::vector<Entry>{};
  }

  fs::path dir_;
  std::string pg_conninfo_;
  std::unique_ptr<storage::Storage> pg_;
  storage::DatabaseRecord pg_db_;
  ManualClock manual_clock_{0};  // for a test that passes it in EngineOptions; outlives engine_
  std::unique_ptr<Engine> engine_;
};

using testutil::Set;
Mutation Le64Op(std::string k, MutationType t, uint64_t v) {
  Mutation m;
  m.key = std::move(k);
  m.type = t;
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  m.value = KvValue{b, ValueEncoding::kLe64};
  return m;
}
ReadRange Point(const std::string& k) { return ReadRange{k, k + std::string(1, '\0'), 1, false}; }

Mutation Del(std::string k) {
  Mutation m;
  m.key = std::move(k);
  m.type = MutationType::kDelete;
  return m;
}
std::string Stamp(int64_t v) { return codec::VersionstampToBytes(codec::VersionToVersionstamp(v)); }

using testutil::KvModel;

TEST_P(EngineTest, DifferentialAgainstModel) {
  KvModel model;
  std::mt19937 rng(12345);
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e", "f"};
  int64_t last_version = 0;
  int applied = 0, check_failures = 0, errors = 0;
  for (int i = 0; i < 1500; ++i) {
    AtomicWrite w;
    const int nchecks = rng() % 3;
    for (int c = 0; c < nchecks; ++c) {
      const std::string& k = keys[rng() % keys.size()];
      auto it = model.rows.find(k);
      Check chk{k, ""};
      if (it != model.rows.end() && rng() % 4 != 0) chk.versionstamp = Stamp(it->second.version);
      if (rng() % 10 == 0) chk.versionstamp = Stamp(1);  // stale
      w.checks.push_back(chk);
    }
    const int nmut = 1 + rng() % 4;
    for (int m = 0; m < nmut; ++m) {
      const std::string& k = keys[rng() % keys.size()];
      switch (rng() % 6) {
        case 0:
          w.mutations.push_back(Set(k, "v" + std::to_string(rng() % 100)));
          break;
        case 1:
          w.mutations.push_back(Del(k));
          break;
        case 2:
          w.mutations.push_back(Le64Op(k, MutationType::kSum, rng()));
          break;
        case 3:
          w.mutations.push_back(Le64Op(k, MutationType::kMin, rng() % 1000));
          break;
        case 4:
          w.mutations.push_back(Le64Op(k, MutationType::kMax, rng() % 1000));
          break;
        default:
          w.mutations.push_back(Le64Op(k, MutationType::kSum, UINT64_MAX));
          break;
      }
    }
    auto r = Write(w);
    int expected;
    if (r.ok() && r->ok) {
      ASSERT_GT(r->version, last_version);
      ASSERT_LE(r->version - last_version, 9);
      last_version = r->version;
      expected = model.Apply(w, r->version);
      ++applied;
      ASSERT_EQ(expected, 1) << "engine applied a write the model rejects, op " << i;
    } else if (r.ok()) {
      ++check_failures;
      ASSERT_EQ(model.Apply(w, 0), 0) << "op " << i;
    } else {
      ++errors;
      ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
      ASSERT_EQ(model.Apply(w, 0), -1) << "op " << i << ": " << r.status().message();
    }
    // Point reads (served by the read cache after the first miss) must agree with the model
    // after every write, one key at a time and all keys in one snapshot.
    {
      const std::string& k = keys[rng() % keys.size()];
      auto one = Read({Point(k)});
      ASSERT_TRUE(one.ok());
      auto it = model.rows.find(k);
      ASSERT_EQ(one->ranges[0].size(), it == model.rows.end() ? 0u : 1u) << "op " << i;
      if (it != model.rows.end()) {
        EXPECT_EQ(one->ranges[0][0].value, it->second.value) << "op " << i;
        EXPECT_EQ(one->ranges[0][0].version, it->second.version) << "op " << i;
      }
      std::vector<ReadRange> points;
      for (const std::string& key : keys) points.push_back(Point(key));
      auto many = Read(points);
      ASSERT_TRUE(many.ok());
      for (size_t j = 0; j < keys.size(); ++j) {
        auto m = model.rows.find(keys[j]);
        ASSERT_EQ(many->ranges[j].size(), m == model.rows.end() ? 0u : 1u) << "op " << i;
        if (m != model.rows.end()) {
          EXPECT_EQ(many->ranges[j][0].version, m->second.version);
        }
      }
    }
    if (i % 50 == 0 || i == 1499) {
      auto all = All();
      ASSERT_EQ(all.size(), model.rows.size()) << "op " << i;
      for (const Entry& e : all) {
        auto it = model.rows.find(e.key);
        ASSERT_NE(it, model.rows.end());
        EXPECT_EQ(e.value, it->second.value);
        EXPECT_EQ(e.version, it->second.version);
        EXPECT_EQ(e.encoding, it->second.enc);
      }
    }
  }
  // The random mix must exercise every outcome, or the test proves little.
  EXPECT_GT(applied, 100);
  EXPECT_GT(check_failures, 20);
  EXPECT_GT(errors, 20);
}

TEST_P(EngineTest, FailingMutationLeavesNothingBehind) {
  ASSERT_TRUE(Write({{}, {Set("text", "hello")}, {}}).ok());
  // Three mutations succeed, then a sum onto the non-U64 value "text" fails: none may stay.
  AtomicWrite w;
  w.mutations = {Set("x", "1"), Set("y", "2"), Le64Op("text2", MutationType::kSum, 1),
                 Le64Op("text", MutationType::kSum, 1)};
  auto r = Write(w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "Failed to perform 'sum' mutation on a non-U64 value in the database");
  auto all = All();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].key, "text");
}

TEST_P(EngineTest, VersionstampsIncreaseAcrossRestartsAndSuffixKeys) {
  auto a = Write({{}, {Set("k", "1")}, {}});
  ASSERT_TRUE(a.ok() && a->ok);
  Reopen();
  auto b = Write({});  // an empty write still commits with a new versionstamp
  ASSERT_TRUE(b.ok() && b->ok);
  EXPECT_GT(b->version, a->version);
  Mutation m = Set("p", "v");
  m.type = MutationType::kSetSuffixVersionstampedKey;
  auto c = Write({{}, {m}, {}});
  ASSERT_TRUE(c.ok() && c->ok);
  auto all = All();
  const std::string expected_key =
      "p" + codec::VersionstampSuffix(codec::VersionToVersionstamp(c->version));
  bool found = false;
  for (const Entry& e : all) found |= e.key == expected_key && e.version == c->version;
  EXPECT_TRUE(found);
}

TEST_P(EngineTest, ReadsRespectLimitsReverseAndRanges) {
  AtomicWrite w;
  for (char c = 'a'; c <= 'j'; ++c) w.mutations.push_back(Set(std::string(1, c), "v"));
  ASSERT_TRUE(Write(w).ok());
  auto r = Read({ReadRange{"c", "g", 2, false}, ReadRange{"c", "g", 3, true},
                 ReadRange{"g", "c", 5, false}, ReadRange{"z", "zz", 1, false}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ranges.size(), 4u);
  ASSERT_EQ(r->ranges[0].size(), 2u);
  EXPECT_EQ(r->ranges[0][0].key, "c");
  EXPECT_EQ(r->ranges[0][1].key, "d");
  ASSERT_EQ(r->ranges[1].size(), 3u);
  EXPECT_EQ(r->ranges[1][0].key, "f");
  EXPECT_EQ(r->ranges[1][2].key, "d");
  EXPECT_TRUE(r->ranges[2].empty());
  EXPECT_TRUE(r->ranges[3].empty());
}

TEST_P(EngineTest, ExpiredKeysVanishAtOnceAndWatchersHear) {
  std::promise<int64_t> notified;
  std::atomic<bool> once{false};
  auto sub = engine_->Subscribe({"e"}, OnChange([&](int64_t v) {
                                  if (!once.exchange(true)) notified.set_value(v);
                                }));
  const int64_t expire = NowUnixMs() + 300;
  auto w = Write({{Check{"e", ""}}, {Set("e", "soon", expire)}, {}});
  ASSERT_TRUE(w.ok() && w->ok);
  auto fut = notified.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_EQ(fut.get(), w->version);  // the set itself notifies
  // The sweep runs at the expiry time and notifies again.
  std::promise<int64_t> swept;
  std::atomic<bool> once2{false};
  auto sub2 = engine_->Subscribe({"e"}, OnChange([&](int64_t v) {
                                   if (!once2.exchange(true)) swept.set_value(v);
                                 }));
  auto fut2 = swept.get_future();
  ASSERT_EQ(fut2.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_GT(fut2.get(), w->version);
  EXPECT_GE(NowUnixMs(), expire);
  EXPECT_TRUE(All().empty());
  // An expired key counts as absent for checks.
  auto again = Write({{Check{"e", ""}}, {Set("e", "back")}, {}});
  EXPECT_TRUE(again.ok() && again->ok);
}

TEST_P(EngineTest, ConcurrentWritersGroupCommitAndKeepEveryIncrement) {
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        AtomicWrite w;
        w.mutations = {Le64Op("counter", MutationType::kSum, 1),
                       Set("t" + std::to_string(t), std::to_string(i))};
        auto r = Write(w);
        if (!r.ok() || !r->ok) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto r = Read({ReadRange{"counter", std::string("counter") + '\0', 1, false}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ranges[0].size(), 1u);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(r->ranges[0][0].value[i]);
  EXPECT_EQ(v, static_cast<uint64_t>(kThreads * kPerThread));
}

uint64_t Le64Value(const std::string& b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[i]);
  return v;
}

// Transfers between accounts run while other threads read every account in one multi-key
// point read (the read cache's path): each such read must be one snapshot, so the balances
// always add up. A read that mixed keys from before and after a transfer would not.
TEST_P(EngineTest, CachedMultiKeyReadsAreSnapshotsUnderConcurrentTransfers) {
  constexpr int kAccounts = 10, kInitial = 1000;  // 10: the most ranges one read may have
  std::vector<std::string> accounts;
  AtomicWrite init;
  for (int i = 0; i < kAccounts; ++i) {
    accounts.push_back("acct" + std::to_string(i));
    init.mutations.push_back(Le64Op(accounts.back(), MutationType::kSum, kInitial));
  }
  ASSERT_TRUE(Write(init).ok());
  std::vector<ReadRange> all_points;
  for (const std::string& a : accounts) all_points.push_back(Point(a));

  std::atomic<bool> stop{false};
  std::atomic<int> transfers{0}, reads{0}, bad_reads{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      while (!stop) {
        const int from = static_cast<int>(rng() % kAccounts);
        const int to = (from + 1 + static_cast<int>(rng() % (kAccounts - 1))) % kAccounts;
        auto r = Read({Point(accounts[from]), Point(accounts[to])});
        if (!r.ok() || r->ranges[0].empty() || r->ranges[1].empty()) {
          ++errors;
          continue;
        }
        const Entry& f = r->ranges[0][0];
        const Entry& g = r->ranges[1][0];
        const uint64_t fb = Le64Value(f.value), gb = Le64Value(g.value);
        const uint64_t amount = fb == 0 ? 0 : 1 + rng() % std::min<uint64_t>(fb, 10);
        AtomicWrite w;
        w.checks = {Check{f.key, Stamp(f.version)}, Check{g.key, Stamp(g.version)}};
        auto set = [](const std::string& k, uint64_t v) {
          std::string b(8, '\0');
          for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
          Mutation m;
          m.key = k;
          m.type = MutationType::kSet;
          m.value = KvValue{b, ValueEncoding::kLe64};
          return m;
        };
        w.mutations = {set(f.key, fb - amount), set(g.key, gb + amount)};
        auto c = Write(w);
        if (!c.ok()) ++errors;
        if (c.ok() && c->ok) ++transfers;
      }
    });
  }
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop) {
        auto r = Read(all_points);
        if (!r.ok()) {
          ++errors;
          continue;
        }
        uint64_t sum = 0;
        for (const auto& range : r->ranges) {
          if (range.size() == 1) sum += Le64Value(range[0].value);
        }
        ++reads;
        if (sum != uint64_t{kAccounts} * kInitial) ++bad_reads;
      }
    });
  }
  // At least 2 s of contention, and on a slow machine on until both sides did enough work.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const bool enough = testutil::WaitFor([&] { return transfers.load() > 50 && reads.load() > 50; },
                                        std::chrono::seconds(60));
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(bad_reads.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_TRUE(enough) << "more than 50 transfers and 50 reads within 62 s";
  EXPECT_GT(transfers.load(), 50);
  EXPECT_GT(reads.load(), 50);
  // The cache was in play (on PostgreSQL it is off: other nodes write too).
  EXPECT_EQ(engine_->read_cache().entry_count() > 0, !postgres());
}

TEST_P(EngineTest, PointReadsFollowWritesDeletesAndExpiryWithAndWithoutCache) {
  for (size_t cache : {size_t{64} << 20, size_t{0}}) {
    ManualClock& clock = manual_clock_;
    clock.Set(NowUnixMs());
    EngineOptions o;
    o.read_cache_bytes = cache;
    o.clock = &clock;
    Reopen(o);
    for (int i = 0; i < 50; ++i) {
      AtomicWrite w;
      w.mutations = {Set("k", "v" + std::to_string(i))};
      ASSERT_TRUE(Write(w).ok());
      for (int rep = 0; rep < 2; ++rep) {  // a miss that fills, then a hit
        auto r = Read({Point("k")});
        ASSERT_TRUE(r.ok());
        ASSERT_EQ(r->ranges[0].size(), 1u);
        EXPECT_EQ(r->ranges[0][0].value, "v" + std::to_string(i));
      }
    }
    AtomicWrite del;
    del.mutations = {Del("k")};
    ASSERT_TRUE(Write(del).ok());
    auto gone = Read({Point("k")});
    ASSERT_TRUE(gone.ok());
    EXPECT_TRUE(gone->ranges[0].empty());
    // The engine's clock stands still until told: the row is live however slow the machine,
    // then its time passes at once.
    AtomicWrite exp;
    exp.mutations = {Set("e", "x", clock.NowMs() + 300)};
    ASSERT_TRUE(Write(exp).ok());
    auto live = Read({Point("e")});
    ASSERT_TRUE(live.ok());
    EXPECT_EQ(live->ranges[0].size(), 1u);
    clock.Advance(400);
    auto expired = Read({Point("e")});  // a hit on a row whose time has passed
    ASSERT_TRUE(expired.ok());
    EXPECT_TRUE(expired->ranges[0].empty());
    EXPECT_EQ(engine_->read_cache().entry_count() > 0, cache > 0 && !postgres());
  }
}

// A committed write leaves its rows in the read cache (write-through): reads after it are hits,
// with no storage call, and answer the committed rows, a deleted key as absent, the result of a
// sum as summed. A write whose checks fail changes nothing there.
TEST_P(EngineTest, ReadsAfterACommittedWriteAreAnsweredFromTheCache) {
  if (!engine_->read_cache().enabled()) GTEST_SKIP() << "no read cache on this storage";
  AtomicWrite first;
  first.mutations = {Set("a", "1"), Set("b", "2"), Le64Op("n", MutationType::kSum, 5)};
  ASSERT_TRUE(Write(first).ok());
  AtomicWrite second;
  second.mutations = {Set("a", "one"), Del("b"), Le64Op("n", MutationType::kSum, 7)};
  auto committed = Write(second);
  ASSERT_TRUE(committed.ok() && committed->ok);
  AtomicWrite refused;
  refused.checks = {Check{"a", ""}};  // "a" exists: the check fails
  refused.mutations = {Set("a", "never")};
  auto failed = Write(refused);
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->ok);

  const EngineCounters& c = engine_->counters();
  const uint64_t storage_before = c.storage_reads.load();
  const uint64_t hits_before = c.cache_hits.load();
  auto r = Read({Point("a"), Point("b"), Point("n")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->ranges[0].size(), 1u);
  EXPECT_EQ(r->ranges[0][0].value, "one");
  EXPECT_EQ(r->ranges[0][0].version, committed->version);
  EXPECT_TRUE(r->ranges[1].empty());
  ASSERT_EQ(r->ranges[2].size(), 1u);
  EXPECT_EQ(Le64Value(r->ranges[2][0].value), 12u);
  EXPECT_EQ(r->version, committed->version);
  EXPECT_EQ(c.cache_hits.load() - hits_before, 1u) << "the read, answered from the cache";
  EXPECT_EQ(c.storage_reads.load(), storage_before) << "no storage call";
}

// After an open with prewarm_read_cache, the cache fills from storage in the background while
// writes go on: every key then reads what was written last, and a prewarm without writes leaves
// every key a hit. (Here a write's own row reaches the cache first; FaultTest.APrewarmLeavesOut...
// makes a chunk's snapshot predate a write whose row does not, which only the tickets catch.)
TEST_P(EngineTest, APrewarmFillsTheCacheWhileWritesGoOnAndEveryKeyReadsItsLastWrite) {
  if (!engine_->read_cache().enabled()) GTEST_SKIP() << "no read cache on this storage";
  constexpr int kKeys = 3000;
  auto key = [](int i) { return "k" + std::to_string(10000 + i); };
  std::map<std::string, std::string> model;
  for (int first = 0; first < kKeys; first += 500) {
    AtomicWrite w;
    for (int i = first; i < first + 500; ++i) {
      w.mutations.push_back(Set(key(i), "v0"));
      model[key(i)] = "v0";
    }
    ASSERT_TRUE(Write(w).ok());
  }
  auto wait_for_prewarm = [this] {
    ASSERT_TRUE(testutil::WaitFor([this] { return !engine_->prewarm_progress().running; },
                                  std::chrono::seconds(60)))
        << "the prewarm did not end";
  };

  EngineOptions o;
  o.prewarm_read_cache = true;
  o.prewarm_chunk_rows = 1;  // thousands of snapshots, between the commits below
  Reopen(o);
  // Writes queued at once while the prewarm runs; on each key the last one queued wins.
  constexpr int kWrites = 2000;
  std::mt19937 rng(7);
  std::atomic<int> acked{0};
  std::promise<void> all_acked;
  for (int j = 0; j < kWrites; ++j) {
    const std::string k = key(static_cast<int>(rng() % kKeys));
    const std::string v = "w" + std::to_string(j);
    model[k] = v;
    AtomicWrite w;
    w.mutations.push_back(Set(k, v));
    engine_->Write(std::move(w), [&](Result<CommitResult> r) {
      EXPECT_TRUE(r.ok() && r->ok) << (r.ok() ? "check failed" : r.status().ToString());
      if (acked.fetch_add(1) + 1 == kWrites) all_acked.set_value();
    });
  }
  all_acked.get_future().wait();
  wait_for_prewarm();
  EXPECT_GT(engine_->prewarm_progress().entries, 0u);
  for (const auto& [k, v] : model) {
    auto r = Read({Point(k)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->ranges[0].size(), 1u) << k;
    EXPECT_EQ(r->ranges[0][0].value, v) << k;
  }

  Reopen(o);
  wait_for_prewarm();
  EXPECT_EQ(engine_->prewarm_progress().entries, static_cast<uint64_t>(kKeys));
  const uint64_t storage_before = engine_->counters().storage_reads.load();
  for (const auto& [k, v] : model) {
    auto r = Read({Point(k)});
    ASSERT_TRUE(r.ok() && r->ranges[0].size() == 1u) << k;
    EXPECT_EQ(r->ranges[0][0].value, v) << k;
  }
  EXPECT_EQ(engine_->counters().storage_reads.load(), storage_before) << "every read was a hit";
}

// Single-key reads that wait together are answered from one snapshot in one storage call: with
// the read cache (they are its misses, and they fill it) and without it.
TEST_P(EngineTest, WaitingPointReadsShareOneStorageCallAndFillTheCache) {
  for (size_t cache : {size_t{64} << 20, size_t{0}}) {
    EngineOptions o;
    o.read_cache_bytes = cache;
    o.reader_threads = 1;
    Reopen(o);
    constexpr int kStored = 10;
    constexpr int kReads = 20;  // keys p0 .. p19; the first kStored exist
    AtomicWrite w;
    for (int i = 0; i < kStored; ++i) {
      w.mutations.push_back(Set("p" + std::to_string(i), "v" + std::to_string(i)));
    }
    ASSERT_TRUE(Write(w).ok());
    Reopen(o);  // a cache without the rows the write just stored in it
    // The one reader thread is held until every read below is queued behind it.
    std::promise<void> holding;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    engine_->WithReader([&holding, released](storage::Reader*, const Status&) {
      holding.set_value();
      released.wait();
    });
    holding.get_future().wait();
    const EngineCounters& c = engine_->counters();
    const uint64_t storage_before = c.storage_reads.load();
    const uint64_t misses_before = c.cache_misses.load();
    std::vector<std::promise<Result<ReadResult>>> answers(kReads);
    for (int i = 0; i < kReads; ++i) {
      engine_->SnapshotRead({Point("p" + std::to_string(i))},
                            [&answers, i](Result<ReadResult> r) { answers[i].set_value(r); });
    }
    release.set_value();
    int64_t version = -1;
    for (int i = 0; i < kReads; ++i) {
      Result<ReadResult> r = answers[i].get_future().get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->ranges.size(), 1u);
      if (i < kStored) {
        ASSERT_EQ(r->ranges[0].size(), 1u) << "p" << i;
        EXPECT_EQ(r->ranges[0][0].value, "v" + std::to_string(i));
      } else {
        EXPECT_TRUE(r->ranges[0].empty()) << "p" << i;
      }
      if (i == 0) version = r->version;
      EXPECT_EQ(r->version, version) << "one snapshot";
    }
    EXPECT_EQ(c.storage_reads.load() - storage_before, 1u) << "cache bytes " << cache;
    if (engine_->read_cache().enabled()) {
      EXPECT_EQ(c.cache_misses.load() - misses_before, uint64_t{kReads});
      const uint64_t hits_before = c.cache_hits.load();
      for (int i = 0; i < kReads; ++i) {  // each now a hit: present, or known absent
        auto r = Read({Point("p" + std::to_string(i))});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->ranges[0].size(), i < kStored ? 1u : 0u);
      }
      EXPECT_EQ(c.cache_hits.load() - hits_before, uint64_t{kReads});
      EXPECT_EQ(c.storage_reads.load() - storage_before, 1u);
    }
  }
}

// Every read path gives each entry its expiry (the admin API and dumps show it; KV Connect
// answers have no field for it): point reads from storage and from the cache, one range and
// several, both directions, and the export's snapshot scan.
TEST_P(EngineTest, ReadsCarryEachEntrysExpiry) {
  for (size_t cache : {size_t{64} << 20, size_t{0}}) {
    ManualClock& clock = manual_clock_;
    clock.Set(NowUnixMs());
    EngineOptions o;
    o.read_cache_bytes = cache;
    o.clock = &clock;
    Reopen(o);
    const int64_t at = clock.NowMs() + 3'600'000;
    AtomicWrite w;
    w.mutations = {Set("x/a", "a", at), Set("x/b", "b"), Set("x/c", "c", at + 1)};
    ASSERT_TRUE(Write(w).ok());
    for (int rep = 0; rep < 2; ++rep) {  // a miss that fills, then a hit
      auto r = Read({Point("x/a"), Point("x/b")});
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->ranges[0].size(), 1u);
      EXPECT_EQ(r->ranges[0][0].expire_at_ms, at);
      ASSERT_EQ(r->ranges[1].size(), 1u);
      EXPECT_EQ(r->ranges[1][0].expire_at_ms, -1);
      auto one = Read({Point("x/c")});
      ASSERT_TRUE(one.ok());
      ASSERT_EQ(one->ranges[0].size(), 1u);
      EXPECT_EQ(one->ranges[0][0].expire_at_ms, at + 1);
    }
    for (bool reverse : {false, true}) {
      auto r = Read({ReadRange{"x/", "x0", 10, reverse}});  // one range: a snapshot of its own
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->ranges[0].size(), 3u);
      const std::vector<Entry>& e = r->ranges[0];
      EXPECT_EQ(e[reverse ? 2 : 0].expire_at_ms, at);
      EXPECT_EQ(e[1].expire_at_ms, -1);
      EXPECT_EQ(e[reverse ? 0 : 2].expire_at_ms, at + 1);
      auto two = Read({ReadRange{"x/a", "x/b", 10, reverse}, ReadRange{"x/b", "x0", 10, reverse}});
      ASSERT_TRUE(two.ok());
      ASSERT_EQ(two->ranges[1].size(), 2u);
      EXPECT_EQ(two->ranges[0][0].expire_at_ms, at);
      EXPECT_EQ(two->ranges[1][reverse ? 0 : 1].expire_at_ms, at + 1);
    }
    std::promise<std::vector<Entry>> scanned;
    std::vector<Entry> pages;
    engine_->SnapshotScan("x/", "x0", 2, [&](Result<ScanPage> p) {
      if (!p.ok()) {
        ADD_FAILURE() << p.status().ToString();
        scanned.set_value({});
        return false;
      }
      for (Entry& e : p->entries) pages.push_back(std::move(e));
      if (p->last) scanned.set_value(pages);
      return true;
    });
    const std::vector<Entry> all = scanned.get_future().get();
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].expire_at_ms, at);
    EXPECT_EQ(all[1].expire_at_ms, -1);
    EXPECT_EQ(all[2].expire_at_ms, at + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Storages, EngineTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvc::engine
