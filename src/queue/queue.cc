#include "queue/queue.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "common/enum_names.h"
#include "common/mutex.h"
#include "common/random.h"
#include "engine/engine.h"

namespace kvc::queue {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kPruneEveryMs = 3600 * 1000;
constexpr int64_t kRecountEveryMs = 10 * 1000;
constexpr size_t kMaxSettleLeases = 100;
constexpr size_t kMaxErrorText = 1024;
// Deno's default when an enqueue names no schedule (requeued dead letters get it too).
const std::vector<uint32_t> kDefaultBackoff = {100, 1000, 5000, 30000, 60000};

Status Stopped() {
  return Unavailable("The queue is not being served here right now, try again later.");
}

// A lease token: the message id, a dot, 128 random bits. The id lets a settle find its message
// by primary key; the random part is what only the current holder knows.
std::string NewLease(const std::string& id) { return id + "." + HexEncode(RandomBytes(16)); }

std::string_view LeaseMessageId(std::string_view lease) {
  const size_t dot = lease.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : lease.substr(0, dot);
}

// A lease length as a request asks for it (0: the default). Errors: InvalidArgument outside the
// configured bounds.
Status ResolveVisibility(const QueueOptions& o, int64_t* visibility_ms) {
  if (*visibility_ms == 0) *visibility_ms = o.default_visibility_ms;
  if (*visibility_ms < o.min_visibility_ms || *visibility_ms > o.max_visibility_ms) {
    return InvalidArgument("visibility_timeout must be between " +
                           std::to_string(o.min_visibility_ms) + " and " +
                           std::to_string(o.max_visibility_ms) + " ms.");
  }
  return Status::Ok();
}

constexpr EnumName<SettleStatus> kSettleStatusNames[] = {
    {SettleStatus::kOk, "ok"},
    {SettleStatus::kStale, "stale"},
    {SettleStatus::kDead, "dead"},
};

}  // namespace

const char* SettleStatusName(SettleStatus s) { return NameIn(kSettleStatusNames, s, "stale"); }

struct Queue::State {
  struct Waiter {
    std::shared_ptr<const std::atomic<bool>> gone;
    size_t max = 1;
    int64_t visibility_ms = 0;
    int64_t deadline_ms = 0;
    PullCallback done;
    std::vector<Delivery> got;
  };
  struct Consumer {
    ConsumerOptions options;
    std::shared_ptr<ConsumerSink> sink;
    size_t in_flight = 0;
    bool closed = false;
  };
  struct SettleJob {
    SettleRequest request;
    SettleCallback done;
    std::vector<SettleResult> results;
  };
  // An admin operation: runs in the transaction, then `done` gets its status.
  struct Txn;
  struct AdminJob {
    std::function<Status(Txn&)> body;
    std::function<void(const Status&)> done;
  };
  // What one Run's transaction sees and produces.
  struct Txn {
    storage::Writer* w = nullptr;
    storage::QueueStore* q = nullptr;  // w's queue store (the engine refuses backends without)
    int64_t now = 0;
    int64_t version = 0;
    bool wrote = false;
    std::vector<storage::KeyChange> changes;
    int64_t undelivered_delta = 0;
    std::vector<std::string> freed_leases;  // settled or expired leases (consumer accounting)
    uint64_t expired = 0;                   // leases that ran out
    uint64_t dead = 0;                      // messages dead-lettered
    int64_t dead_removed = 0;               // dead letters requeued, purged or pruned
  };
  struct Round;  // one Run's work and outcome, below

  Mutex mu;
  engine::WriterTaskHost* host = nullptr;  // set in Bind, before any other call
  bool stopped KVC_GUARDED_BY(mu) = false;
  std::deque<Waiter> waiters KVC_GUARDED_BY(mu);
  std::vector<SettleJob> settles KVC_GUARDED_BY(mu);
  std::vector<AdminJob> admin KVC_GUARDED_BY(mu);
  std::map<uint64_t, std::shared_ptr<Consumer>> consumers KVC_GUARDED_BY(mu);
  std::unordered_map<std::string, std::shared_ptr<Consumer>> lease_owner KVC_GUARDED_BY(mu);
  uint64_t next_consumer_id KVC_GUARDED_BY(mu) = 1;
  int64_t earliest_ready KVC_GUARDED_BY(mu) = 0;  // 0 at start: look at once
  int64_t earliest_deadline KVC_GUARDED_BY(mu) = 0;
  int64_t next_poll KVC_GUARDED_BY(mu) = 0;
  int64_t next_prune KVC_GUARDED_BY(mu) = 0;
  int64_t next_recount KVC_GUARDED_BY(mu) = 0;
  std::atomic<int64_t> undelivered{0};
  std::atomic<int64_t> dead_letters{0};

