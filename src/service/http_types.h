// The protocol-neutral request/response types that both HTTP/1.1 and HTTP/2 sessions (net/)
// produce and consume, so handlers never know the HTTP version.
//
// Thread-safety: HttpRequest/HttpResponse are values. StreamSink implementations must be
// thread-safe (engine threads call them). StreamSource methods are called by the owning
// session: Start() once, then Cancel() exactly once when the stream ends for any reason.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvc::service {

using HeaderList = std::vector<std::pair<std::string, std::string>>;  // names lowercase

// A request's header fields in arrival order, stored flat: every name and value in one string,
// their places in one vector. Sessions append one field per header they receive; a request of a
// dozen headers costs two allocations where a HeaderList costs one per name or value longer than
// 15 bytes (Deno's data-path requests have six such). Iterating gives (name, value) views, valid
// until the next append. Names are lowercase (the sessions see to it).
class RequestHeaders {
 public:
  using Field = std::pair<std::string_view, std::string_view>;

  RequestHeaders() = default;
  // From literal fields or a HeaderList (tests, and callers building a request by hand).
  RequestHeaders(std::initializer_list<Field> fields) {  // NOLINT(google-explicit-constructor)
    for (const Field& f : fields) emplace_back(f.first, f.second);
  }
  RequestHeaders(const HeaderList& fields) {  // NOLINT(google-explicit-constructor)
    for (const auto& [name, value] : fields) emplace_back(name, value);
  }

  void emplace_back(std::string_view name, std::string_view value) {
    if (spans_.empty()) {
      spans_.reserve(kTypicalFields);
      bytes_.reserve(kTypicalBytes);
    }
    spans_.push_back(Span{bytes_.size(), name.size(), value.size()});
    bytes_.append(name).append(value);
  }
  bool empty() const { return spans_.empty(); }
  size_t size() const { return spans_.size(); }
  Field operator[](size_t i) const {
    const Span& s = spans_[i];
    const std::string_view all(bytes_);
    return {all.substr(s.at, s.name), all.substr(s.at + s.name, s.value)};
  }

  class Iterator {
   public:
    // NOLINTBEGIN(readability-identifier-naming): the standard's names for iterator traits
    using iterator_category = std::forward_iterator_tag;
    using value_type = Field;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Field;
    // NOLINTEND(readability-identifier-naming)
    Iterator(const RequestHeaders* h, size_t i) : h_(h), i_(i) {}
    Field operator*() const { return (*h_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator was = *this;
      ++i_;
      return was;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_ && h_ == o.h_; }
    bool operator!=(const Iterator& o) const { return !(*this == o); }

   private:
    const RequestHeaders* h_;
    size_t i_;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, spans_.size()}; }

 private:
  // Room for what HTTP clients usually send (Deno's data-path requests carry five to seven
  // fields besides the pseudo-headers, about 250 bytes); more grows as a vector does.
  static constexpr size_t kTypicalFields = 12;
  static constexpr size_t kTypicalBytes = 384;
  struct Span {
    size_t at;     // the name's first byte in bytes_; the value follows it
    size_t name;   // the name's length
    size_t value;  // the value's length
  };
  std::string bytes_;
  std::vector<Span> spans_;
};

struct HttpRequest {
  std::string method;
  std::string path;       // without the query string
  std::string query;      // after the '?', still percent-encoded (see query.h); empty if none
  std::string scheme;     // "http" or "https"
  std::string authority;  // host[:port] from :authority or Host
  RequestHeaders headers;
  std::string body;
  std::string peer;    // remote address, for logs
  bool http2 = false;  // which session produced it (for metrics)
  bool tls = false;
  // Set (by the session, on its thread) once the client went away before the answer: an HTTP/2
  // stream reset or closed, an HTTP/1.1 connection closed (plain TCP; seen through TLS only
  // when the connection breaks). Best effort, for handlers that wait long (queue pulls); may be
  // null.
  std::shared_ptr<const std::atomic<bool>> client_gone;
  // The path parameters the router captured for the endpoint's pattern ({name} -> value),
  // verbatim (no percent-decoding).
  std::vector<std::pair<std::string, std::string>> params;
  // The protocol this request asks to switch to that its session can complete (e.g.
  // "websocket": an HTTP/1.1 Upgrade or an HTTP/2 extended CONNECT, RFC 8441); empty when none.
  // Only then may a handler answer with a channel (channel.h). No session offers one yet.
  std::string upgrade;

  // A path parameter (Router), or empty.
  std::string_view Param(std::string_view name) const {
    for (const auto& [k, v] : params) {
      if (k == name) return v;
    }
    return {};
  }

  // First value of a header (name lowercase), or empty.
  std::string_view Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
  bool HasHeader(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return true;
    }
    return false;
  }
};

// Receives the bytes of a streaming response body. Thread-safe.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void Send(std::string bytes) = 0;
  // As Send, then calls `written` once the bytes have left the session's own buffer for the
  // transport (HTTP/2: once they were framed within the client's flow-control window), so a
  // source can bound what it has in flight. Never called if the stream ends first. `written`
  // runs on the session's thread (or inline, for sinks without a buffer) and must not block.
  virtual void SendThen(std::string bytes, const std::function<void()>& written) {
    Send(std::move(bytes));
    if (written) written();
  }
  // Ends the response body.
  virtual void Close() = 0;
  // Ends the response body as failed, so the client cannot take a cut-short body for a whole
  // one: HTTP/1.1 closes the connection without the final chunk, HTTP/2 resets the stream.
  virtual void Abort() { Close(); }
};

// Produces a streaming response body (e.g. watch frames).
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  virtual void Start(std::shared_ptr<StreamSink> sink) = 0;
  // The client went away or the server is shutting down; release resources. After Cancel()
  // returns, the source must not call the sink again.
  virtual void Cancel() = 0;
};

class Channel;  // channel.h

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  HeaderList headers;
  // Streaming responses: body is ignored; the session calls stream->Start and sends
  // `heartbeat` every `heartbeat_interval` (if non-empty) until the stream ends.
  std::shared_ptr<StreamSource> stream;
  std::string heartbeat;
  std::chrono::milliseconds heartbeat_interval{0};
  // Upgraded responses (channel.h): the session completes the switch the request asked for
  // (HttpRequest::upgrade) and then carries messages both ways through `channel`.
  std::shared_ptr<Channel> channel;
};

using Responder = std::function<void(HttpResponse)>;

// A request handler. Handle() must not block: slow work runs elsewhere and `respond` is then
// called from any thread, exactly once.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual void Handle(HttpRequest request, Responder respond) = 0;
};

}  // namespace kvc::service
