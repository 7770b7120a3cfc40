// Storage faults (tests/testutil/faulty_backend.h) injected into the engine's writer at every
// position of a batch of concurrent multi-key writes: each failure must surface as an error
// answer, nothing half-written may ever become visible (checked after reopening the file
// without faults), acknowledged writes must all be there, and after a failed commit (fsync)
// the engine must refuse writes until it is restarted.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/random.h"
#include "engine/engine.h"
#include "engine/writer_task.h"
#include "service/directory.h"
#include "service/ops/metrics.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/sqlite/sqlite_catalog.h"
#include "testutil/faulty_backend.h"
#include "testutil/temp_dir.h"
#include "testutil/wait.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using testutil::FaultKind;
using testutil::FaultPlan;
using testutil::WriterOp;

Mutation SetBytes(std::string k, std::string v) {
  Mutation m;
  m.key = std::move(k);
  m.type = MutationType::kSet;
  m.value = KvValue{std::move(v), ValueEncoding::kBytes};
  return m;
}

// Holds the engine's writer thread (as a writer task that waits) so that writes submitted
// meanwhile are taken as one batch: the sweep below must see the same writer calls in every
// round, however the machine schedules the submitting thread against the writer.
// Thread-safety: Hold/Release from the test thread, Run on the writer thread; one mutex.
class WriterGate : public engine::WriterTask {
 public:
  const char* name() const override { return "test writer gate"; }
  int64_t NextRunMs() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return held_ ? 0 : -1;
  }
  void Bind(engine::WriterTaskHost* host) override { host_ = host; }
  void Run(engine::WriterTaskContext& /*ctx*/, int64_t /*now_ms*/) override {
    std::unique_lock<std::mutex> lock(mu_);
    waiting_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !held_; });
    waiting_ = false;
  }
  // Returns once the writer thread waits in Run (so it has finished everything before).
  void Hold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = true;
    }
    host_->Wake();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return waiting_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool waiting_ = false;
  engine::WriterTaskHost* host_ = nullptr;
};

class FaultTest : public ::testing::Test {
 public:  // used by the sweep helper too
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-fault-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }
  std::string path() const { return (dir_ / "db.sqlite3").string(); }

  void Open(std::shared_ptr<FaultPlan> plan) {
    Status s = OpenEdited(std::move(plan), {});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // As Open, with the backend's capabilities changed by `edit` and the engine's options by
  // `adjust`; returns Engine::Open's refusal.
  Status OpenEdited(std::shared_ptr<FaultPlan> plan, testutil::FaultyBackend::CapabilityEdit edit,
                    const std::function<void(engine::EngineOptions*)>& adjust = {}) {
    engine_.reset();
    KVC_ASSIGN_OR_RETURN(auto b, storage::SqliteBackend::Open(path(), {}));
    std::unique_ptr<storage::Backend> backend = std::move(b);
    if (plan || edit) {
      if (!plan) plan = std::make_shared<FaultPlan>();
      backend =
          std::make_unique<testutil::FaultyBackend>(std::move(backend), plan, std::move(edit));
    }
    engine::EngineOptions options;
    options.task_factories.emplace_back([this] {
      auto gate = std::make_unique<WriterGate>();
      gate_ = gate.get();  // owned by the engine, which outlives every use below
      return gate;
    });
    if (adjust) adjust(&options);
    KVC_ASSIGN_OR_RETURN(engine_, engine::Engine::Open(std::move(backend), options));
    return Status::Ok();
  }

  // Submits all writes while the writer is held, so that they commit as one batch, and waits
  // for every answer. `while_held` runs while the writer waits (arming a fault there counts
  // only the batch's own calls). A single write is not held: after a storage failure the
  // engine runs no writer task, so the gate could not close.
  std::vector<Result<CommitResult>> WriteAll(std::vector<AtomicWrite> writes,
                                             const std::function<void()>& while_held = {}) {
    std::vector<std::promise<Result<CommitResult>>> promises(writes.size());
    const bool hold = writes.size() > 1;
    if (hold) gate_->Hold();
    if (while_held) while_held();
    for (size_t i = 0; i < writes.size(); ++i) {
      engine_->Write(std::move(writes[i]), [&promises, i](Result<CommitResult> r) {
        promises[i].set_value(std::move(r));
      });
    }
    if (hold) gate_->Release();
    std::vector<Result<CommitResult>> out;
    for (auto& p : promises) out.push_back(p.get_future().get());
    return out;
  }

  // Every key, read in pages (a read returns at most 1000 entries per range).
  std::map<std::string, std::string> ReadAll() {
    std::map<std::string, std::string> out;
    std::string start;
    while (true) {
      std::promise<Result<engine::ReadResult>> p;
      engine_->SnapshotRead({ReadRange{start, "\xff\xff", 1000, false}},
                            [&](Result<engine::ReadResult> r) { p.set_value(std::move(r)); });
      auto r = p.get_future().get();
      EXPECT_TRUE(r.ok());
      if (!r.ok() || r->ranges[0].empty()) return out;
      for (const auto& e : r->ranges[0]) out[e.key] = e.value;
      start = r->ranges[0].back().key + std::string(1, '\0');
    }
  }

  fs::path dir_;
  std::unique_ptr<engine::Engine> engine_;
  WriterGate* gate_ = nullptr;  // owned by engine_
};

