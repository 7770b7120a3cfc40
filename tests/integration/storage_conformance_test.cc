// One storage contract, every storage kind: the same tests run on SQLite (a data directory in a
// temporary directory) and on PostgreSQL (a fresh database on the shared server,
// testutil/pg_shared.h), each opened through OpenStorage as `serve` opens it. Through the
// backend interface (storage/backend.h): writer transactions commit whole or leave nothing,
// savepoints, snapshot reads and ranges in byte order either way, point reads in their own
// snapshot, expiry (hidden from scans, kept for Get and ScanRows, swept by deadline). Through
// an engine on the backend (engine/engine.h): checks, versionstamps and watches (a backend that
// is not its database's sole writer feeds them through its change feed). The engine's own
// semantics on both kinds are integration/engine_test.cc.
//
// A third storage kind adds its name to the instantiation below and a branch to SetUp.
// Without postgresql-15 the PostgreSQL half fails, saying what to install.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codec/versionstamp.h"
#include "engine/engine.h"
#include "storage/storage.h"
#include "testutil/engine_sync.h"
#include "testutil/pg_shared.h"
#include "testutil/temp_dir.h"
#include "testutil/wait.h"

namespace kvc {
namespace {

using testutil::Set;

storage::StoredRow Row(std::string value, int64_t version, int64_t expire_at_ms = -1) {
  return storage::StoredRow{std::move(value), ValueEncoding::kBytes, version, expire_at_ms};
}

std::string Stamp(int64_t v) { return codec::VersionstampToBytes(codec::VersionToVersionstamp(v)); }

// The keys of `entries`, in order.
std::vector<std::string> Keys(const std::vector<Entry>& entries) {
  std::vector<std::string> out;
  for (const Entry& e : entries) out.push_back(e.key);
  return out;
}

class StorageConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    storage::StorageOptions so;
    so.kind = GetParam();
    if (so.kind == "postgres") {
      auto c = testutil::FreshPgDatabase();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      conninfo_ = *c;
      so.location = conninfo_;
      so.pg.feed_poll_ms = 200;
    } else {
      so.location = (dir_.path() / "data").string();
    }
    auto st = storage::OpenStorage(so);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    storage_ = std::move(*st);
    auto rec = storage_->catalog().FindDatabase(storage::kDefaultDatabase);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    auto b = storage_->OpenBackend(*rec);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(*b);
  }
  void TearDown() override {
    if (engine_) engine_->Shutdown();
    engine_.reset();
    backend_.reset();
    storage_.reset();
    if (!conninfo_.empty()) testutil::DropPgDatabase(conninfo_);
  }

  // Commits `rows` in one writer transaction at the next version; returns that version.
  int64_t Commit(const std::vector<std::pair<std::string, storage::StoredRow>>& rows) {
    auto w = backend_->OpenWriter();
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return -1;
    auto base = (*w)->Begin();
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    if (!base.ok()) return -1;
    const int64_t version = *base + 1;
    for (auto [key, row] : rows) {
      row.version = version;
      EXPECT_TRUE((*w)->Put(key, row).ok()) << key;
    }
    EXPECT_TRUE((*w)->SetDataVersion(version).ok());
    Status s = (*w)->Commit();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return version;
  }

  // Commits the transaction `w` began at `base` as the next version, and closes the writer.
  static void CommitAndClose(std::unique_ptr<storage::Writer>& w, int64_t base) {
    ASSERT_TRUE(w->SetDataVersion(base + 1).ok());
    ASSERT_TRUE(w->Commit().ok());
    w.reset();
  }

  // A reader with a snapshot open (End() it when done).
  std::unique_ptr<storage::Reader> Snapshot() {
    auto r = backend_->OpenReader();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return nullptr;
    Status s = (*r)->Begin();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return std::move(*r);
  }

  std::optional<std::string> ValueOf(storage::Reader& r, const std::string& key) {
    auto row = r.Get(key);
    EXPECT_TRUE(row.ok()) << row.status().ToString();
    if (!row.ok() || !*row) return std::nullopt;
    return (*row)->value;
  }

