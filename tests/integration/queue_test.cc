// Queue delivery (queue/queue.h, docs/queues.md) on a real engine over a SQLite file, with an
// injected clock (no sleeps): a differential test against testutil::QueueModel, the exact
// backoff schedule, stale leases, atomicity of a dead letter under injected storage faults,
// restart, long polls, the enqueue cap, rows written the way Deno writes them, and a
// subscription's in-flight bound.
#include "queue/queue.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "engine/limits.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/engine_sync.h"
#include "testutil/faulty_backend.h"
#include "testutil/queue_model.h"

namespace kvc::queue {
namespace {
namespace fs = std::filesystem;
using testutil::QueueModel;

constexpr int64_t kStartMs = 1700000000000;

// Every published group; the ids the engine gave enqueued payloads.
class Recorder : public engine::CommitListener {
 public:
  void OnCommit(const storage::CommitGroup& g) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const storage::CommitRecord& r : g.records) {
      for (const storage::QueueRow& q : r.enqueues) ids_[q.payload] = q.id;
    }
    groups_.push_back(g);
  }
  std::string IdOf(const std::string& payload) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ids_.find(payload);
    return it == ids_.end() ? std::string() : it->second;
  }
  std::vector<storage::CommitGroup> groups() {
    std::lock_guard<std::mutex> lock(mu_);
    return groups_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> ids_;
  std::vector<storage::CommitGroup> groups_;
};

// Calls `start` with a completion callback and waits (bounded) for its result.
template <typename T, typename F>
Result<T> Await(F start) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  auto f = p->get_future();
  start([p](Result<T> r) { p->set_value(std::move(r)); });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Internal("timed out waiting for the queue");
  }
  return f.get();
}

