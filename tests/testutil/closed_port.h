// ClosedPort: a loopback TCP port that refuses connections for as long as this object lives,
// for tests of "the peer is not there". It is a socket bound to 127.0.0.1:0 (the kernel's
// choice) that never listens: a connection to it is refused, and since the socket holds the
// port (without SO_REUSEADDR) no other process can listen there meanwhile. A port that was
// bound and then released instead could be handed to another test's server before the
// connection attempt.
//
// Ownership: owns the socket; the destructor closes it.
// Thread-safety: port() is const and may be called from any thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace kvc::testutil {

class ClosedPort {
 public:
  // port() is 0 if no socket could be bound.
  ClosedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~ClosedPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace kvc::testutil