  // An engine on the backend (which it takes over), on the system clock (PostgreSQL's change
  // table keeps commits by the time they were made).
  engine::Engine& OpenEngine() {
    auto e = engine::Engine::Open(std::move(backend_), engine::EngineOptions{});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
    return *engine_;
  }

  testutil::TempDir dir_{"kvc-conformance-"};
  std::string conninfo_;
  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<storage::Backend> backend_;
  std::unique_ptr<engine::Engine> engine_;
};

INSTANTIATE_TEST_SUITE_P(Kinds, StorageConformanceTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// A committed transaction is seen whole by the next snapshot; a rolled-back one leaves nothing;
// a write rolled back to its savepoint leaves nothing either, while the rest of the transaction
// commits.
TEST_P(StorageConformanceTest, TransactionsCommitWholeOrLeaveNothing) {
  const int64_t v1 = Commit({{"a", Row("1", 0)}, {"b", Row("2", 0)}});
  auto r = Snapshot();
  ASSERT_TRUE(r);
  EXPECT_EQ(ValueOf(*r, "a"), "1");
  EXPECT_EQ((*r->Get("b"))->version, v1);
  EXPECT_EQ(ValueOf(*r, "zz"), std::nullopt);
  EXPECT_EQ(*r->DataVersion(), v1);
  r->End();

  auto w = backend_->OpenWriter();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(*(*w)->Begin(), v1);
  ASSERT_TRUE((*w)->Put("d", Row("4", v1 + 1)).ok());
  ASSERT_TRUE((*w)->Delete("a").ok());
  EXPECT_EQ((*(*w)->Get("d"))->value, "4");  // its own writes, inside the transaction
  EXPECT_EQ(*(*w)->Get("a"), std::nullopt);
  (*w)->Rollback();

  ASSERT_EQ(*(*w)->Begin(), v1);
  ASSERT_TRUE((*w)->Put("x", Row("x", v1 + 1)).ok());
  ASSERT_TRUE((*w)->Savepoint().ok());
  ASSERT_TRUE((*w)->Put("y", Row("y", v1 + 1)).ok());
  ASSERT_TRUE((*w)->Delete("b").ok());
  ASSERT_TRUE((*w)->RollbackToSavepoint().ok());
  EXPECT_EQ(*(*w)->Get("y"), std::nullopt);
  ASSERT_TRUE((*w)->Savepoint().ok());
  ASSERT_TRUE((*w)->Put("z", Row("z", v1 + 1)).ok());
  ASSERT_TRUE((*w)->ReleaseSavepoint().ok());
  CommitAndClose(*w, v1);

  r = Snapshot();
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->DataVersion(), v1 + 1);
  EXPECT_EQ(ValueOf(*r, "a"), "1") << "the rolled-back delete";
  EXPECT_EQ(ValueOf(*r, "d"), std::nullopt) << "the rolled-back put";
  EXPECT_EQ(ValueOf(*r, "b"), "2") << "the delete rolled back to the savepoint";
  EXPECT_EQ(ValueOf(*r, "y"), std::nullopt) << "the put rolled back to the savepoint";
  EXPECT_EQ(ValueOf(*r, "x"), "x");
  EXPECT_EQ(ValueOf(*r, "z"), "z");
  r->End();
}

