// Server: the Asio listeners and I/O threads. A plain port serves HTTP/2 with prior knowledge
// (h2c) and HTTP/1.1, told apart by the first bytes of each connection. A TLS port negotiates
// the protocol with ALPN (h2 preferred, http/1.1) and falls back to sniffing the first bytes
// when the client offered no ALPN. Both session kinds turn requests into service::HttpRequest
// for the same Handler. The primary listener is plain or TLS; a second, TLS-only listener can
// run beside a plain one.
//
// Ownership: the Server owns its io_context, threads and sessions; the handler must outlive
// it.
// Thread-safety: Start/Stop from one controlling thread; everything else runs on I/O threads,
// each session on its I/O thread's io_context (one thread per context), so its handlers never
// run concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/http_types.h"

namespace kvc::net {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 4512;  // 0: pick a free port (see bound_port())
  bool tls = false;      // the primary listener speaks TLS
  // A second listener that always speaks TLS (empty host: none).
  std::string tls_host;
  uint16_t tls_port = 0;
  // PEM files: the certificate chain (leaf first) and its private key. Required when any
  // listener speaks TLS; reread by ReloadTls().
  std::string tls_cert_file;
  std::string tls_key_file;
  std::chrono::milliseconds tls_handshake_timeout{10000};
  int io_threads = 2;
  size_t max_body_bytes = 4 * 1024 * 1024;  // larger requests get 413
  size_t max_header_bytes = 16 * 1024;      // request header block limit
  size_t max_connections = 10000;
  std::chrono::milliseconds idle_timeout{120000};    // idle keep-alive connections close
  std::chrono::milliseconds header_timeout{10000};   // HTTP/1.1 header block, from first byte
  std::chrono::milliseconds request_timeout{30000};  // whole request must arrive
  std::chrono::milliseconds detect_timeout{10000};   // first bytes of a connection
  uint32_t h2_max_concurrent_streams = 1000;
  // Requests dispatched on one HTTP/2 connection and not yet answered; beyond this new streams
  // are refused (REFUSED_STREAM, which clients retry). Reset streams count until answered.
  uint32_t h2_max_inflight_requests = 1000;
  // Request bodies received but not yet dispatched (no END_STREAM yet), per connection and
  // server-wide; a stream that would exceed either is refused. Streams that do not finish
  // their request within request_timeout are reset.
  size_t h2_max_pending_body_bytes = 64 << 20;
  size_t max_pending_body_bytes = 512 << 20;
  int32_t h2_initial_window = 1 << 20;  // per stream
  int32_t h2_connection_window = 16 << 20;
  size_t max_stream_buffer_bytes = 16 << 20;  // a streaming client this far behind is dropped
  // After an error answer that ends a connection (413, 400 for bad framing), the server stops
  // sending and reads and discards what the client still sends, for up to linger_timeout and
  // linger_max_bytes, then closes. Closing with unread bytes would make the kernel send a reset,
  // and a client still writing its body would lose the answer.
  std::chrono::milliseconds linger_timeout{2000};
  size_t linger_max_bytes = 32 << 20;
  // Strict-Transport-Security max-age (seconds) on every answer over TLS; 0: no header.
  int64_t hsts_max_age_s = 365LL * 24 * 3600;
};

// Connection counts for metrics.
struct ServerStats {
  uint64_t connections_open = 0;
  uint64_t connections_total = 0;  // sessions started since Start
  int64_t h2_streams_open = 0;
  uint64_t h2_streams_total = 0;
};

class ServerImpl;

class Server {
 public:
  Server(ServerOptions options, service::Handler* handler);
  ~Server();

  // Loads the TLS files if needed, binds and starts the I/O threads. Errors: Unavailable
  // (cannot bind), InvalidArgument (bad certificate or key).
  Status Start();
  uint16_t bound_port() const;
  uint16_t bound_tls_port() const;  // the second listener's port (0 if none)
  // Rereads the certificate and key. New connections use them; open ones keep theirs. On error
  // the old ones stay in use. Thread-safe.
  Status ReloadTls();
  // Stops accepting, lets in-flight requests finish (up to `grace`), ends streams, closes
  // connections and joins the I/O threads. Idempotent. Returns true if every connection ended
  // within the grace period (false: some were cut off).
  bool Stop(std::chrono::milliseconds grace);
  size_t connection_count() const;
  ServerStats stats() const;  // thread-safe

 private:
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace kvc::net