struct Msg {
  std::string payload;
  int64_t delay_ms = 0;
  std::optional<std::vector<uint32_t>> schedule;  // nullopt: the default
  std::vector<std::string> keys;
};

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-queue-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    Close();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Path() const { return (dir_ / "db.sqlite3").string(); }

  void Open(QueueOptions qo = {}, std::shared_ptr<testutil::FaultPlan> plan = nullptr) {
    auto b = storage::SqliteBackend::Open(Path(), {});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    std::unique_ptr<storage::Backend> backend = std::move(*b);
    if (plan) backend = std::make_unique<testutil::FaultyBackend>(std::move(backend), plan);
    engine::EngineOptions eo;
    eo.clock = &clock_;
    eo.task_factories = {Queue::Factory(qo)};
    auto e = engine::Engine::Open(std::move(backend), eo);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
    queue_ = Queue::QueueFor(*engine_);
    ASSERT_NE(queue_, nullptr);
    rec_ = std::make_shared<Recorder>();
    engine_->AddListener(rec_);
  }
  void Close() {
    queue_.reset();
    if (engine_) engine_->Shutdown();
    engine_.reset();
  }

  // Enqueues `msgs` in one atomic write; returns their ids.
  std::vector<std::string> Enqueue(const std::vector<Msg>& msgs) {
    AtomicWrite w;
    for (const Msg& m : msgs) {
      kvc::Enqueue e;
      e.payload = m.payload;
      e.deadline_ms = clock_.NowMs() + m.delay_ms;
      if (m.schedule) {
        e.backoff_schedule = *m.schedule;
        e.backoff_given = true;
      }
      e.keys_if_undelivered = m.keys;
      w.enqueues.push_back(std::move(e));
    }
    auto r = testutil::WriteSync(*engine_, std::move(w));
    EXPECT_TRUE(r.ok() && r->ok) << r.status().ToString();
    std::vector<std::string> ids;
    for (const Msg& m : msgs) {
      ids.push_back(rec_->IdOf(m.payload));
      EXPECT_FALSE(ids.back().empty()) << m.payload;
    }
    return ids;
  }
  std::string Enqueue1(const Msg& m) { return Enqueue({m})[0]; }

  Result<std::vector<Delivery>> Pull(size_t max = 1, int64_t visibility_ms = 0) {
    PullRequest r;
    r.max_messages = max;
    r.visibility_ms = visibility_ms;
    r.wait_ms = 0;
    return Await<std::vector<Delivery>>([&](auto done) { queue_->Pull(r, std::move(done)); });
  }
  Result<std::vector<SettleResult>> Settle(SettleRequest r) {
    return Await<std::vector<SettleResult>>(
        [&](auto done) { queue_->Settle(std::move(r), std::move(done)); });
  }
  SettleStatus SettleOne(SettleKind kind, const std::string& lease, int64_t visibility_ms = 0,
                         std::optional<int64_t> delay = std::nullopt, std::string error = "") {
    SettleRequest r;
    r.kind = kind;
    r.leases = {lease};
    r.visibility_ms = visibility_ms;
    r.delay_ms = delay;
    r.error = std::move(error);
    auto res = Settle(std::move(r));
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    if (!res.ok() || res->size() != 1) return SettleStatus::kStale;
    return (*res)[0].status;
  }
  Result<QueueCounts> Counts() {
    return Await<QueueCounts>([&](auto done) { queue_->Counts(std::move(done)); });
  }
  Result<std::vector<DeadLetter>> Dead() {
    return Await<std::vector<DeadLetter>>(
        [&](auto done) { queue_->ListDead("", 100000, std::move(done)); });
  }
  // Every live row whose key starts with `prefix`, in pages the engine allows.
  std::vector<Entry> Scan(const std::string& prefix) {
    std::vector<Entry> out;
    ReadRange r;
    r.start = prefix;
    r.end = prefix + "\xff";
    r.limit = static_cast<int32_t>(engine_->limits().max_read_entries);
    while (true) {
      auto res = testutil::ReadSync(*engine_, {r});
      EXPECT_TRUE(res.ok()) << res.status().ToString();
      if (!res.ok()) return out;
      const std::vector<Entry>& page = res->ranges[0];
      out.insert(out.end(), page.begin(), page.end());
      if (page.size() < static_cast<size_t>(r.limit)) return out;
      r.start = page.back().key + std::string(1, '\0');
    }
  }
  // A point read of `key` (may be answered from the engine's read cache): its value, if any.
  std::optional<std::string> Get(const std::string& key) {
    ReadRange r;
    r.start = key;
    r.end = key + std::string(1, '\0');
    r.limit = 1;
    auto res = testutil::ReadSync(*engine_, {r});
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    if (!res.ok() || res->ranges[0].empty()) return std::nullopt;
    return res->ranges[0][0].value;
  }
  // Moves the clock and lets the writer see it (the next queue call runs after that).
  void Advance(int64_t ms) {
    clock_.Advance(ms);
    engine_->WakeWriter();
  }
  // Runs `sql` on the database file with a connection of its own.
  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << sql;
    sqlite3_free(err);
    sqlite3_close(db);
  }
  // The first column of the first row of `sql`, as text ("" if none).
  std::string SqlText(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(Path().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  fs::path dir_;
  ManualClock clock_{kStartMs};
  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<Queue> queue_;
  std::shared_ptr<Recorder> rec_;
};

std::string StatusName(SettleStatus s) { return SettleStatusName(s); }
std::string OutcomeName(QueueModel::Outcome o) {
  switch (o) {
    case QueueModel::Outcome::kOk:
      return "ok";
    case QueueModel::Outcome::kStale:
      return "stale";
    case QueueModel::Outcome::kDead:
      return "dead";
  }
  return "?";
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Random operations on the engine and on QueueModel; every answer and, after every step, the
// counts, the dead letters and the keys_if_undelivered rows must agree.
TEST_F(QueueTest, DifferentialAgainstModel) {
  uint64_t seed = 0;
  for (unsigned char c : RandomBytes(8)) seed = (seed << 8) | c;
  seed = EnvOr("KVC_QUEUE_SEED", seed);
  const uint64_t steps = EnvOr("KVC_QUEUE_STEPS", 3000);
  std::printf("queue differential: seed %llu (KVC_QUEUE_SEED), %llu steps (KVC_QUEUE_STEPS)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(steps));
  SCOPED_TRACE("KVC_QUEUE_SEED=" + std::to_string(seed));
  const auto started = std::chrono::steady_clock::now();

  QueueOptions qo;
  qo.min_visibility_ms = 1;
  qo.dead_letter_retention_ms = 10LL * 365 * 24 * 3600 * 1000;  // no pruning in this test
  Open(qo);
  std::mt19937_64 rng(seed);
  auto rnd = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  QueueModel model(engine::kDefaultBackoffSchedule);
  std::vector<std::string> history;  // every lease token handed out
  std::set<std::string> seen_leases;
  int64_t next_payload = 0;
  struct {
    int64_t enqueued = 0, deliveries = 0, redeliveries = 0, ok = 0, stale = 0, dead = 0,
            empty_pulls = 0, requeued = 0, purged = 0;
  } n;

  auto pick_leases = [&]() {
    std::vector<std::string> out;
    const size_t k = 1 + rnd(3);
    const std::vector<std::string> current = model.Leases();
    for (size_t i = 0; i < k; ++i) {
      const uint64_t r = rnd(10);
      if (r < 6 && !current.empty()) {
        out.push_back(current[rnd(current.size())]);
      } else if (r < 9 && !history.empty()) {
        out.push_back(history[rnd(history.size())]);
      } else if (!history.empty() && r == 9) {  // a known id with a guessed secret
        const std::string& h = history[rnd(history.size())];
        out.push_back(h.substr(0, h.rfind('.') + 1) + HexEncode(RandomBytes(16)));
      } else {
        out.push_back("not-a-lease");
      }
    }
    return out;
  };

  for (uint64_t step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const int64_t now = clock_.NowMs();
    const uint64_t op = rnd(100);
    if (op < 22) {  // enqueue 1..3 messages in one write
      std::vector<Msg> msgs(1 + rnd(3));
      for (Msg& m : msgs) {
        m.payload = "payload-" + std::to_string(next_payload++);
        m.delay_ms = rnd(3) == 0 ? static_cast<int64_t>(rnd(2000)) : 0;
        const uint64_t s = rnd(20);
        if (s < 4) {
          m.schedule = std::nullopt;  // Deno's default
        } else if (s < 8) {
          m.schedule = std::vector<uint32_t>{};  // no retries
        } else {
          static const uint32_t kSteps[] = {0, 1, 10, 100, 250, 1000};
          std::vector<uint32_t> sch(1 + rnd(3));
          for (uint32_t& x : sch) x = kSteps[rnd(6)];
          m.schedule = sch;
        }
        for (uint64_t j = rnd(3); j > 0; --j) {
          m.keys.push_back("kiu/" + m.payload + "/" + std::to_string(j));
        }
      }
      const std::vector<std::string> ids = Enqueue(msgs);
      ASSERT_FALSE(HasFailure());
      for (size_t i = 0; i < msgs.size(); ++i) {
        model.Enqueue(ids[i], msgs[i].payload, now + msgs[i].delay_ms,
                      msgs[i].schedule.value_or(engine::kDefaultBackoffSchedule), msgs[i].keys);
      }
      n.enqueued += static_cast<int64_t>(msgs.size());
    } else if (op < 45) {  // 1..2 pulls, answered in the order they were made
      static const int64_t kVis[] = {1, 5, 100, 1000, 5000};
      std::vector<PullRequest> reqs(1 + rnd(2));
      std::vector<std::future<Result<std::vector<Delivery>>>> futures;
      for (PullRequest& r : reqs) {
        r.max_messages = 1 + rnd(4);
        r.visibility_ms = kVis[rnd(5)];
        auto p = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
        futures.push_back(p->get_future());
        queue_->Pull(r, [p](Result<std::vector<Delivery>> d) { p->set_value(std::move(d)); });
      }
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_EQ(futures[i].wait_for(std::chrono::seconds(10)), std::future_status::ready);
        Result<std::vector<Delivery>> got = futures[i].get();
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const std::vector<QueueModel::Expected> want =
            model.Pull(now, reqs[i].max_messages, reqs[i].visibility_ms);
        ASSERT_EQ(got->size(), want.size()) << "pull " << i << " of " << reqs.size();
        if (want.empty()) ++n.empty_pulls;
        for (size_t j = 0; j < want.size(); ++j) {
          const Delivery& d = (*got)[j];
          EXPECT_EQ(d.id, want[j].id) << j;
          EXPECT_EQ(d.payload, want[j].payload) << j;
          EXPECT_EQ(d.attempt, want[j].attempt) << j;
          EXPECT_EQ(d.lease_expires_ms, want[j].lease_expires) << j;
          EXPECT_TRUE(seen_leases.insert(d.lease).second) << "a lease token came twice";
          ASSERT_FALSE(HasFailure());
          model.SetLease(d.id, d.lease);
          history.push_back(d.lease);
          ++n.deliveries;
          if (d.attempt > 1) ++n.redeliveries;
        }
      }
    } else if (op < 70) {  // ack | nack | extend with current, stale and forged leases
      SettleRequest r;
      const uint64_t kind = rnd(3);
      r.kind = kind == 0 ? SettleKind::kAck : kind == 1 ? SettleKind::kNack : SettleKind::kExtend;
      r.leases = pick_leases();
      if (r.kind == SettleKind::kNack) {
        if (rnd(3) == 0) r.delay_ms = static_cast<int64_t>(rnd(3000));
        if (rnd(2) == 0) r.error = "failed at step " + std::to_string(step);
      }
      if (r.kind == SettleKind::kExtend) {
        static const int64_t kVis[] = {1, 50, 1000, 5000};
        r.visibility_ms = kVis[rnd(4)];
      }
      const SettleRequest sent = r;
      auto res = Settle(std::move(r));
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      ASSERT_EQ(res->size(), sent.leases.size());
      for (size_t i = 0; i < sent.leases.size(); ++i) {
        const std::string& lease = sent.leases[i];
        int64_t expires = 0;
        QueueModel::Outcome want = QueueModel::Outcome::kStale;
        switch (sent.kind) {
          case SettleKind::kAck:
            want = model.Ack(now, lease);
            break;
          case SettleKind::kNack:
            want = model.Nack(now, lease, sent.delay_ms, sent.error);
            break;
          case SettleKind::kExtend:
            want = model.Extend(now, lease, sent.visibility_ms, &expires);
            break;
        }
        const SettleResult& got = (*res)[i];
        EXPECT_EQ(got.lease, lease);
        ASSERT_EQ(StatusName(got.status), OutcomeName(want))
            << "settle kind " << static_cast<int>(sent.kind) << " lease " << i;
        if (sent.kind == SettleKind::kExtend && want == QueueModel::Outcome::kOk) {
          EXPECT_EQ(got.lease_expires_ms, expires);
        }
        (want == QueueModel::Outcome::kStale ? n.stale : n.ok)++;
      }
    } else if (op < 95) {  // the clock moves: to the next event, just before it, or anywhere
      const std::optional<int64_t> next = model.NextEvent(now);
      const uint64_t how = rnd(4);
      int64_t by = 1 + static_cast<int64_t>(rnd(50));
      if (next && how == 0) by = *next - now;
      if (next && how == 1 && *next - now > 1) by = *next - now - 1;
      if (how == 3) by = static_cast<int64_t>(rnd(6000));
      Advance(by);
    } else if (op < 98) {  // requeue or purge dead letters (some of them, or all)
      std::vector<std::string> ids;
      for (const auto& [id, d] : model.dead()) {
        if (rnd(2) == 0) ids.push_back(id);
      }
      const bool all = rnd(4) == 0;
      std::vector<std::string> model_ids = ids;
      if (all) {
        model_ids.clear();
        for (const auto& [id, d] : model.dead()) model_ids.push_back(id);
        ids.clear();
      }
      if (ids.empty() && !all) continue;
      const bool requeue = rnd(2) == 0;
      auto res = Await<int64_t>([&](auto done) {
        if (requeue) {
          queue_->RequeueDead(ids, all, std::move(done));
        } else {
          queue_->PurgeDead(ids, all, std::move(done));
        }
      });
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      const int64_t want =
          requeue ? model.RequeueDead(now, model_ids) : model.PurgeDead(now, model_ids);
      ASSERT_EQ(*res, want);
      (requeue ? n.requeued : n.purged) += want;
    } else {  // a plain write: no queue effect
      AtomicWrite w;
      w.mutations.push_back(testutil::Set("other/" + std::to_string(step), "x"));
      ASSERT_TRUE(testutil::WriteSync(*engine_, std::move(w)).ok());
    }

    // The whole state, after every step.
    const int64_t at = clock_.NowMs();
    auto counts = Counts();
    ASSERT_TRUE(counts.ok()) << counts.status().ToString();
    const QueueModel::Counts want = model.CountsAt(at);
    ASSERT_EQ(counts->ready, want.ready);
    ASSERT_EQ(counts->delayed, want.delayed);
    ASSERT_EQ(counts->leased, want.leased);
    ASSERT_EQ(counts->dead, want.dead);
    ASSERT_EQ(queue_->undelivered(), model.undelivered());
    ASSERT_EQ(queue_->dead_letters(), want.dead);  // kvconnect_queue_dead_letters
    auto dead = Dead();
    ASSERT_TRUE(dead.ok()) << dead.status().ToString();
    ASSERT_EQ(dead->size(), model.dead().size());
    for (const DeadLetter& d : *dead) {
      auto it = model.dead().find(d.id);
      ASSERT_NE(it, model.dead().end()) << d.id;
      EXPECT_EQ(d.payload, it->second.payload);
      EXPECT_EQ(d.keys_if_undelivered, it->second.keys);
      EXPECT_EQ(d.attempts, it->second.attempts);
      EXPECT_EQ(d.last_error, it->second.last_error);
      EXPECT_EQ(d.dead_at_ms, it->second.dead_at);
    }
    const std::vector<Entry> kiu = Scan("kiu/");
    ASSERT_EQ(kiu.size(), model.kv().size());
    for (const Entry& e : kiu) {
      auto it = model.kv().find(e.key);
      ASSERT_NE(it, model.kv().end()) << e.key;
      EXPECT_EQ(e.value, it->second) << e.key;
      EXPECT_EQ(e.encoding, ValueEncoding::kV8) << e.key;
    }
    ASSERT_FALSE(HasFailure());
  }
  n.dead = model.dead_total();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf(
      "queue differential: %llu steps in %.2f s, clock +%lld ms: %lld enqueued, %lld "
      "deliveries (%lld redeliveries), %lld empty pulls, settles %lld ok / %lld stale, %lld dead "
      "letters, %lld requeued, %lld purged\n",
      static_cast<unsigned long long>(steps), secs,
      static_cast<long long>(clock_.NowMs() - kStartMs), static_cast<long long>(n.enqueued),
      static_cast<long long>(n.deliveries), static_cast<long long>(n.redeliveries),
      static_cast<long long>(n.empty_pulls), static_cast<long long>(n.ok),
      static_cast<long long>(n.stale), static_cast<long long>(n.dead),
      static_cast<long long>(n.requeued), static_cast<long long>(n.purged));
  // The run must have exercised what it claims to.
  EXPECT_GT(n.deliveries, 0);
  EXPECT_GT(n.redeliveries, 0);
  EXPECT_GT(n.stale, 0);
  EXPECT_GT(n.dead, 0);
}

// [100, 1000, 5000]: redelivered exactly one step after each nack, never a millisecond
// before; after the last, the keys and the dead letter appear in one commit.
TEST_F(QueueTest, ExactBackoffScheduleThenDeadLetterInOneCommit) {
  Open();
  const std::vector<std::string> keys = {"dl/a", "dl/b", "dl/c"};
  std::mutex mu;
  std::vector<std::vector<engine::WatchHub::Change>> watched;
  auto watch = engine_->Subscribe(keys, {[&](const std::vector<engine::WatchHub::Change>& c) {
                                           std::lock_guard<std::mutex> lock(mu);
                                           watched.push_back(c);
                                         },
                                         nullptr});
  const std::string id = Enqueue1({"the payload", 0, std::vector<uint32_t>{100, 1000, 5000}, keys});
  auto d = Pull(1, 30000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].id, id);
  EXPECT_EQ((*d)[0].attempt, 1);
  std::string lease = (*d)[0].lease;
  int32_t attempt = 1;
  for (int64_t step : {100, 1000, 5000}) {
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_EQ(SettleOne(SettleKind::kNack, lease, 0, std::nullopt, "boom"), SettleStatus::kOk);
    auto c = Counts();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->delayed, 1);
    Advance(step - 1);
    auto early = Pull(1, 30000);
    ASSERT_TRUE(early.ok());
    EXPECT_TRUE(early->empty()) << "redelivered 1 ms before its backoff step ended";
    Advance(1);
    auto again = Pull(1, 30000);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(again->size(), 1u);
    EXPECT_EQ((*again)[0].id, id);
    EXPECT_EQ((*again)[0].attempt, ++attempt);
    lease = (*again)[0].lease;
  }
  EXPECT_TRUE(Scan("dl/").empty());
  // Point reads, twice: the read cache now knows these keys as absent.
  for (int i = 0; i < 2; ++i) {
    for (const std::string& k : keys) EXPECT_FALSE(Get(k).has_value()) << k;
  }
  const size_t groups_before = rec_->groups().size();
  ASSERT_EQ(SettleOne(SettleKind::kNack, lease, 0, std::nullopt, "boom 4"), SettleStatus::kDead);

  // The dead letter.
  auto dead = Dead();
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, id);
  EXPECT_EQ((*dead)[0].attempts, 4);
  EXPECT_EQ((*dead)[0].last_error, "boom 4");
  EXPECT_EQ((*dead)[0].keys_if_undelivered, keys);
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ready + c->delayed + c->leased, 0);
  EXPECT_EQ(c->dead, 1);
  EXPECT_EQ(queue_->undelivered(), 0);
  // The keys: the payload, V8, one version.
  const std::vector<Entry> rows = Scan("dl/");
  ASSERT_EQ(rows.size(), 3u);
  for (const Entry& e : rows) {
    EXPECT_EQ(e.value, "the payload");
    EXPECT_EQ(e.encoding, ValueEncoding::kV8);
    EXPECT_EQ(e.version, rows[0].version);
  }
  EXPECT_EQ(engine_->committed_version(), rows[0].version);
  for (const std::string& k : keys) EXPECT_EQ(Get(k), "the payload") << "stale cache: " << k;
  // One published commit holds all three keys; nothing else of the queue was published.
  const std::vector<storage::CommitGroup> groups = rec_->groups();
  ASSERT_EQ(groups.size(), groups_before + 1);
  const storage::CommitGroup& g = groups.back();
  EXPECT_EQ(g.origin, storage::CommitOrigin::kQueue);
  ASSERT_EQ(g.records.size(), 1u);
  EXPECT_EQ(g.records[0].version, rows[0].version);
  std::set<std::string> changed;
  for (const auto& ch : g.records[0].changes) changed.insert(ch.key);
  EXPECT_EQ(changed, std::set<std::string>(keys.begin(), keys.end()));
  // Watchers saw one notification with all three keys at that version.
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(watched.size(), 1u);
  ASSERT_EQ(watched[0].size(), 3u);
  for (const auto& ch : watched[0]) {
    EXPECT_EQ(ch.version, rows[0].version);
    ASSERT_TRUE(ch.row.has_value());
    EXPECT_EQ(ch.row->value, "the payload");
  }
}