  // Demand for deliveries right now. REQUIRES: mu.
  bool HasDemand() KVC_REQUIRES(mu) {
    if (!waiters.empty()) return true;
    for (const auto& [id, c] : consumers) {
      if (!c->closed && c->in_flight < c->options.max_in_flight) return true;
    }
    return false;
  }

  void Wake() {
    if (host) host->Wake();
  }

  // Queues an admin job for the next run (`look_again`: it may make messages ready), or
  // answers it Unavailable when stopped.
  void AddAdmin(AdminJob job, bool look_again) KVC_EXCLUDES(mu) {
    std::function<void(const Status&)> refuse;
    {
      MutexLock lock(mu);
      if (stopped) {
        refuse = std::move(job.done);
      } else {
        admin.push_back(std::move(job));
        if (look_again) earliest_ready = 0;
      }
    }
    if (refuse) {
      refuse(Stopped());
      return;
    }
    Wake();
  }

  // An admin job whose body fills a T, which `done` then gets (or the failure).
  template <typename T>
  void AddAdminFor(std::function<Status(Txn&, T*)> body, std::function<void(Result<T>)> done,
                   bool look_again) KVC_EXCLUDES(mu) {
    auto out = std::make_shared<T>();
    AdminJob job;
    job.body = [out, body = std::move(body)](Txn& t) { return body(t, out.get()); };
    job.done = [out, done = std::move(done)](const Status& s) {
      if (s.ok()) {
        done(std::move(*out));
      } else {
        done(s);
      }
    };
    AddAdmin(std::move(job), look_again);
  }
};

Queue::Queue(QueueOptions options) : options_(options), state_(std::make_shared<State>()) {}

Queue::~Queue() = default;

std::function<std::unique_ptr<engine::WriterTask>()> Queue::Factory(QueueOptions options) {
  return [options]() -> std::unique_ptr<engine::WriterTask> {
    return std::make_unique<Queue>(options);
  };
}

std::shared_ptr<Queue> Queue::QueueFor(engine::Engine& engine) {
  return std::dynamic_pointer_cast<Queue>(engine.FindTask("queue"));
}

void Queue::Bind(engine::WriterTaskHost* host) { state_->host = host; }

int64_t Queue::undelivered() const { return state_->undelivered.load(std::memory_order_relaxed); }

int64_t Queue::dead_letters() const { return state_->dead_letters.load(std::memory_order_relaxed); }

size_t Queue::consumers() const {
  MutexLock lock(state_->mu);
  return state_->waiters.size() + state_->consumers.size();
}

Status Queue::AdmitEnqueue(size_t n) const {
  if (n == 0) return Status::Ok();
  if (undelivered() + static_cast<int64_t>(n) > static_cast<int64_t>(options_.max_undelivered)) {
    return ResourceExhausted("Too many undelivered messages in the queue (limit " +
                             std::to_string(options_.max_undelivered) + "); try again later.");
  }
  return Status::Ok();
}

void Queue::Pull(PullRequest request, PullCallback done) {
  if (request.max_messages < 1 || request.max_messages > options_.max_pull_messages) {
    done(InvalidArgument("max_messages must be between 1 and " +
                         std::to_string(options_.max_pull_messages) + "."));
    return;
  }
  if (Status s = ResolveVisibility(options_, &request.visibility_ms); !s.ok()) {
    done(s);
    return;
  }
  if (request.wait_ms < 0 || request.wait_ms > options_.max_wait_ms) {
    done(InvalidArgument("wait must be between 0 and " + std::to_string(options_.max_wait_ms) +
                         " ms."));
    return;
  }
  State& st = *state_;
  Status refused;
  {
    MutexLock lock(st.mu);
    if (st.stopped) {
      refused = Stopped();
    } else if (st.waiters.size() + st.consumers.size() >= options_.max_waiters) {
      refused = Unavailable("Too many consumers are waiting on this queue, try again later.");
    } else {
      State::Waiter w;
      w.gone = std::move(request.gone);
      w.max = request.max_messages;
      w.visibility_ms = request.visibility_ms;
      w.deadline_ms = st.host->NowMs() + request.wait_ms;
      w.done = std::move(done);
      st.waiters.push_back(std::move(w));
    }
  }
  if (!refused.ok()) {
    done(refused);  // NOLINT(bugprone-use-after-move): moved only when `refused` is OK
    return;
  }
  st.Wake();
}

