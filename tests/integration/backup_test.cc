// Continuous backup and point-in-time restore against an independent model.
//
// An engine with its change log on takes random atomic writes (sets, deletes, LE64 sums, checks
// that pass or fail, several in flight so group commits batch them); every acknowledged write's
// version is recorded and the writes are replayed in version order on KvModel (which shares no
// code with the engine), giving the exact state after each acknowledged commit. Meanwhile a
// ContinuousBackup ships to an in-memory target that refuses uploads and tears objects at
// random, is restarted without its last shipment (as after kill -9), and takes snapshots
// often (several generations). Then the database is restored at random acknowledged versions,
// at every snapshot, at recorded times and at the latest state, and every key, value,
// encoding and versionstamp must equal the model's. The same model runs on PostgreSQL
// (BackupStorageTest), where snapshots are written from the storage's reader like on SQLite
// (backup/snapshot_writer.h) and restores load them into PostgreSQL; on both kinds a snapshot
// taken while writes commit holds exactly one version, and snapshots carry the queue.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "backup/continuous_backup.h"
#include "backup/layout.h"
#include "backup/operations.h"
#include "backup/restore.h"
#include "backup/segment.h"
#include "backup/snapshot_writer.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "storage/migration.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/storage.h"
#include "testutil/engine_sync.h"
#include "testutil/kv_model.h"
#include "testutil/memory_target.h"
#include "testutil/pg_shared.h"