// Round `round`, write `i`: three keys that must appear together or not at all.
AtomicWrite Triple(int round, int i) {
  AtomicWrite w;
  const std::string tag = std::to_string(round) + "/" + std::to_string(i);
  for (const char* part : {"a", "b", "c"}) w.mutations.push_back(SetBytes(tag + "/" + part, tag));
  return w;
}

void SweepEveryCallPosition(FaultTest* t, FaultKind kind, std::map<std::string, int>* outcomes) {
  constexpr int kWrites = 6;
  auto plan = std::make_shared<FaultPlan>();
  bool reached_end = false;
  std::map<std::string, bool> acked;  // tag -> acknowledged
  std::map<std::string, bool> may_exist;
  for (int n = 1; n < 200 && !reached_end; ++n) {
    t->Open(plan);
    if (::testing::Test::HasFatalFailure()) return;
    const int64_t fired_before = plan->fired();
    std::vector<AtomicWrite> writes;
    for (int i = 0; i < kWrites; ++i) writes.push_back(Triple(n, i));
    auto results = t->WriteAll(std::move(writes), [&] { plan->FailNthCall(n, kind); });
    const bool fired = plan->fired() > fired_before;
    if (!fired) reached_end = true;  // n is past the last writer call of this round
    plan->Disarm();
    bool commit_failed = false;
    for (int i = 0; i < kWrites; ++i) {
      const std::string tag = std::to_string(n) + "/" + std::to_string(i);
      const auto& r = results[i];
      if (r.ok()) {
        ASSERT_TRUE(r->ok);  // no checks in these writes
        acked[tag] = true;
        (*outcomes)["acknowledged"]++;
      } else {
        // An error answer with a readable text; never a silent success.
        EXPECT_FALSE(r.status().message().empty());
        acked[tag] = false;
        may_exist[tag] = kind == FaultKind::kCommitKept;
        (*outcomes)[std::string("error: ") + StatusCodeName(r.status().code())]++;
        if (r.status().message().find("durable") != std::string::npos) commit_failed = true;
      }
    }
    if (commit_failed) {
      // After a failed commit the engine refuses writes until restarted.
      auto again = t->WriteAll({Triple(n, 99)});
      EXPECT_FALSE(again[0].ok());
      EXPECT_EQ(again[0].status().code(), StatusCode::kUnavailable);
      (*outcomes)["refused after failed commit"]++;
    }
  }
  EXPECT_TRUE(reached_end) << "the sweep never got past the last writer call";
  // Reopen without faults: everything acknowledged is there; nothing is half there.
  t->Open(nullptr);
  auto all = t->ReadAll();
  for (const auto& [tag, ok] : acked) {
    int present = 0;
    for (const char* part : {"a", "b", "c"}) present += all.count(tag + "/" + part);
    EXPECT_TRUE(present == 0 || present == 3) << tag << " is half-written (" << present << "/3)";
    if (ok) {
      EXPECT_EQ(present, 3) << "acknowledged write " << tag << " was lost";
    } else if (!may_exist[tag]) {
      EXPECT_EQ(present, 0) << "failed write " << tag << " became visible";
    }
  }
  // The refused writes after a failed commit left nothing either.
  for (const auto& [key, value] : all) {
    EXPECT_EQ(key.find("/99/"), std::string::npos) << key;
  }
}