void Queue::Settle(SettleRequest request, SettleCallback done) {
  if (request.leases.empty() || request.leases.size() > kMaxSettleLeases) {
    done(InvalidArgument("leases must name between 1 and " + std::to_string(kMaxSettleLeases) +
                         " leases."));
    return;
  }
  if (request.kind == SettleKind::kExtend) {
    if (Status s = ResolveVisibility(options_, &request.visibility_ms); !s.ok()) {
      done(s);
      return;
    }
  }
  if (request.delay_ms &&
      (*request.delay_ms < 0 || *request.delay_ms > options_.max_visibility_ms)) {
    done(InvalidArgument("delay must be between 0 and " +
                         std::to_string(options_.max_visibility_ms) + " ms."));
    return;
  }
  if (request.error.size() > kMaxErrorText) request.error.resize(kMaxErrorText);
  State& st = *state_;
  Status refused;
  {
    MutexLock lock(st.mu);
    if (st.stopped) {
      refused = Stopped();
    } else {
      st.settles.push_back(State::SettleJob{std::move(request), std::move(done), {}});
    }
  }
  if (!refused.ok()) {
    done(refused);  // NOLINT(bugprone-use-after-move): moved only when `refused` is OK
    return;
  }
  st.Wake();
}

namespace {
class SubscriptionImpl : public Queue::Subscription {
 public:
  explicit SubscriptionImpl(std::function<void()> end) : end_(std::move(end)) {}
  ~SubscriptionImpl() override { end_(); }

 private:
  std::function<void()> end_;
};
}  // namespace

Result<std::unique_ptr<Queue::Subscription>> Queue::Subscribe(ConsumerOptions options,
                                                              std::shared_ptr<ConsumerSink> sink) {
  if (options.max_in_flight < 1 || options.max_in_flight > options_.max_in_flight_per_consumer) {
    return InvalidArgument("max_in_flight must be between 1 and " +
                           std::to_string(options_.max_in_flight_per_consumer) + ".");
  }
  if (options.visibility_ms == 0) options.visibility_ms = options_.default_visibility_ms;
  if (options.visibility_ms < options_.min_visibility_ms ||
      options.visibility_ms > options_.max_visibility_ms) {
    return InvalidArgument("visibility_timeout must be between " +
                           std::to_string(options_.min_visibility_ms) + " and " +
                           std::to_string(options_.max_visibility_ms) + " ms.");
  }
  State& st = *state_;
  uint64_t id = 0;
  {
    MutexLock lock(st.mu);
    if (st.stopped) return Stopped();
    if (st.waiters.size() + st.consumers.size() >= options_.max_waiters) {
      return Unavailable("Too many consumers are waiting on this queue, try again later.");
    }
    auto c = std::make_shared<State::Consumer>();
    c->options = options;
    c->sink = std::move(sink);
    id = st.next_consumer_id++;
    st.consumers.emplace(id, std::move(c));
  }
  st.Wake();
  std::weak_ptr<State> weak = state_;
  return std::unique_ptr<Subscription>(std::make_unique<SubscriptionImpl>([weak, id] {
    auto state = weak.lock();
    if (!state) return;
    MutexLock lock(state->mu);
    auto it = state->consumers.find(id);
    if (it == state->consumers.end()) return;
    it->second->closed = true;
    state->consumers.erase(it);
  }));
}

void Queue::Counts(std::function<void(Result<QueueCounts>)> done) {
  state_->AddAdminFor<QueueCounts>(
      [](State::Txn& t, QueueCounts* out) -> Status {
        KVC_ASSIGN_OR_RETURN(*out, t.q->QueueCounts(t.now));
        return Status::Ok();
      },
      std::move(done), /*look_again=*/false);
}

void Queue::ListDead(std::string after, size_t limit,
                     std::function<void(Result<std::vector<DeadLetter>>)> done) {
  state_->AddAdminFor<std::vector<DeadLetter>>(
      [after = std::move(after), limit](State::Txn& t, std::vector<DeadLetter>* out) -> Status {
        KVC_ASSIGN_OR_RETURN(*out, t.q->QueueListDead(after, limit));
        return Status::Ok();
      },
      std::move(done), /*look_again=*/false);
}

