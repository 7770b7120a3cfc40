#include "testutil/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace kvc::testutil {
namespace {

// How often blocked loops look at the stop flag.
constexpr int kPollMs = 50;
constexpr size_t kBufferBytes = 16 * 1024;

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<FaultProxy>> FaultProxy::Start(int upstream_port) {
  std::unique_ptr<FaultProxy> proxy(new FaultProxy());
  proxy->upstream_port_ = upstream_port;
  proxy->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (proxy->listen_fd_ < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof addr;
  if (::bind(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(proxy->listen_fd_, SOMAXCONN) != 0 ||
      ::getsockname(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return IoError(std::string("fault proxy cannot listen: ") + std::strerror(errno));
  }
  proxy->port_ = ntohs(addr.sin_port);
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

FaultProxy::~FaultProxy() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> workers;
  {
    MutexLock lock(mu_);
    // Wakes workers blocked in send().
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    workers = std::move(workers_);
  }
  for (std::thread& worker : workers) worker.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string FaultProxy::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FaultProxy::SetPlan(const ProxyPlan& plan) {
  MutexLock lock(mu_);
  plan_ = plan;
}

std::string FaultProxy::CapturedRequests() const {
  MutexLock lock(mu_);
  return captured_;
}

void FaultProxy::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++connections_;
    MutexLock lock(mu_);
    open_fds_.insert(fd);
    workers_.emplace_back([this, fd, plan = plan_] { Serve(fd, plan); });
  }
}

void FaultProxy::Untrack(int fd) {
  MutexLock lock(mu_);
  open_fds_.erase(fd);
}

void FaultProxy::Serve(int client_fd, ProxyPlan plan) {
  const int server_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in addr = Loopback(upstream_port_);
  if (server_fd < 0 ||
      ::connect(server_fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (server_fd >= 0) ::close(server_fd);
    Untrack(client_fd);
    ::close(client_fd);
    return;
  }
  {
    MutexLock lock(mu_);
    open_fds_.insert(server_fd);
    if (stop_) ::shutdown(server_fd, SHUT_RDWR);
  }

  struct Direction {
    int from;
    int to;
    bool upstream;  // client -> server
    bool open = true;
    int64_t count = 0;
  };
  Direction dirs[2] = {{client_fd, server_fd, true}, {server_fd, client_fd, false}};
  size_t captured = 0;
  bool fired = false;
  bool cut = false;
  std::string buffer(kBufferBytes, '\0');
  const size_t max_read = plan.fault == ProxyFault::kSlow
                              ? std::min(std::max<size_t>(plan.chunk_bytes, 1), kBufferBytes)
                              : kBufferBytes;

  while (!stop_ && !cut && (dirs[0].open || dirs[1].open)) {
    pollfd fds[2];
    nfds_t n = 0;
    Direction* polled[2];
    for (Direction& d : dirs) {
      if (!d.open) continue;
      fds[n] = pollfd{d.from, POLLIN, 0};
      polled[n++] = &d;
    }
    if (::poll(fds, n, kPollMs) <= 0) continue;
    for (nfds_t i = 0; i < n && !cut; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Direction& d = *polled[i];
      const ssize_t got = ::recv(d.from, buffer.data(), max_read, 0);
      if (got <= 0) {
        // End of one direction: pass the half-close on.
        ::shutdown(d.to, SHUT_WR);
        d.open = false;
        continue;
      }
      auto len = static_cast<size_t>(got);
      if (plan.fault == ProxyFault::kSlow) {
        std::this_thread::sleep_for(std::chrono::milliseconds(plan.delay_ms));
      }
      if (d.upstream && captured < kCaptureBytes) {
        const size_t n = std::min(len, kCaptureBytes - captured);
        captured += n;
        MutexLock lock(mu_);
        captured_.append(buffer.data(), n);
      }
      const bool cuts_here = !fired && ((plan.fault == ProxyFault::kCutRequest && d.upstream) ||
                                        (plan.fault == ProxyFault::kCutResponse && !d.upstream));
      if (cuts_here && d.count + static_cast<int64_t>(len) >= plan.after_bytes) {
        len = static_cast<size_t>(std::max<int64_t>(0, plan.after_bytes - d.count));
        fired = true;
        cut = true;
        ++faults_;
      }
      if (!fired && plan.fault == ProxyFault::kFlipRequestByte && d.upstream &&
          plan.after_bytes >= d.count && plan.after_bytes < d.count + static_cast<int64_t>(len)) {
        buffer[static_cast<size_t>(plan.after_bytes - d.count)] ^= 1;
        fired = true;
        ++faults_;
      }
      if (!SendAll(d.to, buffer.data(), len)) cut = true;
      d.count += static_cast<int64_t>(len);
    }
  }

  {
    MutexLock lock(mu_);
    open_fds_.erase(client_fd);
    open_fds_.erase(server_fd);
  }
  ::shutdown(client_fd, SHUT_RDWR);
  ::shutdown(server_fd, SHUT_RDWR);
  ::close(client_fd);
  ::close(server_fd);
}

}  // namespace kvc::testutil