TEST_F(FaultTest, IoErrorAtEveryWriterCall) {
  std::map<std::string, int> outcomes;
  SweepEveryCallPosition(this, FaultKind::kError, &outcomes);
  for (const auto& [k, v] : outcomes) std::printf("  io error sweep: %-40s %d\n", k.c_str(), v);
  EXPECT_GT(outcomes["acknowledged"], 0);
  EXPECT_GT(outcomes["error: INTERNAL"] + outcomes["error: UNAVAILABLE"], 0);
  EXPECT_GT(outcomes["refused after failed commit"], 0);
}

TEST_F(FaultTest, DiskFullAtEveryWriterCall) {
  std::map<std::string, int> outcomes;
  SweepEveryCallPosition(this, FaultKind::kDiskFull, &outcomes);
  for (const auto& [k, v] : outcomes) std::printf("  disk full sweep: %-40s %d\n", k.c_str(), v);
  EXPECT_GT(outcomes["acknowledged"], 0);
}

// Writes without a sum, min or max run without a savepoint (engine.h ApplyGroup). A storage
// error part-way through one must not commit its first half: the group is rolled back and run
// again, each write under its own savepoint.
TEST_F(FaultTest, AStorageErrorPartWayThroughAWriteRunsTheGroupAgainWithSavepoints) {
  auto plan = std::make_shared<FaultPlan>();
  Open(plan);
  std::vector<AtomicWrite> writes;
  for (int i = 0; i < 3; ++i) writes.push_back(Triple(1, i));
  // Puts 1-3 are write 0's, the 5th is write 1's second: the first run fails there, the
  // second run (the fault fired once) applies everything.
  auto results =
      WriteAll(std::move(writes), [&] { plan->FailNthOp(WriterOp::kPut, 5, FaultKind::kError); });
  EXPECT_EQ(plan->fired(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->ok);
  }
  auto all = ReadAll();
  for (int i = 0; i < 3; ++i) {
    for (const char* part : {"a", "b", "c"}) {
      EXPECT_EQ(all.count("1/" + std::to_string(i) + "/" + part), 1U) << i << part;
    }
  }
}

// A write with a sum still has its savepoint: when its storage fails part-way, it alone fails
// and leaves nothing, and the rest of its group commits.
TEST_F(FaultTest, AStorageErrorInAWriteWithASumFailsThatWriteAlone) {
  auto plan = std::make_shared<FaultPlan>();
  Open(plan);
  std::string one(8, '\0');
  one[0] = 1;
  AtomicWrite counted;
  counted.mutations = {SetBytes("s/a", "a"), SetBytes("s/b", "b"), SetBytes("s/c", "c")};
  Mutation sum;
  sum.key = "s/count";
  sum.type = MutationType::kSum;
  sum.value = KvValue{one, ValueEncoding::kLe64};
  counted.mutations.push_back(sum);
  std::vector<AtomicWrite> writes;
  writes.push_back(Triple(2, 0));
  writes.push_back(std::move(counted));
  writes.push_back(Triple(2, 2));
  // Put 5 is the counted write's second set.
  auto results =
      WriteAll(std::move(writes), [&] { plan->FailNthOp(WriterOp::kPut, 5, FaultKind::kError); });
  EXPECT_EQ(plan->fired(), 1);
  ASSERT_TRUE(results[0].ok() && results[0]->ok);
  EXPECT_FALSE(results[1].ok());
  EXPECT_FALSE(results[1].status().message().empty());
  ASSERT_TRUE(results[2].ok() && results[2]->ok);
  auto all = ReadAll();
  for (const char* key : {"s/a", "s/b", "s/c", "s/count"}) EXPECT_EQ(all.count(key), 0U) << key;
  for (int i : {0, 2}) {
    for (const char* part : {"a", "b", "c"}) {
      EXPECT_EQ(all.count("2/" + std::to_string(i) + "/" + part), 1U) << i << part;
    }
  }
}