// A lease is current until its deadline (exclusive); once the message was redelivered, the
// old token settles nothing and the new one does.
TEST_F(QueueTest, StaleLeaseCannotSettle) {
  Open();
  const std::string id = Enqueue1({"m", 0, std::vector<uint32_t>{0, 0}, {}});
  auto first = Pull(1, 1000);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const std::string a = (*first)[0].lease;
  EXPECT_EQ((*first)[0].lease_expires_ms, kStartMs + 1000);
  Advance(999);
  SettleRequest ext;
  ext.kind = SettleKind::kExtend;
  ext.leases = {a};
  ext.visibility_ms = 1000;
  auto er = Settle(ext);
  ASSERT_TRUE(er.ok());
  EXPECT_EQ((*er)[0].status, SettleStatus::kOk);
  EXPECT_EQ((*er)[0].lease_expires_ms, kStartMs + 1999);
  Advance(999);
  EXPECT_TRUE(Pull(1, 1000)->empty()) << "redelivered while its extended lease held";
  Advance(1);  // the deadline: expired, requeued after a 0 ms step
  auto second = Pull(1, 1000);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].id, id);
  EXPECT_EQ((*second)[0].attempt, 2);
  const std::string b = (*second)[0].lease;
  EXPECT_NE(a, b);
  EXPECT_EQ(SettleOne(SettleKind::kAck, a), SettleStatus::kStale);
  EXPECT_EQ(SettleOne(SettleKind::kNack, a), SettleStatus::kStale);
  EXPECT_EQ(SettleOne(SettleKind::kExtend, a, 5000), SettleStatus::kStale);
  // The message was left alone by the stale settles.
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased, 1);
  EXPECT_EQ(SettleOne(SettleKind::kExtend, b, 5000), SettleStatus::kOk);
  EXPECT_EQ(SettleOne(SettleKind::kAck, b), SettleStatus::kOk);
  EXPECT_EQ(SettleOne(SettleKind::kAck, b), SettleStatus::kStale);
  c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ready + c->delayed + c->leased + c->dead, 0);
}