// Ranges are [start, end) in byte order (0x00 and 0xff bytes included), forward or reverse,
// cut at the limit; the one-snapshot point and range reads agree with them.
TEST_P(StorageConformanceTest, RangesAreInByteOrderEitherWay) {
  const std::string a0("a\0", 2);
  const std::string bff("b\xff", 2);
  const int64_t v = Commit({{"c", Row("c", 0)},
                            {bff, Row("bff", 0)},
                            {"a", Row("a", 0)},
                            {"ab", Row("ab", 0)},
                            {a0, Row("a0", 0)},
                            {"b", Row("b", 0)}});
  auto scan = [](storage::Reader& r, ReadRange range) {
    std::vector<Entry> out;
    Status s = r.Scan(range, 0, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  auto r = Snapshot();
  ASSERT_TRUE(r);
  const std::vector<Entry> all = scan(*r, {"a", "c", 100, false});
  EXPECT_EQ(Keys(all), (std::vector<std::string>{"a", a0, "ab", "b", bff}));
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[1].value, "a0");
  EXPECT_EQ(all[1].version, v);
  EXPECT_EQ(Keys(scan(*r, {"a", "c", 2, false})), (std::vector<std::string>{"a", a0}));
  EXPECT_EQ(Keys(scan(*r, {"a", "c", 2, true})), (std::vector<std::string>{bff, "b"}));
  EXPECT_EQ(Keys(scan(*r, {a0, "b", 100, false})), (std::vector<std::string>{a0, "ab"}));
  EXPECT_EQ(Keys(scan(*r, {"", "\xff", 100, true})),
            (std::vector<std::string>{"c", bff, "b", "ab", a0, "a"}));
  EXPECT_TRUE(scan(*r, {"x", "y", 100, false}).empty());
  r->End();

  auto alone = backend_->OpenReader();
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  std::vector<std::optional<storage::StoredRow>> rows;
  auto at = (*alone)->GetAlone({"ab", "nope", bff}, &rows);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(*at, v);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]->value, "ab");
  EXPECT_FALSE(rows[1].has_value());
  EXPECT_EQ(rows[2]->value, "bff");
  std::vector<Entry> ranged;
  auto ranged_at = (*alone)->ScanAlone({"a", "c", 3, true}, 0, &ranged);
  ASSERT_TRUE(ranged_at.ok()) << ranged_at.status().ToString();
  EXPECT_EQ(*ranged_at, v);
  EXPECT_EQ(Keys(ranged), (std::vector<std::string>{bff, "b", "ab"}));
}

// An expired row is hidden from scans from its expiry on, but Get and ScanRows still return it
// (with its expiry) until the sweep deletes it; the sweep takes what is due, and the earliest
// expiry left is the next one.
TEST_P(StorageConformanceTest, ExpiredRowsHideFromScansUntilSwept) {
  Commit({{"e1", Row("1", 0, 1000)}, {"e2", Row("2", 0, 2000)}, {"k", Row("k", 0)}});
  auto r = Snapshot();
  ASSERT_TRUE(r);
  for (auto [now, keys] : std::vector<std::pair<int64_t, std::vector<std::string>>>{
           {500, {"e1", "e2", "k"}}, {1000, {"e2", "k"}}, {2500, {"k"}}}) {
    std::vector<Entry> out;
    ASSERT_TRUE(r->Scan({"", "\xff", 100, false}, now, &out).ok());
    EXPECT_EQ(Keys(out), keys) << "at " << now;
  }
  auto e1 = r->Get("e1");
  ASSERT_TRUE(e1.ok() && e1->has_value());
  EXPECT_EQ((*e1)->expire_at_ms, 1000);
  std::vector<storage::KeyedRow> rows;
  ASSERT_TRUE(r->ScanRows({"", "\xff", 100, false}, &rows).ok());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, "e1");
  EXPECT_EQ(rows[1].row.expire_at_ms, 2000);
  EXPECT_EQ(rows[2].row.expire_at_ms, -1);
  r->End();

  auto w = backend_->OpenWriter();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto base = (*w)->Begin();
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto swept = (*w)->DeleteExpired(1500);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, std::vector<std::string>{"e1"});
  // Asked by the backend that sweeps (PostgreSQL elects one per database in DeleteExpired and
  // tells the others to look again later).
  EXPECT_EQ(*(*w)->EarliestExpiry(), 2000);
  CommitAndClose(*w, *base);
  r = Snapshot();
  ASSERT_TRUE(r);
  EXPECT_EQ(ValueOf(*r, "e1"), std::nullopt);
  EXPECT_EQ(ValueOf(*r, "e2"), "2");
  r->End();
}