namespace {
// Runs `fn` for each named dead letter, or for every one (in pages) when `all`.
Status ForDead(Queue::State::Txn& t, const std::vector<std::string>& ids, bool all,
               const std::function<Status(const DeadLetter&)>& fn, int64_t* count) {
  if (!all) {
    for (const std::string& id : ids) {
      KVC_ASSIGN_OR_RETURN(std::optional<DeadLetter> d, t.q->QueueTakeDead(id));
      if (!d) continue;
      KVC_RETURN_IF_ERROR(fn(*d));
      ++*count;
    }
    return Status::Ok();
  }
  std::string after;
  while (true) {
    KVC_ASSIGN_OR_RETURN(std::vector<DeadLetter> page, t.q->QueueListDead(after, 1000));
    if (page.empty()) return Status::Ok();
    for (const DeadLetter& d : page) {
      KVC_RETURN_IF_ERROR(t.q->QueueTakeDead(d.id).status());
      KVC_RETURN_IF_ERROR(fn(d));
      ++*count;
    }
    after = page.back().id;
  }
}
}  // namespace

void Queue::RequeueDead(std::vector<std::string> ids, bool all,
                        std::function<void(Result<int64_t>)> done) {
  state_->AddAdminFor<int64_t>(
      [ids = std::move(ids), all](State::Txn& t, int64_t* n) -> Status {
        KVC_RETURN_IF_ERROR(ForDead(
            t, ids, all,
            [&t](const DeadLetter& d) -> Status {
              storage::QueueRow row;
              row.ts = t.now;
              row.id = d.id;
              row.payload = d.payload;
              row.backoff_schedule = kDefaultBackoff;
              row.keys_if_undelivered = d.keys_if_undelivered;
              ++t.undelivered_delta;
              return t.q->AddQueueMessage(row);
            },
            n));
        t.dead_removed += *n;
        if (*n > 0) t.wrote = true;
        return Status::Ok();
      },
      std::move(done), /*look_again=*/true);  // look again after the requeue
}

void Queue::PurgeDead(std::vector<std::string> ids, bool all,
                      std::function<void(Result<int64_t>)> done) {
  state_->AddAdminFor<int64_t>(
      [ids = std::move(ids), all](State::Txn& t, int64_t* n) -> Status {
        KVC_RETURN_IF_ERROR(ForDead(
            t, ids, all, [](const DeadLetter&) { return Status::Ok(); }, n));
        t.dead_removed += *n;
        if (*n > 0) t.wrote = true;
        return Status::Ok();
      },
      std::move(done), /*look_again=*/false);
}

int64_t Queue::NextRunMs() const {
  State& st = *state_;
  MutexLock lock(st.mu);
  if (st.stopped) return -1;
  if (!st.settles.empty() || !st.admin.empty()) return 0;
  int64_t at = std::min(st.earliest_deadline, st.next_prune);
  if (st.HasDemand()) {
    at = std::min({at, st.earliest_ready, st.next_poll});
    for (const auto& w : st.waiters) at = std::min(at, w.deadline_ms);
  }
  return at == kNever ? -1 : at;
}

namespace {

// A delivery failed (nack, or its lease expired): the next backoff step, or dead.
Result<SettleStatus> FailDelivery(Queue::State::Txn& t, storage::QueuedMessage m,
                                  const std::string& error, std::optional<int64_t> delay_ms) {
  t.wrote = true;
  if (!m.row.backoff_schedule.empty()) {
    const int64_t step = m.row.backoff_schedule.front();
    m.row.backoff_schedule.erase(m.row.backoff_schedule.begin());
    m.row.ts = t.now + (delay_ms ? *delay_ms : step);
    m.state.lease.clear();
    m.state.last_error = error;
    KVC_RETURN_IF_ERROR(t.q->QueueRequeue(m.row, m.state));
    return SettleStatus::kOk;
  }
  // No step left: keys_if_undelivered, the dead letter and the removal, in this transaction.
  for (const std::string& key : m.row.keys_if_undelivered) {
    storage::StoredRow row{m.row.payload, ValueEncoding::kV8, t.version, -1};
    KVC_RETURN_IF_ERROR(t.w->Put(key, row));
    t.changes.push_back(storage::KeyChange{key, std::move(row)});
  }
  storage::DeadLetterRow dead;
  dead.id = m.row.id;
  dead.payload = std::move(m.row.payload);
  dead.keys_if_undelivered = std::move(m.row.keys_if_undelivered);
  dead.attempts = m.state.attempts;
  dead.last_error = error;
  dead.dead_at_ms = t.now;
  KVC_RETURN_IF_ERROR(t.q->QueueRemoveRunning(dead.id));
  KVC_RETURN_IF_ERROR(t.q->QueueAddDead(dead));
  --t.undelivered_delta;
  ++t.dead;
  return SettleStatus::kDead;
}

}  // namespace