// Past its deadline a lease is stale even when the run that expires leases has more of them
// than it may take in one transaction (max_transitions_per_run).
TEST_F(QueueTest, ExpiredLeaseIsStaleWhileExpiriesAreBacklogged) {
  QueueOptions qo;
  qo.max_transitions_per_run = 2;
  Open(qo);
  Enqueue({{"a", 0, std::vector<uint32_t>{0}, {}},
           {"b", 0, std::vector<uint32_t>{0}, {}},
           {"c", 0, std::vector<uint32_t>{0}, {}}});
  auto d = Pull(2, 1000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  auto last = Pull(1, 1000);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  // Same deadline for all three; the one with the largest id is expired last.
  std::vector<Delivery> all = *d;
  all.push_back((*last)[0]);
  std::sort(all.begin(), all.end(),
            [](const Delivery& x, const Delivery& y) { return x.id < y.id; });
  Advance(1000);
  EXPECT_EQ(SettleOne(SettleKind::kAck, all[2].lease), SettleStatus::kStale);
  EXPECT_EQ(SettleOne(SettleKind::kExtend, all[2].lease, 5000), SettleStatus::kStale);
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased, 0);
  EXPECT_EQ(c->ready, 3);
}

// A transaction that fails at the dead-letter step leaves nothing of it: no keys, no dead
// letter, the message still leased; after reopening too. Then the transition happens whole.
TEST_F(QueueTest, DeadLetterIsAtomicUnderStorageFaults) {
  struct Case {
    const char* name;
    testutil::WriterOp op;
    testutil::FaultKind kind;
  };
  for (const Case& fc :
       {Case{"QueueAddDead fails", testutil::WriterOp::kQueueAddDead, testutil::FaultKind::kError},
        Case{"the second key's Put fails", testutil::WriterOp::kPut, testutil::FaultKind::kError},
        Case{"Commit loses the transaction", testutil::WriterOp::kCommit,
             testutil::FaultKind::kCommitLost}}) {
    SCOPED_TRACE(fc.name);
    auto plan = std::make_shared<testutil::FaultPlan>();
    Open({}, plan);
    const std::string payload = std::string("atomic ") + fc.name;
    const std::string id = Enqueue1({payload, 0, std::vector<uint32_t>{}, {"ak/1", "ak/2"}});
    auto d = Pull(1, 5000);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->size(), 1u);
    // The second key's Put (the first went in), or the named call.
    plan->FailNthOp(fc.op, fc.op == testutil::WriterOp::kPut ? 2 : 1, fc.kind);
    SettleRequest nack;
    nack.kind = SettleKind::kNack;
    nack.leases = {(*d)[0].lease};
    auto r = Settle(nack);
    EXPECT_FALSE(r.ok()) << "the failed transition was answered as done";
    EXPECT_EQ(plan->fired(), 1);
    if (fc.kind != testutil::FaultKind::kCommitLost) {
      // The engine keeps going: nothing of the transition is visible.
      EXPECT_TRUE(engine_->writable());
      EXPECT_TRUE(Scan("ak/").empty());
      auto c = Counts();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_EQ(c->leased, 1);
      EXPECT_EQ(c->dead, 0);
    } else {
      EXPECT_FALSE(engine_->writable());
    }
    Close();
    Open();
    EXPECT_TRUE(Scan("ak/").empty());
    auto dead = Dead();
    ASSERT_TRUE(dead.ok());
    EXPECT_TRUE(dead->empty());
    auto c = Counts();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->leased, 1);
    // The lease still holds after the restart; once it expires the transition happens whole.
    EXPECT_EQ(SettleOne(SettleKind::kExtend, (*d)[0].lease, 1000), SettleStatus::kOk);
    Advance(1000);
    c = Counts();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->leased, 0);
    EXPECT_EQ(c->dead, 1);
    const std::vector<Entry> rows = Scan("ak/");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].value, payload);
    EXPECT_EQ(rows[0].version, rows[1].version);
    dead = Dead();
    ASSERT_TRUE(dead.ok());
    ASSERT_EQ(dead->size(), 1u);
    EXPECT_EQ((*dead)[0].id, id);
    EXPECT_EQ(queue_->dead_letters(), 1);
    // Reopened, the queue counts the dead letter it finds on storage.
    Close();
    Open();
    ASSERT_TRUE(Counts().ok());
    EXPECT_EQ(queue_->dead_letters(), 1);
    Close();
    fs::remove(Path());
    fs::remove(Path() + "-wal");
    fs::remove(Path() + "-shm");
  }
}

