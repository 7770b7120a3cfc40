// Asynchronous HTTP client connections for the load generator: HTTP/2 (nghttp2 client session,
// h2c with prior knowledge or TLS with ALPN "h2") and HTTP/1.1 keep-alive (Beast), over plain
// TCP or TLS, all behind one callback interface.
//
// Ownership: a Connection is held by shared_ptr; every pending asynchronous operation holds a
// reference too, so it lives until its last handler ran. Close() ends it early.
// Thread-safety: none. A connection and all its callbacks run on the one io_context it was made
// with, whose run() is called by a single thread; call its methods only from that thread (post
// to the io_context from elsewhere). Callbacks are never invoked from inside the call that
// submitted the request.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "loadgen/url.h"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}  // namespace ssl
}  // namespace boost::asio

namespace kvc::loadgen {

enum class HttpVersion { kHttp1, kHttp2 };

// Request header fields with lowercase names.
using Headers = std::vector<std::pair<std::string, std::string>>;

// A POST request. `headers` are shared between requests (they are the same for every data-path
// call) and may be null; `extra_headers` belong to this request alone.
struct Request {
  std::string path;
  std::shared_ptr<const Headers> headers;
  Headers extra_headers;
  std::string body;
};

struct Response {
  int status = 0;
  std::string content_type;
  std::string body;
};

// Error codes passed to callbacks: kUnavailable for transport failures (connect, TLS, I/O, the
// peer closing, Close()), kInternal for protocol failures (unparsable responses, HTTP/2 stream
// resets and connection errors), kPayloadTooLarge for responses over max_response_bytes.
using ResponseHandler = std::function<void(Result<Response>)>;

// A streamed response: `on_head` once with the status and content type, then `on_data` for each
// piece of body as it arrives, then `on_end` exactly once (OK when the body ended cleanly).
// `on_end` may come without `on_head` if the request failed first. `on_data` must not call
// back into the connection.
struct StreamHandlers {
  std::function<void(int status, std::string_view content_type)> on_head;
  std::function<void(std::string_view data)> on_data;
  std::function<void(Status)> on_end;
};

struct ConnectionOptions {
  HttpVersion version = HttpVersion::kHttp2;
  Url origin;  // scheme, host and port; the path is unused
  std::chrono::milliseconds connect_timeout{10000};
  size_t max_response_bytes = 64u << 20;
  int32_t h2_stream_window = 1 << 20;       // our HTTP/2 receive window per stream
  int32_t h2_connection_window = 16 << 20;  // and per connection
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;

  // Connects (TCP, then TLS with ALPN when the origin is https; over HTTP/2 also waits for the
  // server's SETTINGS). `done` gets OK or kUnavailable/kInternal. REQUIRES: called once, first.
  virtual void Connect(std::function<void(Status)> done) = 0;

  // Sends a POST and delivers the complete response. Over HTTP/2 any number may be in flight
  // (nghttp2 queues what exceeds the server's stream limit); over HTTP/1.1 requests are queued
  // and sent one at a time.
  virtual void Send(Request request, ResponseHandler done) = 0;

  // Sends a POST whose response body is delivered as it arrives (watch streams).
  virtual void SendStreaming(Request request, StreamHandlers handlers) = 0;

  // Ends the connection: every request still pending fails with kUnavailable "closed by the
  // client". Idempotent.
  virtual void Close() = 0;

  // False once the connection failed or was closed; later requests fail at once.
  virtual bool usable() const = 0;
};

// Makes an unconnected connection to `options.origin`. `addresses` are the numeric addresses of
// its host (see ResolveHost: resolved once for all connections), tried in order. `tls` is
// required for https origins (see MakeTlsContext) and must outlive the connection.
std::shared_ptr<Connection> MakeConnection(boost::asio::io_context& io,
                                           const ConnectionOptions& options,
                                           const std::vector<std::string>& addresses,
                                           boost::asio::ssl::context* tls);

// A TLS client context offering ALPN "h2" or "http/1.1" (per `version`). Verifies the server
// certificate and host name against the system's default roots plus `ca_file` (if not empty),
// unless `insecure`. Errors: InvalidArgument if `ca_file` cannot be loaded.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsContext(HttpVersion version,
                                                                  bool insecure,
                                                                  const std::string& ca_file);

// Resolves `host` (a name or a literal address) to numeric addresses, blocking. Errors:
// kUnavailable naming the host.
Result<std::vector<std::string>> ResolveHost(const std::string& host, uint16_t port);

}  // namespace kvc::loadgen