// One run of the queue, in numbered steps:
//   1. take work (under the lock): settles, admin jobs, waiters, consumers' free capacity;
//   in one storage transaction: 2. expire leases, 3. apply settles, 4. admin jobs,
//   5. deliver, 6. housekeep;
//   7. answer (under the lock, callbacks after it): counters, consumer accounting, replies.
struct Queue::State::Round {
  // A share of this run's deliveries: a subscribed consumer's, or the waiter's at `waiter`.
  struct Want {
    std::shared_ptr<Consumer> consumer;
    size_t waiter = 0;
    size_t n = 0;
    int64_t visibility_ms = 0;
  };

  Round(const QueueOptions& o, int64_t now_ms) : options(o), now(now_ms) {}

  const QueueOptions& options;
  const int64_t now;
  // Step 1.
  std::vector<SettleJob> settles;
  std::vector<AdminJob> admin;
  std::deque<Waiter> waiters;
  std::vector<Waiter> gone_waiters;
  std::vector<Want> wants;
  size_t total_want = 0;
  bool prune = false;
  bool recount = false;
  // Steps 2-6.
  Txn txn;
  std::vector<std::pair<size_t, Delivery>> delivered;  // index into `wants`
  std::vector<Status> admin_status;
  int64_t earliest_ready = kNever;
  int64_t earliest_deadline = kNever;
  int64_t recounted = -1;
  int64_t recounted_dead = -1;
  // Step 7: replies, made after the lock is released.
  std::vector<std::function<void()>> calls;
};

