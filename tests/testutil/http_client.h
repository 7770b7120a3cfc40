// Blocking HTTP/1.1 and HTTP/2 (h2c, prior knowledge) test clients: a thin layer over the
// project's one client stack (client/connection.h), each client running its own io_context on
// the calling thread for the length of each call.
//
// Used by the integration tests to drive a kvconnect server over plain TCP. Every blocking call
// is bounded by the client's timeout (default kDefaultTimeout), so a buggy server can fail a test
// but never hang it. Transport failures and timeouts are reported as kUnavailable; protocol
// violations (unparsable responses, stream resets) as kInternal.
//
// Ownership: each client owns its connection. A StreamReader owns a dedicated connection of its
// own, so the client that opened it stays usable for other requests.
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
#include <vector>

#include "client/connection.h"
#include "codec/client_codec.h"
#include "common/status.h"

namespace kvc::testutil {

inline constexpr std::chrono::milliseconds kDefaultTimeout{10'000};

// A complete response. Header names are lowercase; repeated fields are joined with ", ".
// Trailers, if any, are merged into `headers`.
struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
};

// Request header fields in order. Names are sent as given over HTTP/1.1 and lowercased over
// HTTP/2.
using Headers = client::Headers;

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

class BlockingConnection;

// What both clients share: one connection, and the timeout that bounds each call.
class HttpClientBase {
 public:
  ~HttpClientBase();
  HttpClientBase(const HttpClientBase&) = delete;
  HttpClientBase& operator=(const HttpClientBase&) = delete;

  // Sends one request and waits for the complete response. Adds `content-length` for a
  // non-empty body or a method other than GET/HEAD unless `headers` has one (over HTTP/1.1 also
  // unless it has Transfer-Encoding), and over HTTP/1.1 `Host` unless `headers` has one.
  Result<HttpResponse> Request(const std::string& method, const std::string& target,
                               const Headers& headers, const std::string& body);

  Result<HttpResponse> Post(const std::string& target, const Headers& headers,
                            const std::string& body) {
    return Request("POST", target, headers, body);
  }

  // POSTs on a new connection and returns once the response head has arrived; the body is then
  // read incrementally (e.g. a watch stream). This client stays usable.
  Result<std::unique_ptr<StreamReader>> OpenStream(const std::string& target,
                                                   const Headers& headers, const std::string& body);

  // Bounds each later blocking call.
  void set_timeout(std::chrono::milliseconds timeout);

 protected:
  explicit HttpClientBase(std::unique_ptr<BlockingConnection> conn);

  // Connects to host:port within `timeout`, which also becomes the timeout of each call.
  static Result<std::unique_ptr<BlockingConnection>> Open(client::HttpVersion version,
                                                          const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout);

  std::unique_ptr<BlockingConnection> conn_;
};

}  // namespace internal

// HTTP/1.1 keep-alive client over one TCP connection. A request that fails or times out, or a
// response without keep-alive, closes the connection; later requests then return kUnavailable.
// If writing a body fails because the server answered early and closed (e.g. 413), Request()
// returns that answer.
class Http1Client : public internal::HttpClientBase {
 public:
  // Connects to host:port. `timeout` bounds the connect and, later, every request.
  static Result<std::unique_ptr<Http1Client>> Connect(
      const std::string& host, uint16_t port, std::chrono::milliseconds timeout = kDefaultTimeout);

  Result<HttpResponse> Get(const std::string& target, const Headers& headers = {}) {
    return Request("GET", target, headers, "");
  }

  // Writes `bytes` verbatim on a new TCP connection and returns whatever the server sends until
  // it closes the connection or `timeout` passes (an empty string if it sent nothing). For
  // malformed-request tests. Closes this client's own connection too.
  Result<std::string> SendRaw(const std::string& bytes, std::chrono::milliseconds timeout);

 private:
  using HttpClientBase::HttpClientBase;
};

// HTTP/2 client with prior knowledge (h2c) over one TCP connection. Supports many concurrent
// streams on the connection; nghttp2 queues requests beyond the server's
// SETTINGS_MAX_CONCURRENT_STREAMS and handles flow control. A stream reset (including streams
// refused by GOAWAY) fails that request with kInternal; a broken connection fails every pending
// request with kUnavailable (kInternal if the server violated the protocol) and the client stays
// unusable. A response that ends before the request body has been sent (e.g. an early 413) is
// returned at once; the rest of the body is still sent in the background unless the server
// resets the stream. A request that times out is cancelled with RST_STREAM(CANCEL) and returns
// kUnavailable; the connection stays usable. The destructor sends GOAWAY(NO_ERROR) and waits
// (briefly) for the server to close.
class Http2Client : public internal::HttpClientBase {
 public:
  // Connects, sends the connection preface and waits for the server's SETTINGS. `timeout`
  // bounds the connect and, later, every call.
  static Result<std::unique_ptr<Http2Client>> Connect(
      const std::string& host, uint16_t port, std::chrono::milliseconds timeout = kDefaultTimeout);

  // Submits all requests (path, headers, body) as POSTs at once on this connection and waits for
  // every response; responses are in request order. Fails if any stream fails. The timeout
  // bounds the whole batch.
  Result<std::vector<HttpResponse>> PostMany(
      const std::vector<std::tuple<std::string, Headers, std::string>>& reqs);

 private:
  using HttpClientBase::HttpClientBase;
};

}  // namespace kvc::testutil
