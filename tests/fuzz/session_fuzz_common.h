// Shared harness of the HTTP/1.1 and HTTP/2 session fuzzers: the fuzzer's bytes arrive on one
// end of a socket pair whose other end is a real server session (the same code `serve` runs),
// with a stub handler that answers at once, streams for /stream, and echoes sizes. The loop
// reads whatever the session writes back so it never blocks, and stops when the session has
// closed or after a bounded number of event-loop turns.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "net/session.h"

namespace kvc::fuzz {

class StubStream : public service::StreamSource {
 public:
  void Start(std::shared_ptr<service::StreamSink> sink) override {
    sink->Send(std::string("\x04\x00\x00\x00ping", 8));
    sink->Close();
  }
  void Cancel() override {}
};

class StubHandler : public service::Handler {
 public:
  void Handle(service::HttpRequest req, service::Responder respond) override {
    service::HttpResponse r;
    if (req.path == "/stream") {
      r.content_type = "application/octet-stream";
      r.stream = std::make_shared<StubStream>();
      r.heartbeat = std::string(4, '\0');
      r.heartbeat_interval = std::chrono::milliseconds(1);
    } else {
      r.content_type = "text/plain";
      r.body = req.method + " " + req.path + " " + std::to_string(req.body.size()) + " " +
               std::string(req.Header("content-type"));
      if (req.path == "/404") r.status = 404;
    }
    respond(std::move(r));
  }
};

// Runs one input through a session. `start` hands the server end to the session under test.
template <typename StartFn>
void RunSession(const uint8_t* data, size_t size, StartFn start) {
  static StubHandler handler;
  net::asio::io_context ioc;
  net::ServerContext ctx;
  ctx.options.max_body_bytes = 64 * 1024;
  ctx.options.max_header_bytes = 4 * 1024;
  ctx.options.h2_max_concurrent_streams = 16;
  ctx.options.h2_max_inflight_requests = 16;
  ctx.options.h2_max_pending_body_bytes = 128 * 1024;
  ctx.options.max_stream_buffer_bytes = 64 * 1024;
  ctx.handler = &handler;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return;
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  {
    net::tcp::socket server(ioc);
    boost::system::error_code ec;
    server.assign(net::tcp::v4(), fds[0], ec);
    if (ec) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    start(&ctx, std::move(server));
  }
  size_t sent = 0;
  char sink[16384];
  for (int turn = 0; turn < 400; ++turn) {
    if (sent < size) {
      ssize_t n = write(fds[1], data + sent, size - sent);
      if (n > 0) sent += static_cast<size_t>(n);
      if (sent == size) shutdown(fds[1], SHUT_WR);
    }
    while (read(fds[1], sink, sizeof sink) > 0) {
    }
    ioc.poll();
    if (sent == size && ctx.registry.size() == 0) break;
    if (ioc.stopped()) ioc.restart();
  }
  ctx.stopping = true;
  ctx.registry.ShutdownAll();
  for (int turn = 0; turn < 50 && ctx.registry.size() > 0; ++turn) {
    while (read(fds[1], sink, sizeof sink) > 0) {
    }
    ioc.poll();
    if (ioc.stopped()) ioc.restart();
  }
  close(fds[1]);
  ioc.stop();
}

}  // namespace kvc::fuzz