// A commit whose fsync failed after the data reached the file: the caller hears of a failure,
// yet after reopening the transition is there, whole (keys and dead letter together).
TEST_F(QueueTest, DeadLetterKeptByAFailedFsyncIsWhole) {
  auto plan = std::make_shared<testutil::FaultPlan>();
  Open({}, plan);
  const std::string id = Enqueue1({"kept", 0, std::vector<uint32_t>{}, {"kk/1", "kk/2"}});
  auto d = Pull(1, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  plan->FailNextOp(testutil::WriterOp::kCommit, testutil::FaultKind::kCommitKept);
  SettleRequest nack;
  nack.kind = SettleKind::kNack;
  nack.leases = {(*d)[0].lease};
  EXPECT_FALSE(Settle(nack).ok());
  EXPECT_FALSE(engine_->writable());
  Close();
  Open();
  const std::vector<Entry> rows = Scan("kk/");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].version, rows[1].version);
  auto dead = Dead();
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, id);
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased + c->ready + c->delayed, 0);
  EXPECT_EQ(SettleOne(SettleKind::kAck, (*d)[0].lease), SettleStatus::kStale);
}

// Leases, acks and dead letters are durable: a leased message survives a restart and is
// redelivered after its deadline, an acked one stays gone, a dead letter stays.
TEST_F(QueueTest, StateSurvivesRestart) {
  Open();
  const auto ids = Enqueue({{"leased", 0, std::vector<uint32_t>{0}, {}},
                            {"acked", 0, std::nullopt, {}},
                            {"dead", 0, std::vector<uint32_t>{}, {"rk/dead"}}});
  auto d = Pull(3, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 3u);
  std::map<std::string, std::string> lease;
  for (const Delivery& x : *d) lease[x.payload] = x.lease;
  EXPECT_EQ(SettleOne(SettleKind::kAck, lease["acked"]), SettleStatus::kOk);
  EXPECT_EQ(SettleOne(SettleKind::kNack, lease["dead"]), SettleStatus::kDead);
  Close();
  Open();
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ready, 0);
  EXPECT_EQ(c->delayed, 0);
  EXPECT_EQ(c->leased, 1);
  EXPECT_EQ(c->dead, 1);
  EXPECT_EQ(queue_->undelivered(), 1);
  EXPECT_TRUE(Pull(3, 5000)->empty());
  Advance(4999);
  EXPECT_TRUE(Pull(3, 5000)->empty());
  Advance(1);
  auto again = Pull(3, 5000);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].payload, "leased");
  EXPECT_EQ((*again)[0].id, ids[0]);
  EXPECT_EQ((*again)[0].attempt, 2);
  EXPECT_EQ(SettleOne(SettleKind::kAck, lease["leased"]), SettleStatus::kStale);
  auto dead = Dead();
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, ids[2]);
  EXPECT_EQ((*dead)[0].payload, "dead");
  const std::vector<Entry> rows = Scan("rk/");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].value, "dead");
}

