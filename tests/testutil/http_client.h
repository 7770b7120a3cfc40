// Blocking HTTP/1.1 and HTTP/2 (h2c, prior knowledge) test clients.
//
// Used by the integration tests and the benchmark tool to drive a kvconnect server over plain TCP.
// Every blocking call is bounded by the client's timeout (default kDefaultTimeout), so a buggy
// server can fail a test but never hang it. Transport failures and timeouts are reported as
// kUnavailable; protocol violations (unparsable responses, stream resets) as kInternal.
//
// Ownership: each client owns its TCP connection. A StreamReader owns a dedicated connection of
// its own, so the client that opened it stays usable for other requests.
//
// Thread-safety: none of these classes is thread-safe; each object is used by one thread at a
// time. Distinct objects may be used from distinct threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codec/client_codec.h"
#include "common/status.h"

namespace kvc::testutil {

inline constexpr std::chrono::milliseconds kDefaultTimeout{10'000};

// A complete response. Header names are lowercase; repeated fields are joined with ", ".
// HTTP/2 trailers, if any, are merged into `headers`.
struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
};

// Request header fields in order. Names are sent as given over HTTP/1.1 and lowercased over
// HTTP/2.
using Headers = std::vector<std::pair<std::string, std::string>>;

// Reads a streaming response body incrementally. Status and headers are available as soon as the
// reader is returned. Destroying the reader cancels the stream: HTTP/2 sends RST_STREAM(CANCEL),
// HTTP/1.1 closes the socket.
class StreamReader {
 public:
  virtual ~StreamReader() = default;

  virtual int status() const = 0;
  virtual const std::map<std::string, std::string>& headers() const = 0;

  // Returns the next body bytes received, waiting up to `timeout`. Returns an empty string if
  // nothing arrived in time (the stream stays usable). Returns kUnavailable once the body has
  // ended (then finished() is true) or the connection failed, and kInternal if the peer reset
  // the stream or sent a malformed response.
  virtual Result<std::string> Read(std::chrono::milliseconds timeout) = 0;

  // True once the body ended cleanly (final chunk or END_STREAM) and every byte has been
  // returned by Read().
  virtual bool finished() const = 0;
};

// Splits a KV Connect watch body into frames (a u32 little-endian length, then that many bytes)
// with codec::WatchFrameSplitter, reading from `reader` as needed.
// Does not own `reader`. REQUIRES: `reader` outlives this object.
class FrameReader {
 public:
  // Frames longer than this are treated as a protocol error.
  static constexpr uint32_t kMaxFrameSize = 64u << 20;

  explicit FrameReader(StreamReader* reader) : reader_(reader), frames_(kMaxFrameSize) {}

  // Returns the next frame's payload (empty for a keep-alive frame), std::nullopt if no complete
  // frame arrived within `timeout`, or the reader's error. If the body ends inside a frame, or a
  // frame is longer than kMaxFrameSize, returns kInternal.
  Result<std::optional<std::string>> Next(std::chrono::milliseconds timeout);

 private:
  StreamReader* reader_;
  codec::WatchFrameSplitter frames_;
};

namespace internal {
class Http1Connection;
class Http2Connection;
}  // namespace internal

// HTTP/1.1 keep-alive client over one TCP connection (Boost.Beast). A request that fails or times
// out, or a response without keep-alive, closes the connection; later requests then return
// kUnavailable.
class Http1Client {
 public:
  // Connects to host:port. `timeout` bounds the connect and, later, every request.
  static Result<std::unique_ptr<Http1Client>> Connect(
      const std::string& host, uint16_t port, std::chrono::milliseconds timeout = kDefaultTimeout);

  ~Http1Client();
  Http1Client(const Http1Client&) = delete;
  Http1Client& operator=(const Http1Client&) = delete;