TEST_F(FaultTest, FailedFsyncLosingTheData) {
  auto plan = std::make_shared<FaultPlan>();
  Open(plan);
  ASSERT_TRUE(WriteAll({Triple(1, 0)})[0].ok());
  plan->FailNextOp(WriterOp::kCommit, FaultKind::kCommitLost);
  auto r = WriteAll({Triple(2, 0), Triple(2, 1)});
  for (const auto& x : r) {
    ASSERT_FALSE(x.ok());
    EXPECT_EQ(x.status().code(), StatusCode::kUnavailable) << x.status().ToString();
  }
  // Refused until restart, even though the fault is gone.
  auto refused = WriteAll({Triple(3, 0)});
  EXPECT_EQ(refused[0].status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused[0].status().message().find("restart"), std::string::npos);
  // Reads keep working meanwhile and see only the first write.
  EXPECT_EQ(ReadAll().size(), 3u);
  Open(nullptr);  // restart
  auto all = ReadAll();
  EXPECT_EQ(all.size(), 3u);
  EXPECT_TRUE(all.count("1/0/a"));
  EXPECT_TRUE(WriteAll({Triple(4, 0)})[0].ok());
}

TEST_F(FaultTest, FailedFsyncKeepingTheData) {
  // The client is told the write failed, yet the data reached the disk: the server cannot know
  // which happened, so it refuses to go on; after restart the write is there whole.
  auto plan = std::make_shared<FaultPlan>();
  Open(plan);
  plan->FailNextOp(WriterOp::kCommit, FaultKind::kCommitKept);
  auto r = WriteAll({Triple(1, 0)});
  ASSERT_FALSE(r[0].ok());
  EXPECT_EQ(WriteAll({Triple(2, 0)})[0].status().code(), StatusCode::kUnavailable);
  Open(nullptr);
  auto all = ReadAll();
  EXPECT_EQ(all.size(), 3u);
  for (const char* part : {"a", "b", "c"}) EXPECT_TRUE(all.count(std::string("1/0/") + part));
}

// An optimistic backend (storage/capabilities.h): SQLite told to say so, with conflicts injected
// at Commit. The read cache is off: the "other writer" below writes behind the engine's back.
void Optimistic(storage::BackendCapabilities* c) { c->optimistic_conflicts = true; }
void NoCache(engine::EngineOptions* o) { o->read_cache_bytes = 0; }