// A waiting pull is answered by the commit of an enqueue (the clock standing still), by a
// delayed message becoming due, or empty when its wait is over.
TEST_F(QueueTest, LongPollAnsweredByEnqueueOrDeadline) {
  Open();
  auto pull_async = [&](int64_t wait) {
    auto p = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
    PullRequest r;
    r.max_messages = 5;
    r.wait_ms = wait;
    queue_->Pull(r, [p](Result<std::vector<Delivery>> d) { p->set_value(std::move(d)); });
    return p->get_future();
  };
  auto settled = [](std::future<Result<std::vector<Delivery>>>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  // 1. An enqueue answers it.
  auto f = pull_async(5000);
  ASSERT_TRUE(Counts().ok());  // a queue run happened since the pull arrived
  EXPECT_FALSE(settled(f));
  Enqueue1({"now", 0, std::nullopt, {}});
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto got = f.get();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].payload, "now");
  EXPECT_EQ(clock_.NowMs(), kStartMs);
  // 2. A delayed message answers it when due.
  f = pull_async(5000);
  Enqueue1({"later", 2000, std::nullopt, {}});
  ASSERT_TRUE(Counts().ok());
  EXPECT_FALSE(settled(f));
  Advance(1999);
  ASSERT_TRUE(Counts().ok());
  EXPECT_FALSE(settled(f));
  Advance(1);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  got = f.get();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].payload, "later");
  // 3. Nothing comes: empty at the deadline, not before.
  f = pull_async(3000);
  ASSERT_TRUE(Counts().ok());
  Advance(2999);
  ASSERT_TRUE(Counts().ok());
  EXPECT_FALSE(settled(f));
  Advance(1);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  got = f.get();
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

// A waiting pull is answered (Unavailable) when the engine shuts down, not left hanging.
TEST_F(QueueTest, ShutdownAnswersWaitingPull) {
  Open();
  auto p = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto f = p->get_future();
  PullRequest r;
  r.wait_ms = 10000;
  queue_->Pull(r, [p](Result<std::vector<Delivery>> d) { p->set_value(std::move(d)); });
  ASSERT_TRUE(Counts().ok());
  auto q = queue_;
  Close();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto got = f.get();
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  // The Queue outlives its engine safely: requests are refused.
  auto late = Await<std::vector<Delivery>>([&](auto done) { q->Pull({}, std::move(done)); });
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
}