namespace {

using Round = Queue::State::Round;

// Step 1: takes the work waiting in `st`. Returns false when the queue stopped.
bool TakeWork(Queue::State& st, Round& r) KVC_EXCLUDES(st.mu) {
  MutexLock lock(st.mu);
  if (st.stopped) return false;
  r.settles.swap(st.settles);
  r.admin.swap(st.admin);
  // Waiters whose client went away take nothing (their leases would only expire).
  for (auto& w : st.waiters) {
    if (w.gone && w.gone->load()) {
      r.gone_waiters.push_back(std::move(w));
    } else {
      r.waiters.push_back(std::move(w));
    }
  }
  st.waiters.clear();
  for (size_t i = 0; i < r.waiters.size(); ++i) {
    r.wants.push_back(Round::Want{nullptr, i, r.waiters[i].max, r.waiters[i].visibility_ms});
    r.total_want += r.waiters[i].max;
  }
  for (const auto& [id, c] : st.consumers) {
    if (c->closed || c->in_flight >= c->options.max_in_flight) continue;
    const size_t n = c->options.max_in_flight - c->in_flight;
    r.wants.push_back(Round::Want{c, 0, n, c->options.visibility_ms});
    r.total_want += n;
  }
  r.prune = r.now >= st.next_prune;
  r.recount = r.now >= st.next_recount;
  r.total_want = std::min(r.total_want, r.options.max_transitions_per_run);
  r.admin_status.resize(r.admin.size());
  return true;
}

// Step 2: expired leases go back to ready after the next backoff step, or die.
Status ExpireLeases(Round& r) {
  Queue::State::Txn& txn = r.txn;
  KVC_ASSIGN_OR_RETURN(std::vector<std::string> expired,
                       txn.q->QueueRunningDue(r.now, r.options.max_transitions_per_run));
  for (const std::string& id : expired) {
    KVC_ASSIGN_OR_RETURN(std::optional<storage::QueuedMessage> m, txn.q->QueueGetRunning(id));
    if (!m) continue;
    if (!m->state.lease.empty()) txn.freed_leases.push_back(m->state.lease);
    ++txn.expired;
    KVC_RETURN_IF_ERROR(
        FailDelivery(txn, std::move(*m), "the lease expired before a settle", std::nullopt)
            .status());
  }
  return Status::Ok();
}

// Step 3, for one lease of `request`: its result.
Result<SettleResult> SettleOne(Queue::State::Txn& txn, const SettleRequest& request,
                               const std::string& lease) {
  SettleResult r;
  r.lease = lease;
  const std::string_view id = LeaseMessageId(lease);
  std::optional<storage::QueuedMessage> m;
  if (!id.empty()) {
    KVC_ASSIGN_OR_RETURN(m, txn.q->QueueGetRunning(id));
  }
  // A lease past its deadline is stale even if step 2 has not expired it yet (more expiries
  // than one run takes).
  if (!m || m->state.lease.empty() || m->state.lease != lease || m->row.ts <= txn.now) {
    r.status = SettleStatus::kStale;
    return r;
  }
  switch (request.kind) {
    case SettleKind::kAck:
      KVC_RETURN_IF_ERROR(txn.q->QueueRemoveRunning(m->row.id));
      txn.wrote = true;
      --txn.undelivered_delta;
      txn.freed_leases.push_back(lease);
      r.status = SettleStatus::kOk;
      break;
    case SettleKind::kNack: {
      std::string error = request.error.empty() ? std::string("nacked") : request.error;
      txn.freed_leases.push_back(lease);
      KVC_ASSIGN_OR_RETURN(r.status, FailDelivery(txn, std::move(*m), error, request.delay_ms));
      break;
    }
    case SettleKind::kExtend:
      r.lease_expires_ms = txn.now + request.visibility_ms;
      KVC_RETURN_IF_ERROR(txn.q->QueueSetDeadline(m->row.id, r.lease_expires_ms));
      txn.wrote = true;
      r.status = SettleStatus::kOk;
      break;
  }
  return r;
}

// Step 3: settles, in arrival order; only the current lease of a message counts.
Status ApplySettles(Round& r) {
  for (Queue::State::SettleJob& job : r.settles) {
    job.results.clear();
    for (const std::string& lease : job.request.leases) {
      KVC_ASSIGN_OR_RETURN(SettleResult one, SettleOne(r.txn, job.request, lease));
      job.results.push_back(std::move(one));
    }
  }
  return Status::Ok();
}

// Step 4: admin jobs. A job's own failure answers that job; a storage failure fails the run.
Status RunAdminJobs(Round& r) {
  for (size_t i = 0; i < r.admin.size(); ++i) {
    r.admin_status[i] = r.admin[i].body(r.txn);
    if (!r.admin_status[i].ok() && (r.admin_status[i].code() == StatusCode::kIoError ||
                                    r.admin_status[i].code() == StatusCode::kCorruption)) {
      return r.admin_status[i];
    }
  }
  return Status::Ok();
}

// Step 5: due messages in (ts, id) order, to waiters first (in arrival order), then to
// consumers.
Status Deliver(Round& r) {
  if (r.total_want == 0) return Status::Ok();
  KVC_ASSIGN_OR_RETURN(std::vector<storage::QueuedMessage> due,
                       r.txn.q->QueueDue(r.now, r.total_want));
  size_t wi = 0;
  size_t given = 0;
  for (storage::QueuedMessage& m : due) {
    while (wi < r.wants.size() && given >= r.wants[wi].n) {
      ++wi;
      given = 0;
    }
    if (wi == r.wants.size()) break;
    storage::QueueDeliveryState state = m.state;
    state.attempts += 1;
    state.lease = NewLease(m.row.id);
    const int64_t deadline = r.now + r.wants[wi].visibility_ms;
    KVC_RETURN_IF_ERROR(r.txn.q->QueueLease(m.row, deadline, state));
    r.txn.wrote = true;
    r.delivered.emplace_back(
        wi, Delivery{m.row.id, state.lease, std::move(m.row.payload), state.attempts, deadline});
    ++given;
  }
  return Status::Ok();
}

// Step 6: dead letters past retention, the counts, and when to look next.
Status Housekeep(Round& r) {
  storage::QueueStore& q = *r.txn.q;
  if (r.prune) {
    KVC_ASSIGN_OR_RETURN(int64_t pruned,
                         q.QueuePruneDead(r.now - r.options.dead_letter_retention_ms));
    if (pruned > 0) r.txn.wrote = true;
    r.txn.dead_removed += pruned;
  }
  if (r.recount) {
    KVC_ASSIGN_OR_RETURN(storage::QueueTableCounts c, q.QueueCounts(r.now));
    r.recounted = c.ready + c.delayed + c.leased;
    r.recounted_dead = c.dead;
  }
  KVC_ASSIGN_OR_RETURN(std::optional<int64_t> er, q.QueueEarliest(false));
  KVC_ASSIGN_OR_RETURN(std::optional<int64_t> ed, q.QueueEarliest(true));
  r.earliest_ready = er.value_or(kNever);
  r.earliest_deadline = ed.value_or(kNever);
  return Status::Ok();
}

// Steps 2-6 in one transaction (the body may run again; it starts from scratch each time).
Result<engine::WriterTaskContext::StateWrite> Transact(Round& r, storage::Writer& w,
                                                       int64_t version) {
  Queue::State::Txn& txn = r.txn;
  txn = Queue::State::Txn{};
  txn.w = &w;
  txn.q = w.queue_store();  // the engine refuses, at open, a backend without one
  txn.now = r.now;
  txn.version = version;
  r.delivered.clear();
  KVC_RETURN_IF_ERROR(ExpireLeases(r));
  KVC_RETURN_IF_ERROR(ApplySettles(r));
  KVC_RETURN_IF_ERROR(RunAdminJobs(r));
  KVC_RETURN_IF_ERROR(Deliver(r));
  KVC_RETURN_IF_ERROR(Housekeep(r));
  return engine::WriterTaskContext::StateWrite{std::move(txn.changes), txn.wrote};
}

// Step 7 after a failed transaction: everything taken is answered Unavailable.
void AnswerFailure(Queue::State& st, Round& r, const Status& s) KVC_REQUIRES(st.mu) {
  spdlog::error("queue transaction failed: {}", s.ToString());
  const Status fail = s.code() == StatusCode::kUnavailable
                          ? s
                          : Unavailable("The queue is temporarily unavailable, try again later.");
  for (auto& job : r.settles) r.calls.push_back([d = std::move(job.done), fail] { d(fail); });
  for (auto& job : r.admin) r.calls.push_back([d = std::move(job.done), fail] { d(fail); });
  for (auto& w : r.waiters) r.calls.push_back([d = std::move(w.done), fail] { d(fail); });
  // Look again after a while rather than spinning on a failing storage.
  st.earliest_ready = st.earliest_deadline = r.now + 1000;
}

// Step 7: the counters and the State's view of the queue after a committed transaction.
void CountOutcome(Queue::State& st, QueueCounters& counters, const Round& r) KVC_REQUIRES(st.mu) {
  const Queue::State::Txn& txn = r.txn;
  st.undelivered.fetch_add(txn.undelivered_delta, std::memory_order_relaxed);
  counters.delivered.fetch_add(r.delivered.size(), std::memory_order_relaxed);
  counters.expired.fetch_add(txn.expired, std::memory_order_relaxed);
  counters.dead.fetch_add(txn.dead, std::memory_order_relaxed);
  for (const auto& job : r.settles) {
    for (const SettleResult& one : job.results) {
      if (one.status == SettleStatus::kStale) {
        counters.stale.fetch_add(1, std::memory_order_relaxed);
      } else if (job.request.kind == SettleKind::kAck) {
        counters.acked.fetch_add(1, std::memory_order_relaxed);
      } else if (job.request.kind == SettleKind::kNack) {
        counters.nacked.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (r.recounted >= 0) st.undelivered.store(r.recounted, std::memory_order_relaxed);
  // The recount ran last in the transaction, so it already includes this run's changes.
  if (r.recounted_dead >= 0) {
    st.dead_letters.store(r.recounted_dead, std::memory_order_relaxed);
  } else {
    st.dead_letters.fetch_add(static_cast<int64_t>(txn.dead) - txn.dead_removed,
                              std::memory_order_relaxed);
  }
  st.earliest_ready = r.earliest_ready;
  st.earliest_deadline = r.earliest_deadline;
  if (r.prune) st.next_prune = r.now + kPruneEveryMs;
  if (r.recount) st.next_recount = r.now + kRecountEveryMs;
}

// Step 7: settled and expired leases free their consumers' capacity; deliveries go to their
// consumers (taking capacity) or into their waiters' answers.
void HandOut(Queue::State& st, Round& r) KVC_REQUIRES(st.mu) {
  for (const std::string& lease : r.txn.freed_leases) {
    auto it = st.lease_owner.find(lease);
    if (it == st.lease_owner.end()) continue;
    if (it->second->in_flight > 0) --it->second->in_flight;
    st.lease_owner.erase(it);
  }
  for (auto& [wi, d] : r.delivered) {
    const Round::Want& want = r.wants[wi];
    if (want.consumer) {
      ++want.consumer->in_flight;
      st.lease_owner.emplace(d.lease, want.consumer);
      if (!want.consumer->closed) {
        r.calls.push_back([sink = want.consumer->sink, d = std::move(d)]() mutable {
          sink->Deliver(std::move(d));
        });
      }
    } else {
      r.waiters[want.waiter].got.push_back(std::move(d));
    }
  }
}

// Step 7: settles and admin jobs are answered; waiters are answered if they got something or
// their wait is over, and the rest wait on, ahead of any that arrived meanwhile.
void AnswerSuccess(Queue::State& st, Round& r) KVC_REQUIRES(st.mu) {
  for (auto& job : r.settles) {
    r.calls.push_back(
        [d = std::move(job.done), res = std::move(job.results)]() mutable { d(std::move(res)); });
  }
  for (size_t i = 0; i < r.admin.size(); ++i) {
    r.calls.push_back([d = std::move(r.admin[i].done), res = r.admin_status[i]] { d(res); });
  }
  std::deque<Queue::State::Waiter> still;
  for (auto& w : r.waiters) {
    if (!w.got.empty() || w.deadline_ms <= r.now) {
      r.calls.push_back(
          [d = std::move(w.done), got = std::move(w.got)]() mutable { d(std::move(got)); });
    } else {
      still.push_back(std::move(w));
    }
  }
  for (auto& w : st.waiters) still.push_back(std::move(w));
  st.waiters.swap(still);
}

// Step 7: applies the outcome of the transaction `s` to `st` and makes the replies.
void Answer(Queue::State& st, QueueCounters& counters, Round& r, const Status& s)
    KVC_EXCLUDES(st.mu) {
  {
    MutexLock lock(st.mu);
    if (!s.ok()) {
      AnswerFailure(st, r, s);
    } else {
      CountOutcome(st, counters, r);
      HandOut(st, r);
      AnswerSuccess(st, r);
    }
    st.next_poll = r.options.foreign_poll_ms > 0 ? r.now + r.options.foreign_poll_ms : kNever;
  }
  for (auto& w : r.gone_waiters) {
    r.calls.push_back([d = std::move(w.done)] { d(Unavailable("The client went away.")); });
  }
}

}  // namespace

void Queue::Run(engine::WriterTaskContext& ctx, int64_t now_ms) {
  State& st = *state_;
  Round r(options_, now_ms);
  if (!TakeWork(st, r)) return;
  const Status s = ctx.TransactState(
      storage::CommitOrigin::kQueue,
      [&r](storage::Writer& w, int64_t version) { return Transact(r, w, version); });
  Answer(st, counters_, r, s);
  for (auto& call : r.calls) call();
}

void Queue::OnCommit(const storage::CommitGroup& group) {
  int64_t earliest = kNever;
  int64_t added = 0;
  for (const storage::CommitRecord& r : group.records) {
    for (const storage::QueueRow& q : r.enqueues) {
      earliest = std::min(earliest, q.ts);
      ++added;
    }
  }
  if (added == 0) return;
  State& st = *state_;
  bool wake = false;
  {
    MutexLock lock(st.mu);
    st.undelivered.fetch_add(added, std::memory_order_relaxed);
    if (earliest < st.earliest_ready) st.earliest_ready = earliest;
    wake = st.HasDemand();
  }
  if (wake) st.Wake();
}

void Queue::OnRetire() { Stop(); }

void Queue::Stop() {
  State& st = *state_;
  std::vector<std::function<void()>> calls;
  {
    MutexLock lock(st.mu);
    if (st.stopped) return;
    st.stopped = true;
    const Status fail = Stopped();
    for (auto& job : st.settles) calls.push_back([d = std::move(job.done), fail] { d(fail); });
    for (auto& job : st.admin) calls.push_back([d = std::move(job.done), fail] { d(fail); });
    for (auto& w : st.waiters) calls.push_back([d = std::move(w.done), fail] { d(fail); });
    for (auto& [id, c] : st.consumers) {
      c->closed = true;
      calls.push_back([sink = c->sink, fail] { sink->Closed(fail); });
    }
    st.settles.clear();
    st.admin.clear();
    st.waiters.clear();
    st.consumers.clear();
    st.lease_owner.clear();
  }
  for (auto& call : calls) call();
}

}  // namespace kvc::queue