// Overwrites keep the value, the version and the expiry index true whichever way they go: the
// same expiry (SQLite takes its update that leaves the index alone), an expiry added, changed or
// removed (the upsert), and a key that is new.
TEST_P(StorageConformanceTest, OverwritesKeepValueVersionAndExpiryTrue) {
  Commit({{"k", Row("1", 0)}, {"e", Row("e1", 0, 3000)}});
  const int64_t same = Commit({{"k", Row("2", 0)}, {"e", Row("e2", 0, 3000)}});
  auto r = Snapshot();
  ASSERT_TRUE(r);
  EXPECT_EQ(ValueOf(*r, "k"), "2");
  EXPECT_EQ((*r->Get("k"))->version, same);
  EXPECT_EQ((*r->Get("k"))->expire_at_ms, -1);
  EXPECT_EQ(ValueOf(*r, "e"), "e2");
  EXPECT_EQ((*r->Get("e"))->version, same);
  EXPECT_EQ((*r->Get("e"))->expire_at_ms, 3000);
  r->End();

  // k gains an expiry, e loses its own, n is new with one.
  const int64_t changed =
      Commit({{"k", Row("3", 0, 1000)}, {"e", Row("e3", 0)}, {"n", Row("n", 0, 2000)}});
  auto w = backend_->OpenWriter();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto base = (*w)->Begin();
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(*base, changed);
  // Nothing is due yet; asked by the backend that sweeps (as above), the earliest is k's.
  auto none = (*w)->DeleteExpired(500);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*(*w)->EarliestExpiry(), 1000);
  auto swept = (*w)->DeleteExpired(2500);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  std::vector<std::string> gone = *swept;
  std::sort(gone.begin(), gone.end());
  EXPECT_EQ(gone, (std::vector<std::string>{"k", "n"}));
  EXPECT_EQ(*(*w)->EarliestExpiry(), std::nullopt) << "e's expiry was removed by its overwrite";
  CommitAndClose(*w, *base);
  r = Snapshot();
  ASSERT_TRUE(r);
  EXPECT_EQ(ValueOf(*r, "k"), std::nullopt);
  EXPECT_EQ(ValueOf(*r, "e"), "e3");
  EXPECT_EQ((*r->Get("e"))->version, changed);
  EXPECT_EQ((*r->Get("e"))->expire_at_ms, -1);
  r->End();
}