// Dead letters are kept for dead_letter_retention_ms (pruned by the hourly housekeeping).
TEST_F(QueueTest, DeadLettersPrunedAfterRetention) {
  QueueOptions qo;
  qo.dead_letter_retention_ms = 2LL * 3600 * 1000;
  Open(qo);
  Enqueue1({"old", 0, std::vector<uint32_t>{}, {}});
  auto d = Pull();
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[0].lease), SettleStatus::kDead);
  Advance(qo.dead_letter_retention_ms);  // a housekeeping run; dead_at == now - retention: kept
  auto kept = Counts();
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->dead, 1);
  Advance(3600 * 1000);
  ASSERT_TRUE(Counts().ok());  // the housekeeping run
  auto dead = Dead();
  ASSERT_TRUE(dead.ok());
  EXPECT_TRUE(dead->empty());
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dead, 0);
}

// More than max_undelivered undelivered messages: refused; ack and dead letters make room.
TEST_F(QueueTest, EnqueueCap) {
  QueueOptions qo;
  qo.max_undelivered = 3;
  Open(qo);
  ASSERT_TRUE(Counts().ok());  // the first run has counted
  EXPECT_TRUE(queue_->AdmitEnqueue(3).ok());
  EXPECT_EQ(queue_->AdmitEnqueue(4).code(), StatusCode::kResourceExhausted);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(queue_->AdmitEnqueue(1).ok()) << i;
    Enqueue1({"m" + std::to_string(i), 0, std::vector<uint32_t>{}, {}});
  }
  Status refused = queue_->AdmitEnqueue(1);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("limit 3"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(queue_->AdmitEnqueue(0).ok());
  auto d = Pull(2, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ(queue_->AdmitEnqueue(1).code(), StatusCode::kResourceExhausted) << "leased counts";
  EXPECT_EQ(SettleOne(SettleKind::kAck, (*d)[0].lease), SettleStatus::kOk);
  EXPECT_TRUE(queue_->AdmitEnqueue(1).ok());
  EXPECT_EQ(queue_->AdmitEnqueue(2).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[1].lease), SettleStatus::kDead);
  EXPECT_TRUE(queue_->AdmitEnqueue(2).ok());
  EXPECT_EQ(queue_->AdmitEnqueue(3).code(), StatusCode::kResourceExhausted);
}

// Rows as Deno writes them (JSON text lists; "null" for a schedule it never had) are
// delivered; a message Deno leased and never finished is requeued with a step consumed.
TEST_F(QueueTest, DenoRowsInterop) {
  Open();  // creates the schema
  Close();
  const int64_t t = kStartMs;
  // x'ff0f' is not valid UTF-8 on purpose: payloads are bytes.
  Sql("insert into queue (ts, id, data, backoff_schedule, keys_if_undelivered) values (" +
      std::to_string(t - 10) +
      ", '00000000-0000-4000-8000-000000000001', x'ff0f01', 'null', '[[1,2,3]]');"
      "insert into queue (ts, id, data, backoff_schedule, keys_if_undelivered) values (" +
      std::to_string(t - 5) +
      ", '00000000-0000-4000-8000-000000000002', x'ff0f02', '[100,200]', '[]');"
      // Deno's lease (5 s), run out; no kvconnect state for it.
      "insert into queue_running (deadline, id, data, backoff_schedule, keys_if_undelivered) "
      "values (" +
      std::to_string(t - 1) +
      ", '00000000-0000-4000-8000-000000000003', x'ff0f03', '[300,400]', '[[9]]');");
  Open();
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ready, 2);
  EXPECT_EQ(c->delayed, 1) << "Deno's expired lease: due again after its first step";
  EXPECT_EQ(c->leased, 0);
  EXPECT_EQ(queue_->undelivered(), 3);
  EXPECT_EQ(SqlText("select backoff_schedule from queue where id like '%3'"), "[400]");
  auto d = Pull(5, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].id, "00000000-0000-4000-8000-000000000001");
  EXPECT_EQ((*d)[0].payload, std::string("\xff\x0f\x01", 3));
  EXPECT_EQ((*d)[0].attempt, 1);
  EXPECT_EQ((*d)[1].id, "00000000-0000-4000-8000-000000000002");
  EXPECT_EQ((*d)[1].payload, std::string("\xff\x0f\x02", 3));
  // In queue_running as Deno would read it.
  EXPECT_EQ(SqlText("select backoff_schedule from queue_running where id like '%2'"), "[100,200]");
  EXPECT_EQ(SqlText("select keys_if_undelivered from queue_running where id like '%1'"),
            "[[1,2,3]]");
  // "null": no retries; the payload goes to the key [1,2,3].
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[0].lease), SettleStatus::kDead);
  const std::vector<Entry> rows = Scan(std::string("\x01\x02\x03", 3));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, std::string("\x01\x02\x03", 3));
  EXPECT_EQ(rows[0].value, std::string("\xff\x0f\x01", 3));
  EXPECT_EQ(rows[0].encoding, ValueEncoding::kV8);
  // [100,200]: 100 then 200, then dead.
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[1].lease), SettleStatus::kOk);
  EXPECT_EQ(SqlText("select backoff_schedule from queue where id like '%2'"), "[200]");
  Advance(99);
  EXPECT_TRUE(Pull(5, 5000)->empty());
  Advance(1);  // t + 100
  d = Pull(5, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  EXPECT_EQ((*d)[0].attempt, 2);
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[0].lease), SettleStatus::kOk);
  // Deno's message, due at t + 300: delivered (its first kvconnect delivery).
  Advance(199);  // t + 299
  EXPECT_TRUE(Pull(5, 5000)->empty());
  Advance(1);  // t + 300: message 2 (due t + 300 too) and message 3
  d = Pull(5, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].id, "00000000-0000-4000-8000-000000000002");
  EXPECT_EQ((*d)[1].id, "00000000-0000-4000-8000-000000000003");
  EXPECT_EQ((*d)[1].payload, std::string("\xff\x0f\x03", 3));
  EXPECT_EQ((*d)[1].attempt, 1);
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[0].lease), SettleStatus::kDead);
  EXPECT_EQ(SettleOne(SettleKind::kNack, (*d)[1].lease), SettleStatus::kOk);  // 400 left
  auto dead = Dead();
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->size(), 2u);

  // A row another process adds while consumers wait is found by the periodic re-read.
  PullRequest r;
  r.max_messages = 5;
  r.wait_ms = 10000;
  auto p = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto f = p->get_future();
  Advance(400);  // message 3 due: take it first so the waiter sees only the foreign row
  d = Pull(5, 5000);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  queue_->Pull(r, [p](Result<std::vector<Delivery>> x) { p->set_value(std::move(x)); });
  ASSERT_TRUE(Counts().ok());
  Sql("insert into queue (ts, id, data, backoff_schedule, keys_if_undelivered) values (" +
      std::to_string(clock_.NowMs()) +
      ", '00000000-0000-4000-8000-000000000004', x'ff0f04', '[1]', '[]');");
  Advance(QueueOptions().foreign_poll_ms);
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto got = f.get();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "00000000-0000-4000-8000-000000000004");
}

