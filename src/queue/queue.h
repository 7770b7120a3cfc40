// Queue: delivery of one database's queue messages (docs/queues.md), at least once.
//
// State machine (one storage transaction per step, on the engine's writer thread):
//   ready (Deno's `queue` table, due at ts) --lease--> leased (`queue_running`, until deadline)
//   leased --ack--> removed
//   leased --nack | lease expiry--> ready again after the first backoff step (consumed), or,
//          with no step left, dead: the payload is written to every keys_if_undelivered key
//          (a new version, published like any commit), the message is recorded as a dead
//          letter and removed, all in one transaction.
// Every delivery gets a new lease token; only the current one settles the message.
//
// A Queue belongs to one engine (it is that engine's WriterTask "queue" and a CommitListener;
// QueueFor finds it).
// Requests are queued in memory and carried out by the task on the writer thread, many in one
// transaction; their callbacks run after the commit (so an answered lease or ack is durable),
// on the writer thread, and must not block. Waiting pulls are answered when a message becomes
// due (enqueue, nack, expiry, delay or backoff over), or empty when their wait ends; no polling,
// except a re-read every `foreign_poll_ms` while consumers wait, for messages other processes
// (Deno on the same file) add.
//
// Ownership: the engine owns the task; callers hold shared_ptrs (safe after the engine shut
// down: requests then fail with Unavailable).
// Thread-safety: public methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/commit_listener.h"
#include "engine/writer_task.h"
#include "storage/queue_rows.h"

namespace kvc::engine {
class Engine;
}

namespace kvc::queue {

struct QueueOptions {
  size_t max_undelivered = 100000;        // enqueues beyond it: ResourceExhausted (429)
  int64_t default_visibility_ms = 30000;  // lease length when a request names none
  int64_t min_visibility_ms = 1000;
  int64_t max_visibility_ms = 12 * 3600 * 1000;
  size_t max_pull_messages = 100;            // per pull
  int64_t max_wait_ms = 20000;               // long-poll bound
  size_t max_waiters = 10000;                // waiting pulls + subscriptions per database
  size_t max_in_flight_per_consumer = 1000;  // subscriptions (SSE, push)
  int64_t dead_letter_retention_ms = 7LL * 24 * 3600 * 1000;
  int64_t foreign_poll_ms = 1000;         // re-read while consumers wait (other writers)
  size_t max_transitions_per_run = 1000;  // bound on one transaction's work
};

// One delivery of a message.
struct Delivery {
  std::string id;       // the message's id (UUID)
  std::string lease;    // this delivery's token
  std::string payload;  // V8 bytes as stored
  int32_t attempt = 1;  // deliveries so far, this one included
  int64_t lease_expires_ms = 0;
};

enum class SettleKind { kAck, kNack, kExtend };

struct SettleRequest {
  SettleKind kind = SettleKind::kAck;
  std::vector<std::string> leases;
  std::optional<int64_t> delay_ms;  // nack: instead of the backoff step's interval
  int64_t visibility_ms = 0;        // extend: new lease length (0: the default)
  std::string error;                // nack: why (kept with a dead letter)
};

enum class SettleStatus { kOk, kStale, kDead };
const char* SettleStatusName(SettleStatus s);  // "ok" | "stale" | "dead"

struct SettleResult {
  std::string lease;
  SettleStatus status = SettleStatus::kStale;
  int64_t lease_expires_ms = 0;  // extend: the new expiry
};

struct PullRequest {
  size_t max_messages = 1;
  int64_t visibility_ms = 0;  // 0: the default
  int64_t wait_ms = 0;
  // Set once the client went away (HttpRequest::client_gone): a waiting pull that sees it takes
  // nothing more. May be null.
  std::shared_ptr<const std::atomic<bool>> gone;
};

// Monotonic counters for metrics.
struct QueueCounters {
  std::atomic<uint64_t> delivered{0};  // deliveries (leases handed out)
  std::atomic<uint64_t> acked{0};
  std::atomic<uint64_t> nacked{0};
  std::atomic<uint64_t> expired{0};  // leases that ran out (a Deno process's included)
  std::atomic<uint64_t> dead{0};     // messages dead-lettered
  std::atomic<uint64_t> stale{0};    // settles with a lease that was not the current one
};

using QueueCounts = storage::QueueTableCounts;  // ready (due now), delayed, leased, dead

using DeadLetter = storage::DeadLetterRow;

// A long-lived consumer (SSE stream, push dispatcher): gets deliveries while it has fewer
// than max_in_flight unsettled ones (a delivery counts until its lease is settled or expires).
// Called on the writer thread; must not block. Deliver may still come shortly after the
// Subscription was destroyed (the lease then just expires).
class ConsumerSink {
 public:
  virtual ~ConsumerSink() = default;
  virtual void Deliver(Delivery d) = 0;
  // The queue stops (shutdown, database retired); no Deliver follows.
  virtual void Closed(const Status& why) = 0;
};

struct ConsumerOptions {
  size_t max_in_flight = 10;
  int64_t visibility_ms = 0;  // 0: the default
};

class Queue : public engine::WriterTask, public engine::CommitListener {
 public:
  class Subscription {
   public:
    virtual ~Subscription() = default;  // ends the consumer; its leases just expire
  };
  using PullCallback = std::function<void(Result<std::vector<Delivery>>)>;
  using SettleCallback = std::function<void(Result<std::vector<SettleResult>>)>;

