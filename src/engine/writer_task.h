// WriterTask: periodic or on-demand work that runs on an engine's writer thread between group
// commits, with the write lock to itself: the expiry sweep today; checkpoints, backup
// shipping and queue delivery are meant to be more of them. Register with
// EngineOptions::task_factories so every engine gets its own instances.
//
// A task says when it wants to run next; the writer loop sleeps until the earliest of those
// times (or new writes) and then calls Run. A task that wants to run earlier than it said asks
// the engine to wake the writer (Engine::WakeWriter).
//
// A task that is also a CommitListener is registered as one by the engine.
//
// Thread-safety: NextRunMs and Run are called on the writer thread only. A task that is also a
// CommitListener gets OnCommit on the publishing thread, which is the writer thread for an
// exclusive-writer backend (storage/capabilities.h) and the change-feed thread otherwise; state
// shared between the two must be atomic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "storage/backend.h"

namespace kvc::engine {

// What a task may use from any thread, from Bind until Stop returns.
class WriterTaskHost {
 public:
  virtual ~WriterTaskHost() = default;
  virtual int64_t NowMs() const = 0;  // the engine's clock
  // Makes the writer re-evaluate NextRunMs soon (e.g. a request for the task arrived).
  virtual void Wake() = 0;
};

// What a task may do on the writer thread.
class WriterTaskContext {
 public:
  virtual ~WriterTaskContext() = default;
  // Returns the changes the transaction made (empty: nothing to commit, rolled back).
  using Body =
      std::function<Result<std::vector<storage::KeyChange>>(storage::Writer& w, int64_t version)>;
  // Runs `body` in one storage transaction whose writes carry `version` (the committed version
  // + 1), commits it and publishes it as one record of `origin`. Errors: Unavailable after an
  // earlier storage failure (the engine refuses writes until restart) or when an optimistic
  // backend refused the commit for a conflict (nothing applied; not run again here), or the
  // body's or the commit's error; a failed commit of a fail-stop backend puts the engine in
  // that failed state. The body reaches the queue tables through w.queue_store(), which the
  // engine guarantees (it refuses backends without one).
  virtual Status Transact(storage::CommitOrigin origin, const Body& body) = 0;
  // For state outside the key space (queue deliveries): the body returns the key changes it
  // made and whether it wrote anything at all. With key changes, as Transact; with none but
  // `wrote`, the transaction commits (durably) without a new data version, a change-log entry
  // or a publication; with neither, it is rolled back.
  struct StateWrite {
    std::vector<storage::KeyChange> changes;
    bool wrote = false;
  };
  using StateBody = std::function<Result<StateWrite>(storage::Writer& w, int64_t version)>;
  virtual Status TransactState(storage::CommitOrigin origin, const StateBody& body) = 0;
  virtual int64_t NowMs() const = 0;
};

class WriterTask {
 public:
  virtual ~WriterTask() = default;
  virtual const char* name() const = 0;
  // Unix ms at which the task wants to run next; -1: not scheduled.
  virtual int64_t NextRunMs() const = 0;
  // Called when NextRunMs() <= now_ms (and not after a storage failure).
  virtual void Run(WriterTaskContext& ctx, int64_t now_ms) = 0;
  // Called once before the writer thread starts; `host` stays valid until Stop returns.
  virtual void Bind(WriterTaskHost* /*host*/) {}
  // The engine is shutting down and its writer thread has ended: fail whatever still waits.
  // Called once, on the thread that shuts the engine down.
  virtual void Stop() {}
};

}  // namespace kvc::engine