// The cost side of the same overwrite on SQLite: a commit of overwrites with their expiry
// unchanged writes one WAL page per table leaf it changes (plus data_version's), none of
// kv_expiration_ms_idx. The upsert that also names expiration_ms wrote about twice as many.
TEST_P(StorageConformanceTest, SqliteOverwritesWriteNoIndexPages) {
  if (GetParam() != "sqlite") GTEST_SKIP() << "the WAL is SQLite's";
  constexpr int kKeys = 4000;
  constexpr int kOverwrites = 16;
  // One writer throughout: the WAL goes away with the last connection.
  auto w = backend_->OpenWriter();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto commit = [&](int count, int stride, const std::string& value) {
    auto base = (*w)->Begin();
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    for (int i = 0; i < count; ++i) {
      char key[16];
      std::snprintf(key, sizeof key, "key%06d", i * stride);
      ASSERT_TRUE((*w)->Put(key, Row(value, *base + 1)).ok());
    }
    ASSERT_TRUE((*w)->SetDataVersion(*base + 1).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  };
  commit(kKeys, 1, std::string(100, 'v'));
  auto rec = storage_->catalog().FindDatabase(storage::kDefaultDatabase);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const std::filesystem::path wal = dir_.path() / "data" / (rec->location + "-wal");
  ASSERT_TRUE(std::filesystem::exists(wal)) << wal;
  auto page_size = [&] {
    std::ifstream in(wal, std::ios::binary);
    unsigned char h[12] = {};
    in.read(reinterpret_cast<char*>(h), sizeof h);
    return (uint32_t{h[8]} << 24) | (uint32_t{h[9]} << 16) | (uint32_t{h[10]} << 8) | h[11];
  }();
  ASSERT_GE(page_size, 512u);
  const auto before = std::filesystem::file_size(wal);
  // Keys spread over the table, so each is on a leaf of its own.
  commit(kOverwrites, kKeys / kOverwrites, "w");
  const auto frames = (std::filesystem::file_size(wal) - before) / (page_size + 24);
  EXPECT_GE(frames, static_cast<uint64_t>(kOverwrites));
  EXPECT_LE(frames, static_cast<uint64_t>(kOverwrites + 2))
      << "a commit of " << kOverwrites << " overwrites wrote " << frames << " WAL pages";
}

// Through the engine: a check passes only on the current versionstamp (or absence), a failed
// check applies nothing, versionstamps strictly increase, and reads see the last commit.
TEST_P(StorageConformanceTest, ChecksDecideAndVersionstampsIncrease) {
  engine::Engine& e = OpenEngine();
  auto w1 = testutil::WriteSync(e, AtomicWrite{{Check{"k", ""}}, {Set("k", "1")}, {}});
  ASSERT_TRUE(w1.ok()) << w1.status().ToString();
  ASSERT_TRUE(w1->ok);
  auto w2 =
      testutil::WriteSync(e, AtomicWrite{{Check{"k", ""}}, {Set("k", "2"), Set("o", "x")}, {}});
  ASSERT_TRUE(w2.ok()) << w2.status().ToString();
  EXPECT_FALSE(w2->ok);
  auto w3 =
      testutil::WriteSync(e, AtomicWrite{{Check{"k", Stamp(w1->version)}}, {Set("k", "3")}, {}});
  ASSERT_TRUE(w3.ok()) << w3.status().ToString();
  ASSERT_TRUE(w3->ok);
  EXPECT_GT(w3->version, w1->version);
  auto w4 =
      testutil::WriteSync(e, AtomicWrite{{Check{"k", Stamp(w1->version)}}, {Set("k", "4")}, {}});
  ASSERT_TRUE(w4.ok()) << w4.status().ToString();
  EXPECT_FALSE(w4->ok) << "a stale versionstamp";
  int64_t last = w3->version;
  for (int i = 0; i < 10; ++i) {
    auto w = testutil::WriteSync(e, AtomicWrite{{}, {Set("n", std::to_string(i))}, {}});
    ASSERT_TRUE(w.ok() && w->ok);
    EXPECT_GT(w->version, last);
    last = w->version;
  }
  auto read = testutil::ReadSync(e, {ReadRange{"k", std::string("k\0", 2), 1, false},
                                     ReadRange{"o", std::string("o\0", 2), 1, false}});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->ranges[0].size(), 1u);
  EXPECT_EQ(read->ranges[0][0].value, "3");
  EXPECT_EQ(read->ranges[0][0].version, w3->version);
  EXPECT_TRUE(read->ranges[1].empty()) << "the write whose check failed";
  EXPECT_GE(read->version, last);
}

// Through the engine: a watcher of a key hears every commit that changes it, once, in order,
// with the new state; commits to other keys are not its business.
TEST_P(StorageConformanceTest, WatchersHearEveryChangeInOrder) {
  engine::Engine& e = OpenEngine();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int64_t, std::optional<std::string>>> seen;
  engine::WatchHub::Callbacks cb;
  cb.on_change = [&](const std::vector<engine::WatchHub::Change>& changes) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& c : changes) {
      seen.emplace_back(c.version, c.row ? std::optional<std::string>(c.row->value) : std::nullopt);
    }
    cv.notify_all();
  };
  auto sub = e.Subscribe({"w"}, cb);
  std::vector<std::pair<int64_t, std::optional<std::string>>> written;
  for (int i = 0; i < 5; ++i) {
    auto w =
        testutil::WriteSync(e, AtomicWrite{{}, {Set("w", std::to_string(i)), Set("x", "")}, {}});
    ASSERT_TRUE(w.ok() && w->ok);
    written.emplace_back(w->version, std::to_string(i));
    ASSERT_TRUE(testutil::WriteSync(e, AtomicWrite{{}, {Set("other", "")}, {}}).ok());
  }
  Mutation del;
  del.key = "w";
  del.type = MutationType::kDelete;
  auto d = testutil::WriteSync(e, AtomicWrite{{}, {del}, {}});
  ASSERT_TRUE(d.ok() && d->ok);
  written.emplace_back(d->version, std::nullopt);
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(
      cv.wait_for(lock, testutil::kWaitTimeout, [&] { return seen.size() >= written.size(); }))
      << "the watcher heard " << seen.size() << " of " << written.size() << " changes";
  EXPECT_EQ(seen, written);
  lock.unlock();
  sub.reset();
}

}  // namespace
}  // namespace kvc
