// Asynchronous HTTP client connections: HTTP/2 (nghttp2 client session, h2c with prior knowledge
// or TLS with ALPN "h2") and HTTP/1.1 keep-alive (Beast), over plain TCP or TLS, all behind one
// callback interface. The one client stack of the project: `kvconnect bench` drives it with many
// connections on a pool of io_contexts, the tests through blocking wrappers
// (tests/testutil/http_client.h).
//
// Ownership: a Connection is held by shared_ptr; every pending asynchronous operation holds a
// reference too, so it lives until its last handler ran. Close() ends it early.
// Thread-safety: none. A connection and all its callbacks run on the one io_context it was made
// with, whose run() is called by a single thread; call its methods only from that thread (post
// to the io_context from elsewhere). Completion callbacks (ResponseHandler, on_end, Connect's)
// are never invoked from inside the call that submitted the request.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/url.h"
#include "common/status.h"

namespace boost::asio {
class io_context;
namespace ssl {
class context;
}  // namespace ssl
}  // namespace boost::asio

namespace kvc::client {

enum class HttpVersion { kHttp1, kHttp2 };

// Header fields in order. Request names are sent as given: over HTTP/2 they must be lowercase
// (RFC 9113 §8.2.1; the client does not rewrite them on the hot path). Response names are
// lowercase over HTTP/2 and as the server sent them over HTTP/1.1.
using Headers = std::vector<std::pair<std::string, std::string>>;

// One request. `headers` may be shared between requests (the load generator sends the same
// ones with every data-path call) and may be null; `extra_headers` belong to this request alone.
// `content-length` is added unless a header sets it (or, over HTTP/1.1, Transfer-Encoding), for
// a non-empty body or a method other than GET and HEAD; over HTTP/1.1 `Host` is added unless a
// header sets it.
struct Request {
  std::string method = "POST";
  std::string path;
  std::shared_ptr<const Headers> headers;
  Headers extra_headers;
  std::string body;
};

// A response. `headers` and `trailers` are filled only when ConnectionOptions::keep_headers is
// set (the load generator needs none of them); HTTP/1.1 trailers of a chunked body come merged
// into `headers`.
struct Response {
  int status = 0;
  std::string content_type;
  Headers headers;
  Headers trailers;
  std::string body;
};

// Error codes passed to callbacks: kUnavailable for transport failures (connect, TLS, I/O, the
// peer closing, GOAWAY, Close(), Cancel()), kInternal for protocol failures (unparsable responses,
// HTTP/2 stream resets and connection errors), kPayloadTooLarge for responses over
// max_response_bytes, kInvalidArgument for a request that cannot be sent (empty method).
using ResponseHandler = std::function<void(Result<Response>)>;

// A streamed response: `on_head` once with the status, content type and (with keep_headers)
// headers, the body empty; then `on_data` for each piece of body as it arrives; then `on_end`
// exactly once (OK when the body ended cleanly). `on_end` may come without `on_head` if the
// request failed first. `on_head` and `on_data` run inside the connection's read handler and
// must not call back into the connection.
struct StreamHandlers {
  std::function<void(const Response& head)> on_head;
  std::function<void(std::string_view data)> on_data;
  std::function<void(Status)> on_end;
};

// Names a submitted request for Cancel(); 0 names none.
using RequestId = uint64_t;

struct ConnectionOptions {
  HttpVersion version = HttpVersion::kHttp2;
  Url origin;  // scheme, host and port; the path is unused
  std::chrono::milliseconds connect_timeout{10000};
  size_t max_response_bytes = 64u << 20;
  int32_t h2_stream_window = 1 << 20;       // our HTTP/2 receive window per stream
  int32_t h2_connection_window = 16 << 20;  // and per connection
  bool keep_headers = false;                // fill Response::headers and ::trailers
  // HTTP/2: after Close() has sent GOAWAY, half-close and read until the server closes, for at
  // most this long, so the kernel does not answer unread data with a TCP RST that could discard
  // our last frames. 0: close the socket at once.
  std::chrono::milliseconds close_linger{0};
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;

  // Connects (TCP, then TLS with ALPN when the origin is https; over HTTP/2 also waits for the
  // server's SETTINGS). `done` gets OK or kUnavailable/kInternal. REQUIRES: called once, first.
  virtual void Connect(std::function<void(Status)> done) = 0;

  // Sends a request and delivers the complete response. Over HTTP/2 any number may be in flight
  // (nghttp2 queues what exceeds the server's stream limit), and a response that ends before the
  // request body was sent (an early 413) is delivered at once while the body goes on unless the
  // server resets the stream; over HTTP/1.1 requests are queued and sent one at a time, and a
  // response the server sent before closing on a half-written body is still delivered. Returns
  // the request's id, or 0 if it failed at once (its handler is posted).
  virtual RequestId Send(Request request, ResponseHandler done) = 0;

  // Sends a request whose response body is delivered as it arrives (watch streams).
  virtual RequestId SendStreaming(Request request, StreamHandlers handlers) = 0;

  // Gives up on a request: if its handler has not been delivered, it gets kUnavailable
  // "cancelled by the client". Over HTTP/2 an open stream is reset with RST_STREAM(CANCEL) and
  // the connection stays usable; over HTTP/1.1 a queued request is dropped, while cancelling
  // the one on the wire closes the connection. Unknown or finished ids are ignored.
  virtual void Cancel(RequestId id) = 0;

  // Ends the connection: every request still pending fails with kUnavailable "closed by the
  // client". Over HTTP/2 sends GOAWAY(NO_ERROR) first. Idempotent.
  virtual void Close() = 0;

  // False once the connection failed, was closed or got GOAWAY; later requests fail at once.
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

}  // namespace kvc::client