// A consumer with max_in_flight = 2 never holds more than two unsettled deliveries; an ack
// or an expired lease frees a place.
class Sink : public ConsumerSink {
 public:
  void Deliver(Delivery d) override {
    std::lock_guard<std::mutex> lock(mu);
    outstanding.insert(d.lease);
    max_outstanding = std::max(max_outstanding, outstanding.size());
    all.push_back(std::move(d));
    cv.notify_all();
  }
  void Closed(const Status&) override {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    cv.notify_all();
  }
  bool WaitDeliveries(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return all.size() >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Delivery> all;
  std::set<std::string> outstanding;
  size_t max_outstanding = 0;
  bool closed = false;
};

TEST_F(QueueTest, SubscriptionHoldsAtMostMaxInFlight) {
  Open();
  std::vector<Msg> msgs;
  for (int i = 0; i < 6; ++i) {
    msgs.push_back({"s" + std::to_string(i), 0, std::vector<uint32_t>{0}, {}});
  }
  const std::vector<std::string> ids = Enqueue(msgs);
  // All due at once: delivered in id order.
  std::map<std::string, std::string> by_id;
  for (size_t i = 0; i < ids.size(); ++i) by_id[ids[i]] = msgs[i].payload;
  std::vector<std::string> order;
  for (const auto& [id, payload] : by_id) order.push_back(payload);
  auto sink = std::make_shared<Sink>();
  ConsumerOptions co;
  co.max_in_flight = 2;
  co.visibility_ms = 1000;
  auto sub = queue_->Subscribe(co, sink);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(sink->WaitDeliveries(2));
  // Quiet: more runs happen, nothing more is delivered.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Counts().ok());
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    EXPECT_EQ(sink->all.size(), 2u);
    EXPECT_EQ(sink->all[0].payload, order[0]);
    EXPECT_EQ(sink->all[1].payload, order[1]);
  }
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased, 2);
  // An ack frees one place; the settle callback runs before the next delivery, so the book
  // is kept there.
  auto ack = [&](const std::string& lease) {
    SettleRequest r;
    r.kind = SettleKind::kAck;
    r.leases = {lease};
    auto res = Await<std::vector<SettleResult>>([&](auto done) {
      queue_->Settle(r, [&, done = std::move(done)](Result<std::vector<SettleResult>> x) {
        if (x.ok() && (*x)[0].status == SettleStatus::kOk) {
          std::lock_guard<std::mutex> lock(sink->mu);
          sink->outstanding.erase(lease);
        }
        done(std::move(x));
      });
    });
    ASSERT_TRUE(res.ok());
    EXPECT_EQ((*res)[0].status, SettleStatus::kOk);
  };
  std::string first;
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    first = sink->all[0].lease;
  }
  ack(first);
  ASSERT_TRUE(sink->WaitDeliveries(3));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Counts().ok());
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    EXPECT_EQ(sink->all.size(), 3u);
    EXPECT_EQ(sink->all[2].payload, order[2]);
    EXPECT_EQ(sink->outstanding.size(), 2u);
    // Expiry frees both places (the consumer holds nothing it could settle in time).
    sink->outstanding.clear();
  }
  Advance(1000);
  ASSERT_TRUE(sink->WaitDeliveries(5));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Counts().ok());
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    EXPECT_EQ(sink->all.size(), 5u);
    EXPECT_LE(sink->max_outstanding, 2u);
    // The places went to the messages due longest, not to the two that just expired (due
    // again 0 ms after their expiry); every delivery has a lease of its own.
    EXPECT_EQ(sink->all[3].payload, order[3]);
    EXPECT_EQ(sink->all[4].payload, order[4]);
    EXPECT_EQ(sink->all[4].attempt, 1);
    std::set<std::string> leases;
    for (const Delivery& d : sink->all) leases.insert(d.lease);
    EXPECT_EQ(leases.size(), sink->all.size());
  }
  c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased, 2);
  // Ending the subscription stops deliveries; its leases just expire.
  sub->reset();
  Advance(1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Counts().ok());
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    EXPECT_EQ(sink->all.size(), 5u);
  }
  c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased, 0);
  EXPECT_EQ(c->ready, 5);
}

// Destroying a Subscription ends its consumer: its place among max_waiters is free again and
// nothing more is delivered to its sink.
TEST_F(QueueTest, EndedSubscriptionFreesItsPlace) {
  QueueOptions qo;
  qo.max_waiters = 1;
  Open(qo);
  auto sink = std::make_shared<Sink>();
  auto sub = queue_->Subscribe({}, sink);
  ASSERT_TRUE(sub.ok());
  auto refused = queue_->Subscribe({}, std::make_shared<Sink>());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  sub->reset();
  Enqueue1({"after", 0, std::nullopt, {}});
  ASSERT_TRUE(Counts().ok());
  {
    std::lock_guard<std::mutex> lock(sink->mu);
    EXPECT_TRUE(sink->all.empty()) << "delivered to an ended subscription";
  }
  auto again = queue_->Subscribe({}, std::make_shared<Sink>());
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  auto c = Counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->leased + c->ready, 1);
}

}  // namespace
}  // namespace kvc::queue
