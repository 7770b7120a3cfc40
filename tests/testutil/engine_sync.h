// Blocking wrappers around the engine's callback API, for tests.
#pragma once

#include <future>
#include <vector>

#include "engine/engine.h"

namespace kvc::testutil {

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