TEST_F(FaultTest, CommitConflictsRunTheGroupAgainWithItsChecksReevaluated) {
  auto plan = std::make_shared<FaultPlan>();
  ASSERT_TRUE(OpenEdited(plan, Optimistic, NoCache).ok());
  // Refused three times, then committed: applied once, and the engine is not failed.
  plan->FailNextOps(WriterOp::kCommit, 3, FaultKind::kConflict);
  auto r = WriteAll({Triple(1, 0)});
  ASSERT_TRUE(r[0].ok()) << r[0].status().ToString();
  EXPECT_TRUE(r[0]->ok);
  EXPECT_EQ(plan->fired(), 3);
  EXPECT_EQ(engine_->counters().commit_conflicts.load(), 3u);
  EXPECT_EQ(engine_->counters().commit_failures.load(), 0u);
  EXPECT_TRUE(engine_->writable());
  EXPECT_EQ(ReadAll().size(), 3u);
  // The conflict was another writer setting the checked key: run again, the check fails and
  // nothing of the write applies.
  plan->set_conflict_hook([](storage::Writer& other) {
    Result<int64_t> base = other.Begin();
    ASSERT_TRUE(base.ok());
    const storage::StoredRow row{"theirs", ValueEncoding::kBytes, *base + 1, -1};
    ASSERT_TRUE(other.Put("guard", row).ok());
    ASSERT_TRUE(other.SetDataVersion(*base + 1).ok());
    ASSERT_TRUE(other.Commit().ok());
  });
  plan->FailNextOps(WriterOp::kCommit, 1, FaultKind::kConflict);
  AtomicWrite w;
  w.checks.push_back(Check{"guard", ""});  // must be absent
  w.mutations.push_back(SetBytes("guard", "ours"));
  w.mutations.push_back(SetBytes("mine", "x"));
  auto c = WriteAll({std::move(w)});
  ASSERT_TRUE(c[0].ok()) << c[0].status().ToString();
  EXPECT_FALSE(c[0]->ok);
  EXPECT_EQ(c[0]->failed_checks, std::vector<uint32_t>{0});
  auto all = ReadAll();
  EXPECT_EQ(all["guard"], "theirs");
  EXPECT_EQ(all.count("mine"), 0u);
}

TEST_F(FaultTest, CommitConflictsBeyondTheBoundAnswerUnavailable) {
  EXPECT_GT(engine::EngineOptions{}.max_commit_retries, 0u) << "a default that retries";
  auto plan = std::make_shared<FaultPlan>();
  ASSERT_TRUE(OpenEdited(plan, Optimistic, [](engine::EngineOptions* o) {
                o->max_commit_retries = 2;
              }).ok());
  plan->FailNextOps(WriterOp::kCommit, 3, FaultKind::kConflict);
  auto r = WriteAll({Triple(1, 0), Triple(1, 1)});
  for (const auto& x : r) {
    ASSERT_FALSE(x.ok());
    EXPECT_EQ(x.status().code(), StatusCode::kUnavailable) << x.status().ToString();
  }
  EXPECT_EQ(plan->fired(), 3) << "the first try and two more";
  EXPECT_TRUE(ReadAll().empty());
  // A conflict is not a storage failure: the next write goes through.
  EXPECT_TRUE(engine_->writable());
  EXPECT_TRUE(WriteAll({Triple(2, 0)})[0].ok());
  EXPECT_EQ(ReadAll().size(), 3u);
}