namespace kvc {
namespace {

namespace fs = std::filesystem;
using testutil::KvModel;
using testutil::MemoryTarget;
using testutil::SharedTarget;

int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}

// The backup fixture on a storage of either kind: a data directory in a temporary directory
// ("sqlite"), or a fresh database on the shared PostgreSQL server ("postgres").
class BackupFixture {
 protected:
  void OpenStorageOf(const std::string& kind) {
    dir_ = fs::temp_directory_path() / ("kvc-backup-" + HexEncode(RandomBytes(6)));
    storage::StorageOptions so;
    so.kind = kind;
    if (kind == "postgres") {
      auto c = testutil::FreshPgDatabase();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      conninfo_ = *c;
      so.location = conninfo_;
      so.pg.feed_poll_ms = 200;
    } else {
      so.location = (dir_ / "data").string();
    }
    auto s = storage::OpenStorage(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    storage_ = std::move(*s);
    auto rec = storage_->catalog().FindDatabase("default");
    ASSERT_TRUE(rec.ok());
    record_ = *rec;
    target_ = std::make_shared<MemoryTarget>();
  }
  void CloseStorage() {
    backup_.reset();
    if (engine_) engine_->Shutdown();
    engine_.reset();
    storage_.reset();
    if (!conninfo_.empty()) testutil::DropPgDatabase(conninfo_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Continuous backup with writes, restarts and failing uploads, then restores compared with
  // the model (the test below, on each storage kind).
  void RestoreMatchesModelAtRandomPoints();

  void OpenEngine() {
    auto backend = storage_->OpenBackend(record_);
    ASSERT_TRUE(backend.ok());
    engine::EngineOptions eo;
    eo.change_log = true;
    auto e = engine::Engine::Open(std::move(*backend), eo);
    ASSERT_TRUE(e.ok());
    engine_ = std::shared_ptr<engine::Engine>(std::move(*e));
  }

  void StartBackup(size_t max_segment_entries, int64_t snapshot_bytes) {
    backup::ContinuousBackupOptions o;
    o.interval_ms = 3600000;  // rounds run when the test says (ShipNow)
    o.max_segment_entries = max_segment_entries;
    o.snapshot_after_log_bytes = snapshot_bytes;
    o.retention_ms = 365LL * 24 * 3600 * 1000;
    o.retry_initial_ms = 1;
    o.ship_on_stop = false;
    auto scratch = storage_->ScratchDirectory();
    ASSERT_TRUE(scratch.ok());
    o.scratch_dir = *scratch;
    backup_ =
        std::make_unique<backup::ContinuousBackup>(std::make_unique<SharedTarget>(target_), o);
    backup_->Attach(record_.name, record_.id, engine_);
  }

  // Every row of the database at `rec`, as KvModel rows.
  std::map<std::string, KvModel::Row> ReadAll(const storage::DatabaseRecord& rec,
                                              int64_t* version) {
    std::map<std::string, KvModel::Row> out;
    auto backend = storage_->OpenBackend(rec);
    EXPECT_TRUE(backend.ok());
    auto reader = (*backend)->OpenReader();
    EXPECT_TRUE(reader.ok());
    EXPECT_TRUE((*reader)->Begin().ok());
    std::vector<Entry> entries;
    ReadRange all;
    all.start = std::string();
    all.end = std::string(1, '\xff') + std::string(1, '\xff');
    all.limit = 1 << 30;
    EXPECT_TRUE((*reader)->Scan(all, 0, &entries).ok());
    if (version) *version = *(*reader)->DataVersion();
    (*reader)->End();
    for (Entry& e : entries) out[e.key] = KvModel::Row{e.value, e.encoding, e.version};
    return out;
  }

  static std::string Describe(const std::map<std::string, KvModel::Row>& rows) {
    std::string s;
    for (const auto& [k, r] : rows) s += k + "@" + std::to_string(r.version) + " ";
    return s;
  }

  fs::path dir_;
  std::string conninfo_;  // postgres: the fresh database
  std::unique_ptr<storage::Storage> storage_;
  storage::DatabaseRecord record_;
  std::shared_ptr<MemoryTarget> target_;
  std::shared_ptr<engine::Engine> engine_;
  std::unique_ptr<backup::ContinuousBackup> backup_;
};

class BackupTest : public BackupFixture, public ::testing::Test {
 protected:
  void SetUp() override { OpenStorageOf("sqlite"); }
  void TearDown() override { CloseStorage(); }
};

// The same on every storage kind.
class BackupStorageTest : public BackupFixture, public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { OpenStorageOf(GetParam()); }
  void TearDown() override { CloseStorage(); }
};

TEST_F(BackupTest, ChangeLogHoldsEveryCommitInOrder) {
  OpenEngine();
  for (int i = 0; i < 20; ++i) {
    AtomicWrite w;
    w.mutations.push_back(testutil::Set("k" + std::to_string(i % 7), "v" + std::to_string(i)));
    if (i % 5 == 0) {
      Mutation d;
      d.type = MutationType::kDelete;
      d.key = "k" + std::to_string((i + 3) % 7);
      w.mutations.push_back(d);
    }
    if (i % 4 == 0) {
      Enqueue q;
      q.payload = std::string("\xff\x0f\x22\x03msg", 7);  // V8: the string "msg"
      q.deadline_ms = NowUnixMs() + 60000;
      q.keys_if_undelivered = {std::string("\x02"
                                           "dead",
                                           5) +
                               std::to_string(i) + '\0'};
      w.enqueues.push_back(q);
    }
    auto r = testutil::WriteSync(*engine_, w);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::promise<std::vector<storage::ChangeLogRow>> rows;
  engine_->WithReader([&](storage::Reader* r, const Status& s) {
    ASSERT_TRUE(s.ok());
    std::vector<storage::ChangeLogRow> out;
    ASSERT_TRUE(r->ReadChangeLog(0, 1000, &out).ok());
    rows.set_value(out);
  });
  auto got = rows.get_future().get();
  ASSERT_EQ(got.size(), 20u);
  int64_t prev = 0;
  int enqueues = 0;
  for (const auto& row : got) {
    EXPECT_EQ(row.prev_version, prev);
    auto e = storage::DecodeLoggedCommit(row.bytes);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e->record.version, row.version);
    EXPECT_EQ(e->prev_version, prev);
    enqueues += static_cast<int>(e->record.enqueues.size());
    prev = row.version;
  }
  EXPECT_EQ(prev, engine_->committed_version());
  EXPECT_EQ(enqueues, 5);
  // A prune takes effect with the next commit.
  engine_->PruneChangeLogThrough(got[9].version);
  ASSERT_TRUE(testutil::WriteSync(*engine_, AtomicWrite{{}, {testutil::Set("x", "y")}, {}}).ok());
  std::promise<int64_t> left;
  engine_->WithReader([&](storage::Reader* r, const Status&) {
    left.set_value(r->ChangeLogStatsAfter(0)->entries);
  });
  EXPECT_EQ(left.get_future().get(), 11);
}

TEST_F(BackupTest, SegmentsRefuseDamage) {
  std::vector<storage::ChangeLogRow> rows;
  int64_t prev = 5;
  for (int i = 0; i < 4; ++i) {
    storage::CommitRecord r;
    r.version = prev + 3;
    r.changes.push_back(
        {"k" + std::to_string(i), storage::StoredRow{"v", ValueEncoding::kBytes, r.version, -1}});
    rows.push_back({r.version, prev, 1000 + i, storage::EncodeLoggedCommit(r, prev, 1000 + i)});
    prev = r.version;
  }
  // The fuzzer's seed, written by a script of its own from the documented layout, decodes.
  {
    std::ifstream in(std::string(KVC_SOURCE_DIR) + "/tests/fuzz/corpus/backup_segment/segment",
                     std::ios::binary);
    const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto d = backup::DecodeSegment(seed);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->entries.size(), 2u);
    EXPECT_EQ(d->entries[1].record.enqueues.size(), 1u);
  }
  const std::string seg = backup::EncodeSegment(rows);
  auto ok = backup::DecodeSegment(seg);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->prev_version, 5);
  EXPECT_EQ(ok->last_version, prev);
  EXPECT_EQ(ok->entries.size(), 4u);
  // Every truncation and every single-byte change is refused.
  for (size_t n = 0; n < seg.size(); ++n) {
    EXPECT_FALSE(backup::DecodeSegment(seg.substr(0, n)).ok()) << "truncated to " << n;
  }
  for (size_t i = 0; i < seg.size(); ++i) {
    std::string bad = seg;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    EXPECT_FALSE(backup::DecodeSegment(bad).ok()) << "byte " << i;
  }
}

TEST_F(BackupTest, RestoreMatchesModelAtRandomPoints) {
  BackupFixture::RestoreMatchesModelAtRandomPoints();
}

void BackupFixture::RestoreMatchesModelAtRandomPoints() {
  const char* seed_env = std::getenv("KVC_BACKUP_SEED");
  const uint64_t seed = seed_env != nullptr && *seed_env != '\0'
                            ? std::strtoull(seed_env, nullptr, 10)
                            : std::random_device{}();
  SCOPED_TRACE("KVC_BACKUP_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int rounds = EnvInt("KVC_BACKUP_ROUNDS", 60);
  OpenEngine();
  StartBackup(1 + rng() % 40, 4000 + static_cast<int64_t>(rng() % 20000));

  struct Acked {
    int64_t version;
    AtomicWrite write;
  };
  std::vector<Acked> acked;
  std::vector<std::pair<int64_t, int64_t>> time_marks;  // (time, highest acked version by then)
  int restarts = 0, failures = 0, tears = 0;
  auto key = [&] { return "key" + std::to_string(rng() % 40); };
  std::map<std::string, int64_t> last_seen;  // key -> last acked version that set it
  for (int round = 0; round < rounds; ++round) {
    // A few writes in flight at once.
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<std::future<Result<CommitResult>>> futures;
    std::vector<AtomicWrite> writes;
    for (int i = 0; i < n; ++i) {
      AtomicWrite w;
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 5) {
        std::string v(static_cast<size_t>(rng() % 300), 'a' + static_cast<char>(rng() % 26));
        w.mutations.push_back(testutil::Set(key(), v));
      } else if (kind < 7) {
        Mutation d;
        d.type = MutationType::kDelete;
        d.key = key();
        w.mutations.push_back(d);
      } else if (kind < 9) {
        Mutation m;
        m.type = MutationType::kSum;
        m.key = "counter" + std::to_string(rng() % 3);
        m.value = KvValue{std::string("\x01\0\0\0\0\0\0\0", 8), ValueEncoding::kLe64};
        w.mutations.push_back(m);
      } else {
        // A check on a key that must still be absent: passes or fails by chance.
        Check c;
        c.key = key();
        w.checks.push_back(c);
        w.mutations.push_back(testutil::Set(c.key, "checked"));
      }
      writes.push_back(w);
      auto p = std::make_shared<std::promise<Result<CommitResult>>>();
      futures.push_back(p->get_future());
      engine_->Write(w, [p](Result<CommitResult> r) { p->set_value(std::move(r)); });
    }
    for (int i = 0; i < n; ++i) {
      auto r = futures[static_cast<size_t>(i)].get();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (r->ok) acked.push_back({r->version, writes[static_cast<size_t>(i)]});
    }
    if (rng() % 4 == 0) {
      int64_t high = 0;
      for (const Acked& a : acked) high = std::max(high, a.version);
      time_marks.emplace_back(NowUnixMs(), high);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    switch (rng() % 8) {
      case 0:
        target_->FailPuts(1 + static_cast<int>(rng() % 3));
        ++failures;
        break;
      case 1:
        target_->TearPuts(1);
        ++tears;
        break;
      case 2: {  // "kill -9": a new shipper, no last shipment, maybe after a torn upload
        if (rng() % 2) {
          target_->TearPuts(1);
          (void)backup_->ShipNow();
          ++tears;
        }
        backup_.reset();
        StartBackup(1 + rng() % 40, 4000 + static_cast<int64_t>(rng() % 20000));
        ++restarts;
        break;
      }
      default:
        break;
    }
    if (rng() % 2) (void)backup_->ShipNow();  // failures are retried at the next round
  }
  // Drain: everything acknowledged is shipped once the target behaves.
  for (int i = 0; i < 5 && !backup_->ShipNow().ok(); ++i) {
  }
  ASSERT_TRUE(backup_->ShipNow().ok());
  for (const backup::BackupStatus& s : backup_->Statuses()) {
    EXPECT_EQ(s.shipped_version, engine_->committed_version());
    EXPECT_EQ(s.lag_entries, 0);
  }

  // The model: acknowledged writes in version order.
  std::sort(acked.begin(), acked.end(),
            [](const Acked& a, const Acked& b) { return a.version < b.version; });
  std::map<int64_t, std::map<std::string, KvModel::Row>> states;  // version -> state after it
  KvModel model;
  states[0] = model.rows;
  for (const Acked& a : acked) {
    ASSERT_EQ(model.Apply(a.write, a.version), 1) << "the model disagrees at " << a.version;
    states[a.version] = model.rows;
  }
  auto state_at = [&](int64_t v) { return std::prev(states.upper_bound(v))->second; };

  auto objects = target_->List("");
  ASSERT_TRUE(objects.ok());
  auto index = backup::IndexBackups(*objects);
  const backup::DatabaseBackups& b = index["default"];
  ASSERT_FALSE(b.snapshots.empty());

  std::vector<int64_t> points;
  for (int i = 0; i < EnvInt("KVC_BACKUP_POINTS", 25) && !acked.empty(); ++i) {
    points.push_back(acked[rng() % acked.size()].version);
  }
  for (const backup::SnapshotRef& s : b.snapshots) {
    if (s.version >= b.snapshots.front().version) points.push_back(s.version);
  }
  int checked = 0;
  auto restore_and_compare = [&](const backup::RestorePoint& at, int64_t expect_version) {
    backup::RestoreOptions o;
    o.source = "default";
    o.at = at;
    o.name = "r" + std::to_string(checked);
    o.id = NewUuidV4();
    auto r = backup::RestoreDatabase(*target_, *storage_, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    int64_t version = 0;
    auto got = ReadAll(r->record, &version);
    const auto want = state_at(expect_version);
    // Every commit here is an acknowledged write: the restored state is the one after the last
    // of them at or before the point.
    EXPECT_EQ(r->restored.version, std::prev(states.upper_bound(expect_version))->first);
    EXPECT_GE(r->restored.version, r->snapshot.version);
    EXPECT_EQ(Describe(got), Describe(want)) << "at version " << expect_version;
    for (const auto& [k, row] : want) {
      auto it = got.find(k);
      ASSERT_NE(it, got.end()) << k;
      EXPECT_EQ(it->second.value, row.value) << k;
      EXPECT_EQ(it->second.enc, row.enc) << k;
    }
    EXPECT_EQ(got.size(), want.size());
    (void)storage_->Destroy(r->record);
    ++checked;
  };
  for (int64_t v : points) {
    if (v < b.snapshots.front().version) continue;  // before the first snapshot
    backup::RestorePoint at;
    at.version = v;
    restore_and_compare(at, v);
  }
  for (const auto& [t, v] : time_marks) {
    if (t < b.snapshots.front().time_ms) continue;
    backup::RestorePoint at;
    at.time_ms = t;
    restore_and_compare(at, v);
  }
  restore_and_compare(backup::RestorePoint{}, engine_->committed_version());
  std::cout << "[ backup ] seed " << seed << ": " << acked.size() << " acknowledged writes, "
            << b.snapshots.size() << " snapshots, " << b.segments.size() << " segments, "
            << restarts << " restarts, " << failures << " refused and " << tears
            << " torn uploads; " << checked << " restores equal to the model\n";
  EXPECT_GT(checked, 3);
}

TEST_F(BackupTest, RestoreInPlaceJumpsTheVersionAndKeepsTheId) {
  OpenEngine();
  StartBackup(100, 1 << 30);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        testutil::WriteSync(*engine_, AtomicWrite{{}, {testutil::Set("k", std::to_string(i))}, {}})
            .ok());
  }
  ASSERT_TRUE(backup_->ShipNow().ok());
  const int64_t shipped = engine_->committed_version();
  ASSERT_TRUE(
      testutil::WriteSync(*engine_, AtomicWrite{{}, {testutil::Set("k", "later")}, {}}).ok());
  const int64_t later = engine_->committed_version();
  backup_.reset();
  engine_.reset();
  auto r = backup::RestoreIntoCatalog(*storage_, *target_, "default", "", backup::RestorePoint{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->replaced);
  EXPECT_EQ(r->outcome.restored.version, shipped);
  auto rec = storage_->catalog().FindDatabase("default");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->id, record_.id);
  EXPECT_NE(rec->location, record_.location);
  int64_t version = 0;
  auto rows = ReadAll(*rec, &version);
  EXPECT_EQ(rows["k"].value, "9");
  EXPECT_GE(version, later + backup::kRestoreVersionJump);
  // --as: a new database beside it.
  auto as =
      backup::RestoreIntoCatalog(*storage_, *target_, "default", "copy", backup::RestorePoint{});
  ASSERT_TRUE(as.ok()) << as.status().ToString();
  EXPECT_FALSE(as->replaced);
  EXPECT_NE(as->outcome.record.id, record_.id);
  // Restoring what is not there says so.
  auto missing =
      backup::RestoreIntoCatalog(*storage_, *target_, "nope", "", backup::RestorePoint{});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  backup::RestorePoint future;
  future.version = shipped + 1000000;
  auto beyond = backup::RestoreIntoCatalog(*storage_, *target_, "default", "x", future);
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument) << beyond.status().ToString();
}

