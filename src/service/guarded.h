// RunGuarded: runs the code that builds an answer on an engine or pool thread, so that a throw
// (a bug) becomes a 500 for that request instead of escaping into the thread and losing the
// answer. Stateless; callable from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>

#include "common/status.h"

namespace kvc::service {

// Runs `fn`. If it throws, logs "`what` failed: ..." and calls `fail` with an Internal status
// whose text tells the client nothing of the server's insides.
template <typename Fn, typename Fail>
void RunGuarded(const char* what, Fn&& fn, Fail&& fail) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("{} failed: {}", what, e.what());
    fail(Internal("An internal server error occurred."));
  }
}

}  // namespace kvc::service