// commit_retries counts every run again after a conflict; the refusal that ends the retries is
// a conflict (commit_conflicts) but no retry.
TEST_F(FaultTest, CommitRetriesCountEveryRunAgain) {
  auto plan = std::make_shared<FaultPlan>();
  ASSERT_TRUE(OpenEdited(plan, Optimistic, [](engine::EngineOptions* o) {
                o->max_commit_retries = 2;
              }).ok());
  EXPECT_EQ(engine_->counters().commit_retries.load(), 0u);
  plan->FailNextOps(WriterOp::kCommit, 1, FaultKind::kConflict);
  ASSERT_TRUE(WriteAll({Triple(1, 0)})[0].ok());
  EXPECT_EQ(engine_->counters().commit_retries.load(), 1u);
  plan->FailNextOps(WriterOp::kCommit, 3, FaultKind::kConflict);
  EXPECT_EQ(WriteAll({Triple(2, 0)})[0].status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(engine_->counters().commit_conflicts.load(), 4u);
  EXPECT_EQ(engine_->counters().commit_retries.load(), 3u) << "1, then 2 before the 503";
}

// /metrics shows each database's retries as kvconnect_commit_retries_total{database="..."}: a
// directory whose backends are optimistic SQLite with conflicts injected, scraped by Metrics.
TEST(CommitRetriesMetric, FollowsTheEnginesCount) {
  testutil::TempDir dir;
  auto cat = storage::SqliteCatalog::Open((dir.path() / "catalog.sqlite3").string());
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  std::unique_ptr<storage::SqliteCatalog> catalog = std::move(*cat);
  const std::string db_path = (dir.path() / "db.sqlite3").string();
  {
    auto b = storage::SqliteBackend::Open(db_path, {});
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(catalog->AddDatabase({(*b)->database_id(), "default", db_path, 1}).ok());
  }
  auto plan = std::make_shared<FaultPlan>();
  service::Directory directory(
      catalog.get(),
      [plan](const storage::DatabaseRecord& rec) -> Result<std::unique_ptr<storage::Backend>> {
        KVC_ASSIGN_OR_RETURN(auto b, storage::SqliteBackend::Open(rec.location, {}));
        return std::unique_ptr<storage::Backend>(std::make_unique<testutil::FaultyBackend>(
            std::unique_ptr<storage::Backend>(std::move(b)), plan, Optimistic));
      },
      service::DirectoryOptions{});
  ASSERT_TRUE(directory.Start().ok());
  service::Metrics metrics(service::MetricsOptions{});
  metrics.Start(&directory);
  const std::string zero = "kvconnect_commit_retries_total{database=\"default\"} 0\n";
  EXPECT_NE(metrics.Render().find(zero), std::string::npos) << metrics.Render();

  plan->FailNextOps(WriterOp::kCommit, 2, FaultKind::kConflict);
  std::promise<Result<CommitResult>> done;
  directory.snapshot()->Find("default")->engine->Write(
      Triple(1, 0), [&](Result<CommitResult> r) { done.set_value(std::move(r)); });
  const Result<CommitResult> r = done.get_future().get();
  ASSERT_TRUE(r.ok() && r->ok) << r.status().ToString();
  const std::string two = "kvconnect_commit_retries_total{database=\"default\"} 2\n";
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("# TYPE kvconnect_commit_retries_total counter\n"), std::string::npos);
  EXPECT_NE(text.find(two), std::string::npos) << text;
  metrics.Stop();
  directory.Stop();
}

// A missing capability is refused when the engine opens, with a Status that names it, not when
// the first write needs it.
TEST_F(FaultTest, OpenRefusesABackendWithoutWhatTheOptionsNeed) {
  auto expect_refused = [](const Status& s, StatusCode code, const char* words) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.ToString();
  };
  expect_refused(OpenEdited(nullptr, [](auto* c) { c->queue_store = false; }),
                 StatusCode::kInternal, "no queue store");
  auto no_log = [](storage::BackendCapabilities* c) { c->change_log = false; };
  expect_refused(OpenEdited(nullptr, no_log, [](auto* o) { o->change_log = true; }),
                 StatusCode::kInvalidArgument, "no change log");
  EXPECT_TRUE(OpenEdited(nullptr, no_log).ok()) << "without backups no change log is needed";
  expect_refused(OpenEdited(nullptr, [](auto* c) { c->exclusive_writer = false; }),
                 StatusCode::kInternal, "no change feed");
  expect_refused(OpenEdited(nullptr, [](auto* c) { c->transaction_limits.max_bytes = 1000; }),
                 StatusCode::kInvalidArgument, "max_total_mutation_bytes");
  EXPECT_TRUE(engine_ == nullptr);
  ASSERT_TRUE(OpenEdited(nullptr, {}).ok());
  EXPECT_TRUE(WriteAll({Triple(1, 0)})[0].ok());
}

// Counts the writes of every group commit.
class GroupSizes : public engine::CommitListener {
 public:
  void OnCommit(const storage::CommitGroup& g) override {
    std::lock_guard<std::mutex> lock(mu);
    if (g.origin == storage::CommitOrigin::kWrite) sizes.push_back(g.records.size());
  }
  std::mutex mu;
  std::vector<size_t> sizes;
};