  explicit Queue(QueueOptions options);
  ~Queue() override;

  // Engine wiring: a factory for EngineOptions::task_factories, and the task of an engine.
  static std::function<std::unique_ptr<engine::WriterTask>()> Factory(QueueOptions options);
  static std::shared_ptr<Queue> QueueFor(engine::Engine& engine);

  const QueueOptions& options() const { return options_; }

  // Validated here (InvalidArgument with the client text) or answered later.
  void Pull(PullRequest request, PullCallback done);
  void Settle(SettleRequest request, SettleCallback done);
  // Errors: InvalidArgument (options), Unavailable (too many consumers, stopped).
  Result<std::unique_ptr<Subscription>> Subscribe(ConsumerOptions options,
                                                  std::shared_ptr<ConsumerSink> sink);

  // Messages not yet delivered for good (ready, delayed and leased), as last counted; for the
  // enqueue cap.
  int64_t undelivered() const;
  // Dead letters kept, as last counted: this queue's own dead-lettering, requeues, purges and
  // pruning move it at once; a recount (at the queue's first run after 10 s have passed since
  // the last) also takes in what other nodes on the same storage did.
  int64_t dead_letters() const;
  const QueueCounters& counters() const { return counters_; }
  // Waiting pulls and subscribed consumers.
  size_t consumers() const;
  // Refusal for `n` more messages, if the cap is reached: ResourceExhausted with the text.
  Status AdmitEnqueue(size_t n) const;

  void Counts(std::function<void(Result<QueueCounts>)> done);
  // Dead letters with id > after, in id order, at most `limit`.
  void ListDead(std::string after, size_t limit,
                std::function<void(Result<std::vector<DeadLetter>>)> done);
  // Requeues (due now, Deno's default backoff) or deletes the named dead letters (all when
  // `ids` is empty and `all`). Answers how many.
  void RequeueDead(std::vector<std::string> ids, bool all,
                   std::function<void(Result<int64_t>)> done);
  void PurgeDead(std::vector<std::string> ids, bool all, std::function<void(Result<int64_t>)> done);

  // WriterTask.
  const char* name() const override { return "queue"; }
  int64_t NextRunMs() const override;
  void Run(engine::WriterTaskContext& ctx, int64_t now_ms) override;
  void Bind(engine::WriterTaskHost* host) override;
  void Stop() override;
  // CommitListener: enqueues wake waiting consumers; retirement ends them (they reconnect).
  void OnCommit(const storage::CommitGroup& group) override;
  void OnRetire() override;

  struct State;  // queue.cc

 private:
  const QueueOptions options_;
  // Shared with the Subscriptions (weakly): the engine makes its tasks shared from a
  // unique_ptr<WriterTask>, so enable_shared_from_this<Queue> would never be armed.
  std::shared_ptr<State> state_;
  QueueCounters counters_;
};

}  // namespace kvc::queue
