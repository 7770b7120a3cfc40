// Blocking wrappers around the engine's callback API, and a set mutation, for tests.
#pragma once

#include <future>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace kvc::testutil {

// Sets `k` to the raw bytes `v`, expiring at `expire` (Unix ms; 0: never).
inline Mutation Set(std::string k, std::string v, int64_t expire = 0) {
  Mutation m;
  m.key = std::move(k);
  m.type = MutationType::kSet;
  m.value = KvValue{std::move(v), ValueEncoding::kBytes};
  m.expire_at_ms = expire;
  return m;
}

inline Result<CommitResult> WriteSync(engine::Engine& e, AtomicWrite w) {
  std::promise<Result<CommitResult>> p;
  e.Write(std::move(w), [&](Result<CommitResult> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

inline Result<engine::ReadResult> ReadSync(engine::Engine& e, std::vector<ReadRange> ranges) {
  std::promise<Result<engine::ReadResult>> p;
  e.SnapshotRead(std::move(ranges),
                 [&](Result<engine::ReadResult> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

}  // namespace kvc::testutil
