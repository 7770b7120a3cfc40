// FaultProxy: a TCP proxy on 127.0.0.1 that sits between a client and a server and breaks the
// traffic on purpose, to show how the client copes with a slow network or a connection cut in
// the middle of a request or an answer.
//
// Each accepted connection gets a copy of the plan in force when it was accepted, and a thread
// that forwards bytes both ways (POSIX sockets, poll):
//   kNone            forwards as is;
//   kSlow            forwards at most `chunk_bytes` at a time, each after `delay_ms`;
//   kCutRequest      forwards the first `after_bytes` bytes the client sends, then closes both
//                    sides (the server sees a request that ends early, the client a closed
//                    connection);
//   kCutResponse     the same for the first `after_bytes` bytes the server sends;
//   kFlipRequestByte flips the lowest bit of byte `after_bytes` of what the client sends.
// A fault fires at most once per connection; faults_injected() counts them, so a test can check
// that its fault really happened.
//
// Ownership: owns its listening socket, the connections and their threads; the destructor
// closes them all and joins the threads. Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace kvc::testutil {

enum class ProxyFault { kNone, kSlow, kCutRequest, kCutResponse, kFlipRequestByte };

struct ProxyPlan {
  ProxyFault fault = ProxyFault::kNone;
  int64_t after_bytes = 0;    // kCutRequest, kCutResponse, kFlipRequestByte
  size_t chunk_bytes = 1024;  // kSlow
  int delay_ms = 0;           // kSlow
};

class FaultProxy {
 public:
  // Listens on 127.0.0.1 (a port the kernel picks) and forwards to 127.0.0.1:upstream_port.
  static Result<std::unique_ptr<FaultProxy>> Start(int upstream_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT".
  std::string endpoint() const;
  // Applies to connections accepted from now on.
  void SetPlan(const ProxyPlan& plan);

  int faults_injected() const { return faults_.load(); }
  int connections() const { return connections_.load(); }
  // The first kCaptureBytes bytes each connection sent upstream so far, as they were
  // forwarded (request lines and headers, for tests to inspect).
  std::string CapturedRequests() const;

  static constexpr size_t kCaptureBytes = 64 * 1024;

 private:
  FaultProxy() = default;
  void AcceptLoop();
  void Serve(int client_fd, ProxyPlan plan);
  void Untrack(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  int upstream_port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> faults_{0};
  std::atomic<int> connections_{0};
  std::thread acceptor_;

  mutable Mutex mu_;
  ProxyPlan plan_ KVC_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ KVC_GUARDED_BY(mu_);
  std::set<int> open_fds_ KVC_GUARDED_BY(mu_);  // shut down by the destructor
  std::string captured_ KVC_GUARDED_BY(mu_);
};

}  // namespace kvc::testutil