  // Sends one request and reads the complete response. Adds `Host` unless `headers` has one, and
  // `Content-Length` for a non-empty body or a method other than GET/HEAD, unless `headers` has
  // Content-Length or Transfer-Encoding. If writing the body fails because the server answered
  // early and closed (e.g. 413), returns that answer.
  Result<HttpResponse> Request(const std::string& method, const std::string& target,
                               const Headers& headers, const std::string& body);

  Result<HttpResponse> Post(const std::string& target, const Headers& headers,
                            const std::string& body) {
    return Request("POST", target, headers, body);
  }
  Result<HttpResponse> Get(const std::string& target, const Headers& headers = {}) {
    return Request("GET", target, headers, "");
  }

  // Writes `bytes` verbatim and returns whatever the server sends until it closes the connection
  // or `timeout` passes (an empty string if it sent nothing). For malformed-request tests. The
  // connection is closed afterwards.
  Result<std::string> SendRaw(const std::string& bytes, std::chrono::milliseconds timeout);

  // POSTs on a new connection and returns once the response head has arrived; the body is then
  // read incrementally (e.g. a chunked watch stream). This client stays usable.
  Result<std::unique_ptr<StreamReader>> OpenStream(const std::string& target,
                                                   const Headers& headers, const std::string& body);

  // Bounds each later blocking call.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  Http1Client(std::string host, uint16_t port, std::chrono::milliseconds timeout,
              std::unique_ptr<internal::Http1Connection> conn);

  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<internal::Http1Connection> conn_;  // null once closed
};

// HTTP/2 client with prior knowledge (h2c) over one TCP connection (nghttp2 client session).
// Supports many concurrent streams on the connection; nghttp2 queues requests beyond the
// server's SETTINGS_MAX_CONCURRENT_STREAMS and handles flow control. A stream reset (including
// streams refused by GOAWAY) fails that request with kInternal; a broken connection fails every
// pending request with kUnavailable (kInternal if the server violated the protocol) and the client
// stays unusable. A response that ends before the request body has been sent (e.g. an early 413)
// is returned at once; the rest of the body is still sent in the background unless the server
// resets the stream.
class Http2Client {
 public:
  // Connects, sends the connection preface and waits for the server's SETTINGS. `timeout`
  // bounds the connect and, later, every call.
  static Result<std::unique_ptr<Http2Client>> Connect(
      const std::string& host, uint16_t port, std::chrono::milliseconds timeout = kDefaultTimeout);

  ~Http2Client();  // sends GOAWAY(NO_ERROR) best-effort
  Http2Client(const Http2Client&) = delete;
  Http2Client& operator=(const Http2Client&) = delete;

  // Sends one request and waits for the complete response. Sends `content-length` for a
  // non-empty body or a method other than GET/HEAD, unless `headers` has one. On timeout, cancels
  // the stream with RST_STREAM(CANCEL) and returns kUnavailable; the connection stays usable.
  Result<HttpResponse> Request(const std::string& method, const std::string& path,
                               const Headers& headers, const std::string& body);

  Result<HttpResponse> Post(const std::string& path, const Headers& headers,
                            const std::string& body) {
    return Request("POST", path, headers, body);
  }

  // Submits all requests (path, headers, body) as POSTs at once on this connection and waits for
  // every response; responses are in request order. Fails if any stream fails. `timeout` bounds
  // the whole batch.
  Result<std::vector<HttpResponse>> PostMany(
      const std::vector<std::tuple<std::string, Headers, std::string>>& reqs);

  // POSTs on a new connection and returns once the response HEADERS have arrived; DATA is then
  // read incrementally. This client stays usable.
  Result<std::unique_ptr<StreamReader>> OpenStream(const std::string& path, const Headers& headers,
                                                   const std::string& body);

  // Bounds each later blocking call.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  Http2Client(std::string host, uint16_t port, std::chrono::milliseconds timeout,
              std::unique_ptr<internal::Http2Connection> conn);

  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<internal::Http2Connection> conn_;
};

}  // namespace kvc::testutil