TEST_F(BackupTest, RetentionDropsOldGenerationsButKeepsTheWindowRestorable) {
  OpenEngine();
  backup::ContinuousBackupOptions o;
  o.interval_ms = 3600000;
  o.snapshot_after_log_bytes = 1;  // a snapshot after every shipment
  o.retention_ms = 1;              // everything but the newest generation is out of the window
  o.ship_on_stop = false;
  o.scratch_dir = *storage_->ScratchDirectory();
  backup_ = std::make_unique<backup::ContinuousBackup>(std::make_unique<SharedTarget>(target_), o);
  backup_->Attach(record_.name, record_.id, engine_);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        testutil::WriteSync(*engine_, AtomicWrite{{}, {testutil::Set("k", std::to_string(i))}, {}})
            .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(backup_->ShipNow().ok());
  }
  auto objects = target_->List("");
  auto index = backup::IndexBackups(*objects);
  EXPECT_LE(index["default"].snapshots.size(), 2u);
  backup::RestoreOptions ro;
  ro.source = "default";
  ro.name = "r";
  ro.id = NewUuidV4();
  auto r = backup::RestoreDatabase(*target_, *storage_, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->restored.version, engine_->committed_version());
}

// --- Backend-neutral snapshots (backup/snapshot_writer.h) on every storage kind ---------------