TEST_F(FaultTest, GroupCommitsStayWithinTheBackendsTransactionLimits) {
  // Each Triple write counts 24 bytes (three 5-byte keys with 3-byte values).
  const std::vector<std::pair<const char*, testutil::FaultyBackend::CapabilityEdit>> cases = {
      {"max_writes", [](auto* c) { c->transaction_limits.max_writes = 2; }},
      {"max_bytes", [](auto* c) { c->transaction_limits.max_bytes = 50; }},
  };
  for (const auto& [name, edit] : cases) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(OpenEdited(nullptr, edit, [](engine::EngineOptions* o) {
                  o->limits.max_total_mutation_bytes = 50;
                }).ok());
    auto sizes = std::make_shared<GroupSizes>();
    engine_->AddListener(sizes);
    std::vector<AtomicWrite> writes;
    for (int i = 0; i < 5; ++i) writes.push_back(Triple(1, i));
    for (const auto& r : WriteAll(std::move(writes))) EXPECT_TRUE(r.ok());
    std::lock_guard<std::mutex> lock(sizes->mu);
    EXPECT_EQ(sizes->sizes, (std::vector<size_t>{2, 2, 1}));
  }
}

// A write that reaches the disk although its commit reported a failure (kCommitKept) lands
// between a prewarm chunk's snapshot and the chunk's filling of the cache (the scan-rows hook
// runs there). The failed commit leaves the key uncached, so only the cache's per-shard tickets
// keep the chunk from storing the row from before the write: the key must read what the disk
// holds.
TEST_F(FaultTest, APrewarmLeavesOutARowThatAWriteChangedAfterItsSnapshot) {
  Open(nullptr);
  AtomicWrite first;
  first.mutations = {SetBytes("a", "old"), SetBytes("b", "old")};
  ASSERT_TRUE(WriteAll({first})[0].ok());

  auto plan = std::make_shared<FaultPlan>();
  std::promise<engine::Engine*> opened;
  std::shared_future<engine::Engine*> engine = opened.get_future().share();
  std::atomic<int> scans{0};
  plan->set_scan_rows_hook([&scans, engine, plan_ptr = plan.get()] {
    if (scans.fetch_add(1) != 0) return;  // the first chunk only
    plan_ptr->FailNextOp(WriterOp::kCommit, FaultKind::kCommitKept);
    AtomicWrite w;
    w.mutations = {SetBytes("a", "new")};
    std::promise<Result<CommitResult>> done;
    engine.get()->Write(std::move(w), [&done](Result<CommitResult> r) { done.set_value(r); });
    EXPECT_FALSE(done.get_future().get().ok()) << "the commit reports the injected failure";
  });
  ASSERT_TRUE(
      OpenEdited(plan, {}, [](engine::EngineOptions* o) { o->prewarm_read_cache = true; }).ok());
  opened.set_value(engine_.get());
  ASSERT_TRUE(testutil::WaitFor([this] { return !engine_->prewarm_progress().running; }))
      << "the prewarm did not end";
  EXPECT_EQ(scans.load(), 1);
  EXPECT_EQ(plan->fired(), 1);
  EXPECT_LE(engine_->prewarm_progress().entries, 1u) << "at most b";
  const std::map<std::string, std::string> all = ReadAll();  // a range read: from storage
  ASSERT_EQ(all.count("a"), 1u);
  EXPECT_EQ(all.at("a"), "new") << "the write reached the disk";
  std::promise<Result<engine::ReadResult>> p;
  engine_->SnapshotRead({ReadRange{"a", std::string("a\0", 2), 1, false}},
                        [&p](Result<engine::ReadResult> r) { p.set_value(std::move(r)); });
  auto point = p.get_future().get();  // a point read: from the cache if it holds the key
  ASSERT_TRUE(point.ok() && point->ranges[0].size() == 1u);
  EXPECT_EQ(point->ranges[0][0].value, "new") << "the cache kept the row from before the write";
}

}  // namespace
}  // namespace kvc
