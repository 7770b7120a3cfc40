// WaitFor: polls a condition until it holds or a deadline passes. Tests that wait for something
// to happen (a frame, a freed slot, a closed connection) poll for it with this instead of
// sleeping a fixed time and hoping: the wait is as short as the machine allows, and a slow
// machine only makes it longer, up to the deadline. Write the failure message at the call site,
// naming what was awaited:
//   ASSERT_TRUE(testutil::WaitFor([&] { return conn.closed(); })) << "the server closing conn";
// Thread-safety: WaitFor itself keeps no state; `done` runs on the calling thread.
#pragma once

#include <chrono>
#include <thread>

namespace kvc::testutil {

// Generous on purpose: it only bounds a wait that normally ends in milliseconds, and a test
// must not fail because a loaded machine (a parallel ctest, a sanitizer build) is slow.
inline constexpr std::chrono::milliseconds kWaitTimeout{10000};

// Calls `done` until it returns true, pausing `interval` between calls; gives up after
// `timeout`, calling it one last time at the deadline. Returns whether it held.
template <typename Pred>
bool WaitFor(Pred&& done, std::chrono::milliseconds timeout = kWaitTimeout,
             std::chrono::milliseconds interval = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return static_cast<bool>(done());
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace kvc::testutil