TEST_P(BackupStorageTest, RestoreMatchesModelAtRandomPoints) {
  if (GetParam() == "sqlite") GTEST_SKIP() << "BackupTest.RestoreMatchesModelAtRandomPoints";
  BackupFixture::RestoreMatchesModelAtRandomPoints();
}

// Every row of the snapshot file at `path`, and its data version.
std::vector<storage::KeyedRow> RowsOfFile(const std::string& path, int64_t* version) {
  storage::SqliteOptions o;
  o.create_if_missing = false;
  auto b = storage::SqliteBackend::Open(path, o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (!b.ok()) return {};
  auto r = (*b)->OpenReader();
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE((*r)->Begin().ok());
  std::vector<storage::KeyedRow> rows;
  EXPECT_TRUE((*r)->ScanRows({"", storage::EndOfKeySpace(), 1 << 20, false}, &rows).ok());
  *version = *(*r)->DataVersion();
  (*r)->End();
  return rows;
}

// A snapshot taken while a writer commits holds exactly one committed version, though it is
// read and written a page (here two rows) at a time: every write sets all 12 keys to its own
// number, so the file's keys must all carry one value and one versionstamp, the file's data
// version.
TEST_P(BackupStorageTest, SnapshotWhileWritesRunHoldsOneVersion) {
  OpenEngine();
  constexpr int kKeys = 12;
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 1; !stop.load(); ++i) {
      AtomicWrite w;
      for (int k = 0; k < kKeys; ++k) {
        w.mutations.push_back(testutil::Set("key" + std::to_string(k), std::to_string(i)));
      }
      if (!testutil::WriteSync(*engine_, w).ok()) return;
      written.store(i);
    }
  });
  while (written.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int overlapped = 0;  // snapshots during which the writer committed
  for (int attempt = 0; attempt < 200 && overlapped < 3; ++attempt) {
    const std::string file = (dir_ / ("snap" + std::to_string(attempt) + ".sqlite3")).string();
    fs::create_directories(dir_);
    auto backend = storage_->OpenBackend(record_);
    ASSERT_TRUE(backend.ok());
    auto reader = (*backend)->OpenReader();
    ASSERT_TRUE(reader.ok());
    const int before = written.load();
    auto info = backup::WriteSnapshotFile(**reader, file, backup::SnapshotWriteOptions{2});
    const int after = written.load();
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    if (after > before) ++overlapped;
    int64_t version = 0;
    const std::vector<storage::KeyedRow> rows = RowsOfFile(file, &version);
    ASSERT_EQ(rows.size(), static_cast<size_t>(kKeys));
    EXPECT_EQ(info->version, version);
    EXPECT_EQ(info->key_count, kKeys);
    for (const storage::KeyedRow& r : rows) {
      EXPECT_EQ(r.row.value, rows.front().row.value) << r.key << " in snapshot " << attempt;
      EXPECT_EQ(r.row.version, version) << r.key << " in snapshot " << attempt;
    }
    fs::remove(file);
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(overlapped, 0) << "no snapshot ran while the writer committed";
  std::cout << "[ backup ] " << GetParam() << ": " << overlapped
            << " snapshots overlapped commits; " << written.load() << " writes\n";
}

// The queue of a database (ready messages with and without delivery state, a leased one, a dead
// letter) is in its snapshot and comes back with a restore, as it was.
TEST_P(BackupStorageTest, SnapshotsCarryTheQueue) {
  {
    auto backend = storage_->OpenBackend(record_);
    ASSERT_TRUE(backend.ok());
    auto w = (*backend)->OpenWriter();
    ASSERT_TRUE(w.ok());
    storage::Writer& writer = **w;
    auto base = writer.Begin();
    ASSERT_TRUE(base.ok());
    ASSERT_NE(writer.queue_store(), nullptr);
    storage::QueueStore& q = *writer.queue_store();
    ASSERT_TRUE(
        writer.Put("k", storage::StoredRow{"v", ValueEncoding::kBytes, *base + 1, -1}).ok());
    auto msg = [](const std::string& id, int64_t ts) {
      storage::QueueRow r;
      r.ts = ts;
      r.id = id;
      r.payload = "payload-" + id;
      r.backoff_schedule = {100, 200};
      r.keys_if_undelivered = {"undelivered-" + id};
      return r;
    };
    ASSERT_TRUE(q.AddQueueMessage(msg("a-ready", 1000)).ok());
    const storage::QueueDeliveryState retried{2, "", "boom"};
    ASSERT_TRUE(q.AddQueueMessage(msg("b-retried", 2000)).ok());
    ASSERT_TRUE(q.QueueLease(msg("b-retried", 2000), 2000, retried).ok());
    ASSERT_TRUE(q.QueueRequeue(msg("b-retried", 2000), retried).ok());
    ASSERT_TRUE(q.AddQueueMessage(msg("c-running", 3000)).ok());
    ASSERT_TRUE(q.QueueLease(msg("c-running", 3000), 9000, {1, "lease-c", ""}).ok());
    storage::DeadLetterRow dead;
    dead.id = "d-dead";
    dead.payload = "gone";
    dead.keys_if_undelivered = {"x"};
    dead.attempts = 5;
    dead.last_error = "refused";
    dead.dead_at_ms = 4242;
    ASSERT_TRUE(q.QueueAddDead(dead).ok());
    ASSERT_TRUE(writer.SetDataVersion(*base + 1).ok());
    ASSERT_TRUE(writer.Commit().ok());
  }
  auto snap = backup::SnapshotDatabase(*storage_, record_, *target_);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->manifest.key_count, 1);
  backup::RestoreOptions ro;
  ro.source = "default";
  ro.name = "restored";
  ro.id = NewUuidV4();
  auto r = backup::RestoreDatabase(*target_, *storage_, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->restored.version, snap->manifest.version);
  // Both databases' queues, read the same way.
  auto queue_of = [&](const storage::DatabaseRecord& rec) {
    std::string out;
    auto backend = storage_->OpenBackend(rec);
    EXPECT_TRUE(backend.ok());
    auto reader = (*backend)->OpenReader();
    EXPECT_TRUE((*reader)->Begin().ok());
    for (const bool running : {false, true}) {
      std::vector<storage::QueuedMessage> msgs;
      EXPECT_TRUE((*reader)->ScanQueueMessages(running, {}, 100, &msgs).ok());
      for (const storage::QueuedMessage& m : msgs) {
        out += (running ? "running " : "ready ") + m.row.id + " ts=" + std::to_string(m.row.ts) +
               " " + m.row.payload + " backoff=" + std::to_string(m.row.backoff_schedule.size()) +
               " keys=" + m.row.keys_if_undelivered.front() +
               " attempts=" + std::to_string(m.state.attempts) + " lease=" + m.state.lease +
               " error=" + m.state.last_error + "\n";
      }
    }
    std::vector<storage::DeadLetterRow> dead;
    EXPECT_TRUE((*reader)->ScanDeadLetters("", 100, &dead).ok());
    for (const storage::DeadLetterRow& d : dead) {
      out += "dead " + d.id + " " + d.payload + " attempts=" + std::to_string(d.attempts) +
             " error=" + d.last_error + " at=" + std::to_string(d.dead_at_ms) + "\n";
    }
    (*reader)->End();
    return out;
  };
  const std::string want = queue_of(record_);
  EXPECT_EQ(want,
            "ready a-ready ts=1000 payload-a-ready backoff=2 keys=undelivered-a-ready attempts=0 "
            "lease= error=\n"
            "ready b-retried ts=2000 payload-b-retried backoff=2 keys=undelivered-b-retried "
            "attempts=2 lease= error=boom\n"
            "running c-running ts=9000 payload-c-running backoff=2 keys=undelivered-c-running "
            "attempts=1 lease=lease-c error=\n"
            "dead d-dead gone attempts=5 error=refused at=4242\n");
  EXPECT_EQ(queue_of(r->record), want);
  (void)storage_->Destroy(r->record);
}

INSTANTIATE_TEST_SUITE_P(Storages, BackupStorageTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace kvc
