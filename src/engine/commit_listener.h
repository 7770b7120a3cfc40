// CommitListener: a subscriber to an engine's stream of commit records. The engine calls
// OnCommit once per durable storage transaction (a group commit of atomic writes, an expiry
// sweep, a writer task, or another writer's commit seen through the backend's change feed), in
// increasing version order, never twice for one transaction. The watch hub is one listener;
// metrics are another; backups, queue waiters and cross-node feeds plug in the same way.
//
// Thread-safety: OnCommit and OnRetire run on one engine thread at a time (the writer thread,
// or the change-feed thread of a backend that is not the exclusive writer), never while an engine
// lock other than the listener-list lock is held. They must be quick, must not block and must
// not add or remove listeners.
#pragma once

#include "storage/commit_record.h"

namespace kvc::engine {

class CommitListener {
 public:
  virtual ~CommitListener() = default;
  virtual void OnCommit(const storage::CommitGroup& group) = 0;
  // The engine is being retired (its database was deleted or replaced, or the server is
  // stopping): no more commits will come. Long-lived consumers (watch streams) end here so
  // their clients reconnect to whatever serves the database now.
  virtual void OnRetire() {}
};

}  // namespace kvc::engine
