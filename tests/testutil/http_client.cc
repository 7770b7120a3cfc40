#include "testutil/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <functional>
#include <string_view>
#include <system_error>

namespace kvc::testutil {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Responses are buffered whole; this only guards against a runaway server.
constexpr uint64_t kMaxResponseBody = uint64_t{1} << 30;
// HTTP/2 receive windows: large enough for benchmark throughput, small enough that tests with
// multi-megabyte bodies still exercise WINDOW_UPDATE.
constexpr int32_t kHttp2StreamWindow = 1 << 20;
constexpr int32_t kHttp2ConnectionWindow = 4 << 20;
// Serialized HTTP/2 frames buffered before writing to the socket.
constexpr size_t kMaxPendingOutput = 64 * 1024;
// Upper bound on the graceful close of an HTTP/2 connection, so destructors stay fast.
constexpr std::chrono::milliseconds kMaxShutdownWait{1000};

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void AddHeader(std::map<std::string, std::string>& headers, std::string_view name,
               std::string_view value) {
  auto [it, inserted] = headers.try_emplace(ToLower(name), value);
  if (!inserted) {
    it->second.append(", ");
    it->second.append(value);
  }
}

bool MethodHasNoBody(const std::string& method) { return method == "GET" || method == "HEAD"; }

std::string Authority(const std::string& host, uint16_t port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// Milliseconds left until `deadline`, rounded up, clamped to [0, INT_MAX] for poll().
int PollTimeoutMs(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (now >= deadline) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

// Thread-safe, unlike strerror().
std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// Owns a file descriptor.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Returns a connected non-blocking TCP socket with TCP_NODELAY, or kUnavailable.
Result<ScopedFd> ConnectTcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs);
  if (gai != 0) return Unavailable("resolve " + host + ": " + ::gai_strerror(gai));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs_owner(addrs, &::freeaddrinfo);

  std::string last_error = "no addresses";
  for (addrinfo* ai = addrs; ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.get() < 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = ErrnoText(errno);
        continue;
      }
      pollfd pfd{fd.get(), POLLOUT, 0};
      int r;
      do {
        r = ::poll(&pfd, 1, PollTimeoutMs(deadline));
      } while (r < 0 && errno == EINTR);
      if (r <= 0) {
        last_error = r == 0 ? "connect timed out" : ErrnoText(errno);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        last_error = ErrnoText(err);
        continue;
      }
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return Unavailable("connect " + Authority(host, port) + ": " + last_error);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FrameReader

Result<std::optional<std::string>> FrameReader::Next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    Result<std::optional<std::string_view>> frame = frames_.Next();
    if (!frame.ok()) return Internal(frame.status().message());
    if (frame->has_value()) return std::optional<std::string>(std::string(**frame));
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    Result<std::string> chunk = reader_->Read(left);
    if (!chunk.ok()) {
      if (reader_->finished() && frames_.partial()) {
        return Internal("stream ended inside a watch frame");
      }
      return chunk.status();
    }
    if (chunk->empty()) {
      if (Clock::now() >= deadline) return std::optional<std::string>();
      continue;
    }
    frames_.Append(*chunk);
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1

namespace internal {

// One TCP connection driven by Asio's asynchronous operations on a private io_context, which
// lets every operation have a deadline while the caller blocks.
class Http1Connection {
 public:
  struct IoResult {
    beast::error_code ec;
    size_t bytes = 0;
    bool timed_out = false;
  };

  static Result<std::unique_ptr<Http1Connection>> Connect(const std::string& host, uint16_t port,
                                                          Clock::time_point deadline) {
    std::unique_ptr<Http1Connection> conn(new Http1Connection());
    tcp::resolver resolver(conn->ioc_);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (ec) return Unavailable("resolve " + host + ": " + ec.message());
    IoResult r = conn->Run(
        [&](auto handler) {
          asio::async_connect(
              conn->socket_, endpoints,
              [handler](beast::error_code e, const tcp::endpoint&) mutable { handler(e, 0); });
        },
        deadline);
    if (r.timed_out) return Unavailable("connect " + Authority(host, port) + ": timed out");
    if (r.ec) return Unavailable("connect " + Authority(host, port) + ": " + r.ec.message());
    conn->socket_.set_option(tcp::no_delay(true), ec);
    return conn;
  }

  ~Http1Connection() { Close(); }

  // Starts an asynchronous operation via `start(handler)` and runs it to completion or until
  // `deadline`, at which point it is cancelled and reported as timed out. A cancelled read
  // leaves buffered data and parser state intact, so the caller may retry.
  template <typename Start>
  IoResult Run(Start&& start, Clock::time_point deadline) {
    IoResult result;
    bool done = false;
    start([&result, &done](beast::error_code ec, size_t n) {
      done = true;
      result.ec = ec;
      result.bytes = n;
    });
    ioc_.restart();
    ioc_.run_until(deadline);
    if (!done) {
      beast::error_code ignored;
      socket_.cancel(ignored);
      ioc_.restart();
      ioc_.run();
      // The operation may have completed just before the cancellation took effect.
      if (result.ec == asio::error::operation_aborted) result.timed_out = true;
    }
    return result;
  }

  tcp::socket& socket() { return socket_; }
  beast::flat_buffer& buffer() { return buffer_; }

  void Close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  Http1Connection() = default;

  asio::io_context ioc_{1};
  tcp::socket socket_{ioc_};
  beast::flat_buffer buffer_;  // bytes read but not yet parsed
};

}  // namespace internal

namespace {

using internal::Http1Connection;

Status Http1Error(const std::string& what, const Http1Connection::IoResult& r) {
  if (r.timed_out) return Unavailable("HTTP/1.1 " + what + ": timed out");
  // Beast's parser errors mean a malformed response; the rest are transport failures.
  const bool parse_error =
      r.ec.category() == beast::error_code(http::error::bad_target).category() &&
      r.ec != http::error::end_of_stream && r.ec != http::error::partial_message;
  if (parse_error) return Internal("HTTP/1.1 " + what + ": " + r.ec.message());
  return Unavailable("HTTP/1.1 " + what + ": " + r.ec.message());
}

Status WriteHttp1Request(Http1Connection& conn, const std::string& host, uint16_t port,
                         const std::string& method, const std::string& target,
                         const Headers& headers, const std::string& body,
                         Clock::time_point deadline) {
  if (method.empty()) return InvalidArgument("empty HTTP method");
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  bool has_length = false;
  for (const auto& [name, value] : headers) {
    req.insert(name, value);
    const std::string lower = ToLower(name);
    if (lower == "content-length" || lower == "transfer-encoding") has_length = true;
  }
  if (req.find(http::field::host) == req.end()) req.set(http::field::host, Authority(host, port));
  req.body() = body;
  if (!has_length && (!body.empty() || !MethodHasNoBody(method))) {
    req.content_length(body.size());
  }
  Http1Connection::IoResult r = conn.Run(
      [&](auto handler) { http::async_write(conn.socket(), req, std::move(handler)); }, deadline);
  if (r.timed_out || r.ec) return Http1Error("write", r);
  return Status::Ok();
}

template <typename Fields>
std::map<std::string, std::string> CollectHeaders(const Fields& fields) {
  std::map<std::string, std::string> out;
  for (const auto& field : fields) {
    AddHeader(out, std::string_view(field.name_string().data(), field.name_string().size()),
              std::string_view(field.value().data(), field.value().size()));
  }
  return out;
}

// Reads a response body incrementally from a dedicated HTTP/1.1 connection.
class Http1StreamReader : public StreamReader {
 public:
  explicit Http1StreamReader(std::unique_ptr<Http1Connection> conn) : conn_(std::move(conn)) {
    parser_.body_limit(boost::none);
  }
  ~Http1StreamReader() override { conn_->Close(); }

  // Reads the response head. REQUIRES: the request has been written.
  Status ReadHead(Clock::time_point deadline) {
    Http1Connection::IoResult r = conn_->Run(
        [&](auto handler) {
          http::async_read_header(conn_->socket(), conn_->buffer(), parser_, std::move(handler));
        },
        deadline);
    if (r.timed_out || r.ec) return Http1Error("read response head", r);
    status_ = parser_.get().result_int();
    headers_ = CollectHeaders(parser_.get());
    return Status::Ok();
  }

  int status() const override { return status_; }
  const std::map<std::string, std::string>& headers() const override { return headers_; }
  bool finished() const override { return finished_; }

  Result<std::string> Read(std::chrono::milliseconds timeout) override {
    if (!failure_.ok()) return failure_;
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (parser_.is_done()) {
        finished_ = true;
        return Unavailable("end of stream");
      }
      char buf[16 * 1024];
      auto& body = parser_.get().body();
      body.data = buf;
      body.size = sizeof(buf);
      Http1Connection::IoResult r = conn_->Run(
          [&](auto handler) {
            http::async_read_some(conn_->socket(), conn_->buffer(), parser_, std::move(handler));
          },
          deadline);
      const size_t n = sizeof(buf) - body.size;
      body.data = nullptr;
      body.size = 0;
      if (r.ec == http::error::need_buffer) r.ec = {};
      if (n > 0) return std::string(buf, n);
      if (r.timed_out) return std::string();
      if (r.ec) {
        failure_ = Http1Error("read response body", r);
        return failure_;
      }
    }
  }

 private:
  std::unique_ptr<Http1Connection> conn_;
  http::response_parser<http::buffer_body> parser_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  bool finished_ = false;
  Status failure_;
};

}  // namespace

Http1Client::Http1Client(std::string host, uint16_t port, std::chrono::milliseconds timeout,
                         std::unique_ptr<internal::Http1Connection> conn)
    : host_(std::move(host)), port_(port), timeout_(timeout), conn_(std::move(conn)) {}

Http1Client::~Http1Client() = default;

Result<std::unique_ptr<Http1Client>> Http1Client::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  KVC_ASSIGN_OR_RETURN(auto conn, Http1Connection::Connect(host, port, Clock::now() + timeout));
  return std::unique_ptr<Http1Client>(new Http1Client(host, port, timeout, std::move(conn)));
}

Result<HttpResponse> Http1Client::Request(const std::string& method, const std::string& target,
                                          const Headers& headers, const std::string& body) {
  if (!conn_) return Unavailable("HTTP/1.1 connection is closed");
  const auto deadline = Clock::now() + timeout_;
  const Status written =
      WriteHttp1Request(*conn_, host_, port_, method, target, headers, body, deadline);
  if (written.code() == StatusCode::kInvalidArgument) return written;
  // If the write failed, the server may still have answered early (e.g. 413) before closing,
  // so try to read a response anyway; the connection is closed afterwards.
  if (!written.ok()) {
    beast::error_code ignored;
    conn_->socket().shutdown(tcp::socket::shutdown_send, ignored);
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxResponseBody);
  if (method == "HEAD") parser.skip(true);
  Http1Connection::IoResult r = conn_->Run(
      [&](auto handler) {
        http::async_read(conn_->socket(), conn_->buffer(), parser, std::move(handler));
      },
      deadline);
  if (r.timed_out || r.ec) {
    conn_.reset();
    return written.ok() ? Http1Error("read response", r) : written;
  }
  http::response<http::string_body> res = parser.release();
  HttpResponse out;
  out.status = res.result_int();
  out.headers = CollectHeaders(res);
  out.body = std::move(res.body());
  if (!written.ok() || !res.keep_alive()) conn_.reset();
  return out;
}

Result<std::string> Http1Client::SendRaw(const std::string& bytes,
                                         std::chrono::milliseconds timeout) {
  if (!conn_) return Unavailable("HTTP/1.1 connection is closed");
  std::unique_ptr<Http1Connection> conn = std::move(conn_);
  const auto deadline = Clock::now() + timeout;
  // A write error is not fatal: the server may reject the request before reading all of it.
  conn->Run(
      [&](auto handler) {
        asio::async_write(conn->socket(), asio::buffer(bytes), std::move(handler));
      },
      deadline);
  std::string out;
  auto& buffer = conn->buffer();
  out.append(static_cast<const char*>(buffer.data().data()), buffer.size());
  while (true) {
    char buf[4096];
    Http1Connection::IoResult r = conn->Run(
        [&](auto handler) {
          conn->socket().async_read_some(asio::buffer(buf), std::move(handler));
        },
        deadline);
    out.append(buf, r.bytes);
    if (r.timed_out || r.ec) break;
  }
  return out;
}

Result<std::unique_ptr<StreamReader>> Http1Client::OpenStream(const std::string& target,
                                                              const Headers& headers,
                                                              const std::string& body) {
  const auto deadline = Clock::now() + timeout_;
  KVC_ASSIGN_OR_RETURN(auto conn, Http1Connection::Connect(host_, port_, deadline));
  KVC_RETURN_IF_ERROR(
      WriteHttp1Request(*conn, host_, port_, "POST", target, headers, body, deadline));
  auto reader = std::make_unique<Http1StreamReader>(std::move(conn));
  KVC_RETURN_IF_ERROR(reader->ReadHead(deadline));
  return std::unique_ptr<StreamReader>(std::move(reader));
}

// ---------------------------------------------------------------------------------------------
// HTTP/2

namespace internal {

// One h2c connection: a non-blocking socket driven by poll() and an nghttp2 client session fed
// through nghttp2_session_mem_recv/mem_send. Streams live in `streams_` from submission until the
// caller takes the response (or, for abandoned streams, until nghttp2 closes them).
class Http2Connection {
 public:
  struct Stream {
    std::string request_body;
    size_t request_offset = 0;
    int status = 0;
    std::map<std::string, std::string> headers;
    bool headers_done = false;  // final (non-1xx) response HEADERS received
    std::string body;           // DATA received and not yet consumed
    bool end_stream = false;    // END_STREAM received: the response is complete
    bool closed = false;        // nghttp2 closed the stream (or never opened it)
    uint32_t error_code = 0;    // from RST_STREAM / GOAWAY when closed abnormally
    std::string failure;        // set if the request could not be sent
    bool abandoned = false;     // the caller gave up; erase once closed

    // The response is complete, or will never be. A response may end before the request body
    // has been sent (e.g. an early 413); the rest of the body is then still sent unless the
    // server resets the stream.
    bool done() const { return end_stream || closed; }
  };

  static Result<std::unique_ptr<Http2Connection>> Connect(const std::string& host, uint16_t port,
                                                          Clock::time_point deadline) {
    KVC_ASSIGN_OR_RETURN(ScopedFd fd, ConnectTcp(host, port, deadline));
    std::unique_ptr<Http2Connection> conn(
        new Http2Connection(std::move(fd), Authority(host, port)));
    KVC_RETURN_IF_ERROR(conn->Init());
    KVC_ASSIGN_OR_RETURN(bool ready, conn->Pump([&] { return conn->got_settings_; }, deadline));
    if (!ready) return Unavailable("HTTP/2: timed out waiting for the server's SETTINGS");
    return conn;
  }

  ~Http2Connection() {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  // Submits a request and returns its stream id. Fails if the connection is broken or the
  // server sent GOAWAY.
  Result<int32_t> Submit(const std::string& method, const std::string& path, const Headers& headers,
                         const std::string& body) {
    if (!broken_.ok()) return broken_;
    if (goaway_) return Unavailable("HTTP/2: server sent GOAWAY");
    if (method.empty()) return InvalidArgument("empty HTTP method");
    std::vector<std::pair<std::string, std::string>> fields = {
        {":method", method}, {":scheme", "http"}, {":authority", authority_}, {":path", path}};
    bool has_length = false;
    for (const auto& [name, value] : headers) {
      std::string lower = ToLower(name);
      if (lower == "content-length") has_length = true;
      fields.emplace_back(std::move(lower), value);
    }
    if (!has_length && (!body.empty() || !MethodHasNoBody(method))) {
      fields.emplace_back("content-length", std::to_string(body.size()));
    }
    std::vector<nghttp2_nv> nva;
    nva.reserve(fields.size());
    for (auto& [name, value] : fields) {
      // nghttp2 copies the fields; the casts only satisfy its non-const C signature.
      nva.push_back({reinterpret_cast<uint8_t*>(name.data()),
                     reinterpret_cast<uint8_t*>(value.data()), name.size(), value.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    auto stream = std::make_unique<Stream>();
    stream->request_body = body;
    nghttp2_data_provider provider{};
    provider.source.ptr = stream.get();
    provider.read_callback = &Http2Connection::ReadRequestBody;
    const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                              body.empty() ? nullptr : &provider, nullptr);
    if (id < 0) return Internal(std::string("nghttp2_submit_request: ") + nghttp2_strerror(id));
    streams_[id] = std::move(stream);
    return id;
  }

  // Exchanges frames until `done()` holds (returns true), `deadline` passes (returns false), or
  // the connection fails (returns kUnavailable / kInternal). Checks `done()` first, so data
  // received before a failure is still seen. Always makes at least one non-blocking attempt.
  Result<bool> Pump(const std::function<bool()>& done, Clock::time_point deadline) {
    while (true) {
      if (done()) return true;
      if (!broken_.ok()) return broken_;
      FillOutput();
      if (!broken_.ok()) continue;
      if (WriteOutput() || !broken_.ok()) continue;  // re-check done(); serialize more
      const bool want_write = out_offset_ < out_.size();
      if (!want_write && nghttp2_session_want_read(session_) == 0) {
        Fail(protocol_error_.empty() ? Unavailable("HTTP/2: session finished")
                                     : Internal("HTTP/2: session terminated: " + protocol_error_));
        continue;
      }
      pollfd pfd{fd_.get(), static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0};
      const int r = ::poll(&pfd, 1, PollTimeoutMs(deadline));
      if (r < 0) {
        if (errno != EINTR) Fail(Unavailable("poll: " + ErrnoText(errno)));
        continue;
      }
      if (r == 0) {
        if (Clock::now() >= deadline) return false;
        continue;
      }
      if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) != 0) ReadInput();
    }
  }

  Stream* Find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  // Returns the response of a stream that is done() and forgets the stream.
  Result<HttpResponse> TakeResponse(int32_t id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return Internal("HTTP/2: unknown stream");
    Stream* s = it->second.get();
    Result<HttpResponse> result = MoveResponse(id, *s);
    if (s->closed || !broken_.ok()) {
      streams_.erase(it);
    } else {
      s->abandoned = true;  // nghttp2 may still read the request body; erase once closed
    }
    return result;
  }

  // Gives up on a stream: cancels it with RST_STREAM(CANCEL) if still open, and forgets it.
  void Abandon(int32_t id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    if (it->second->closed || !broken_.ok()) {
      streams_.erase(it);
      return;
    }
    it->second->abandoned = true;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }

  // Sends GOAWAY(NO_ERROR) and whatever else is queued, half-closes the socket and waits for the
  // server to close, all by `deadline`. Draining before close() keeps the kernel from answering
  // with a TCP RST, which could discard our last frames before the server reads them.
  void Shutdown(Clock::time_point deadline) {
    if (!broken_.ok()) return;
    auto flushed = [&] {
      return nghttp2_session_want_write(session_) == 0 && out_offset_ == out_.size();
    };
    // Flush queued frames (e.g. RST_STREAM) first: once nghttp2 has sent the terminating
    // GOAWAY it sends nothing more.
    Result<bool> sent = Pump(flushed, deadline);
    if (!sent.ok() || !*sent) return;
    nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
    sent = Pump(flushed, deadline);
    if (!sent.ok() || !*sent) return;
    ::shutdown(fd_.get(), SHUT_WR);
    while (true) {
      pollfd pfd{fd_.get(), POLLIN, 0};
      const int r = ::poll(&pfd, 1, PollTimeoutMs(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return;
      char buf[4096];
      const ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) return;
    }
  }

  static Result<HttpResponse> MoveResponse(int32_t id, Stream& s) {
    if (!s.failure.empty()) return Unavailable(s.failure);
    if (!s.end_stream) return Internal(ResetMessage(id, s.error_code));
    HttpResponse out;
    out.status = s.status;
    out.headers = std::move(s.headers);
    out.body = std::move(s.body);
    return out;
  }

  static std::string ResetMessage(int32_t id, uint32_t error_code) {
    return "HTTP/2 stream " + std::to_string(id) + " closed before the response ended (" +
           nghttp2_http2_strerror(error_code) + ")";
  }

 private:
  Http2Connection(ScopedFd fd, std::string authority)
      : fd_(std::move(fd)), authority_(std::move(authority)) {}

  Status Init() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return Internal("nghttp2: out of memory");
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunkRecv);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, &OnFrameNotSend);
    nghttp2_session_callbacks_set_error_callback2(callbacks, &OnError);
    const int rv = nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    if (rv != 0)
      return Internal(std::string("nghttp2_session_client_new: ") + nghttp2_strerror(rv));
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kHttp2StreamWindow)},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0 ||
        nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                              kHttp2ConnectionWindow) != 0) {
      return Internal("nghttp2: cannot submit SETTINGS");
    }
    return Status::Ok();
  }

  void Fail(Status status) {
    if (broken_.ok()) broken_ = std::move(status);
  }

  // Serializes queued frames into out_, up to kMaxPendingOutput.
  void FillOutput() {
    if (out_offset_ == out_.size()) {
      out_.clear();
      out_offset_ = 0;
    }
    while (out_.size() - out_offset_ < kMaxPendingOutput) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        Fail(Internal(std::string("nghttp2_session_mem_send: ") +
                      nghttp2_strerror(static_cast<int>(n))));
        return;
      }
      if (n == 0) return;
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
  }

  // Writes as much of out_ as the socket accepts without blocking. Returns whether it wrote
  // anything.
  bool WriteOutput() {
    bool wrote = false;
    while (out_offset_ < out_.size()) {
      const ssize_t n = ::send(fd_.get(), out_.data() + out_offset_, out_.size() - out_offset_,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          Fail(Unavailable("HTTP/2 send: " + ErrnoText(errno)));
        }
        return false;
      }
      out_offset_ += static_cast<size_t>(n);
      wrote = true;
    }
    return wrote;
  }

  void ReadInput() {
    uint8_t buf[64 * 1024];
    const ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Fail(Unavailable("HTTP/2 recv: " + ErrnoText(errno)));
      }
      return;
    }
    if (n == 0) {
      Fail(Unavailable("HTTP/2: connection closed by the server"));
      return;
    }
    const ssize_t rv = nghttp2_session_mem_recv(session_, buf, static_cast<size_t>(n));
    if (rv < 0) {
      Fail(Internal(std::string("HTTP/2: bad data from the server: ") +
                    nghttp2_strerror(static_cast<int>(rv))));
    }
  }

  static Http2Connection* Self(void* user_data) { return static_cast<Http2Connection*>(user_data); }

  static ssize_t ReadRequestBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                                 uint32_t* data_flags, nghttp2_data_source* source, void*) {
    auto* s = static_cast<Stream*>(source->ptr);
    const size_t n = std::min(length, s->request_body.size() - s->request_offset);
    std::memcpy(buf, s->request_body.data() + s->request_offset, n);
    s->request_offset += n;
    if (s->request_offset == s->request_body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                      void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* s = Self(user_data)->Find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      // Each response head (1xx or final) starts afresh.
      s->headers.clear();
      s->status = 0;
      std::from_chars(v.data(), v.data() + v.size(), s->status);
    } else if (!n.empty() && n[0] != ':') {
      AddHeader(s->headers, n, v);
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    Http2Connection* self = Self(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: {
        Stream* s = self->Find(frame->hd.stream_id);
        if (s == nullptr) break;
        if (frame->hd.type == NGHTTP2_HEADERS && s->status >= 200) s->headers_done = true;
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) s->end_stream = true;
        break;
      }
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) self->got_settings_ = true;
        break;
      case NGHTTP2_GOAWAY:
        // nghttp2 itself closes our streams above last_stream_id with REFUSED_STREAM.
        self->goaway_ = true;
        break;
      default:
        break;
    }
    return 0;
  }

  static int OnDataChunkRecv(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                             size_t len, void* user_data) {
    Stream* s = Self(user_data)->Find(stream_id);
    if (s != nullptr && !s->abandoned) s->body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                           void* user_data) {
    Http2Connection* self = Self(user_data);
    auto it = self->streams_.find(stream_id);
    if (it == self->streams_.end()) return 0;
    if (it->second->abandoned) {
      self->streams_.erase(it);
      return 0;
    }
    it->second->closed = true;
    it->second->error_code = error_code;
    return 0;
  }

  static int OnFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int lib_error_code,
                            void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Http2Connection* self = Self(user_data);
    auto it = self->streams_.find(frame->hd.stream_id);
    if (it == self->streams_.end()) return 0;
    if (it->second->abandoned) {
      self->streams_.erase(it);
      return 0;
    }
    it->second->closed = true;
    it->second->failure =
        std::string("HTTP/2: request not sent: ") + nghttp2_strerror(lib_error_code);
    return 0;
  }

  // nghttp2's description of the last protocol error it detected, for error messages.
  static int OnError(nghttp2_session*, int, const char* msg, size_t len, void* user_data) {
    Self(user_data)->protocol_error_.assign(msg, len);
    return 0;
  }

  ScopedFd fd_;
  std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::map<int32_t, std::unique_ptr<Stream>> streams_;
  std::string out_;  // serialized frames; out_[out_offset_..] not yet written
  size_t out_offset_ = 0;
  bool got_settings_ = false;
  bool goaway_ = false;
  std::string protocol_error_;
  Status broken_;  // first connection-level failure; the session is unusable after it
};

}  // namespace internal

namespace {

using internal::Http2Connection;

// Reads one response's DATA incrementally from a dedicated HTTP/2 connection.
class Http2StreamReader : public StreamReader {
 public:
  Http2StreamReader(std::unique_ptr<Http2Connection> conn, int32_t id,
                    std::chrono::milliseconds timeout)
      : conn_(std::move(conn)), id_(id), timeout_(timeout) {
    const Http2Connection::Stream* s = conn_->Find(id_);
    status_ = s->status;
    headers_ = s->headers;
  }

  ~Http2StreamReader() override {
    conn_->Abandon(id_);
    conn_->Shutdown(Clock::now() + std::min<std::chrono::milliseconds>(timeout_, kMaxShutdownWait));
  }

  int status() const override { return status_; }
  const std::map<std::string, std::string>& headers() const override { return headers_; }
  bool finished() const override { return finished_; }

  Result<std::string> Read(std::chrono::milliseconds timeout) override {
    Http2Connection::Stream* s = conn_->Find(id_);
    auto has_news = [s] { return !s->body.empty() || s->end_stream || s->closed; };
    KVC_ASSIGN_OR_RETURN(const bool ready, conn_->Pump(has_news, Clock::now() + timeout));
    if (!ready) return std::string();
    if (!s->body.empty()) return std::exchange(s->body, std::string());
    if (s->end_stream) {
      finished_ = true;
      return Unavailable("end of stream");
    }
    return Internal(Http2Connection::ResetMessage(id_, s->error_code));
  }

 private:
  std::unique_ptr<Http2Connection> conn_;
  int32_t id_;
  std::chrono::milliseconds timeout_;
  int status_ = 0;
  std::map<std::string, std::string> headers_;
  bool finished_ = false;
};

}  // namespace

Http2Client::Http2Client(std::string host, uint16_t port, std::chrono::milliseconds timeout,
                         std::unique_ptr<internal::Http2Connection> conn)
    : host_(std::move(host)), port_(port), timeout_(timeout), conn_(std::move(conn)) {}

Http2Client::~Http2Client() {
  conn_->Shutdown(Clock::now() + std::min<std::chrono::milliseconds>(timeout_, kMaxShutdownWait));
}

Result<std::unique_ptr<Http2Client>> Http2Client::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  KVC_ASSIGN_OR_RETURN(auto conn, Http2Connection::Connect(host, port, Clock::now() + timeout));
  return std::unique_ptr<Http2Client>(new Http2Client(host, port, timeout, std::move(conn)));
}

Result<HttpResponse> Http2Client::Request(const std::string& method, const std::string& path,
                                          const Headers& headers, const std::string& body) {
  const auto deadline = Clock::now() + timeout_;
  KVC_ASSIGN_OR_RETURN(const int32_t id, conn_->Submit(method, path, headers, body));
  Http2Connection::Stream* s = conn_->Find(id);
  Result<bool> done = conn_->Pump([s] { return s->done(); }, deadline);
  if (!done.ok() || !*done) {
    conn_->Abandon(id);
    if (!done.ok()) return done.status();
    return Unavailable("HTTP/2: timed out waiting for the response to " + path);
  }
  return conn_->TakeResponse(id);
}

Result<std::vector<HttpResponse>> Http2Client::PostMany(
    const std::vector<std::tuple<std::string, Headers, std::string>>& reqs) {
  const auto deadline = Clock::now() + timeout_;
  std::vector<int32_t> ids;
  ids.reserve(reqs.size());
  auto abandon_all = [&] {
    for (int32_t id : ids) conn_->Abandon(id);
  };
  for (const auto& [path, headers, body] : reqs) {
    Result<int32_t> id = conn_->Submit("POST", path, headers, body);
    if (!id.ok()) {
      abandon_all();
      return id.status();
    }
    ids.push_back(*id);
  }
  Result<bool> done = conn_->Pump(
      [&] {
        return std::all_of(ids.begin(), ids.end(),
                           [&](int32_t id) { return conn_->Find(id)->done(); });
      },
      deadline);
  if (!done.ok() || !*done) {
    abandon_all();
    if (!done.ok()) return done.status();
    return Unavailable("HTTP/2: timed out waiting for " + std::to_string(reqs.size()) +
                       " responses");
  }
  std::vector<HttpResponse> out;
  out.reserve(ids.size());
  Status first_error;
  for (int32_t id : ids) {
    Result<HttpResponse> r = conn_->TakeResponse(id);
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    out.push_back(std::move(r).value());
  }
  if (!first_error.ok()) return first_error;
  return out;
}

Result<std::unique_ptr<StreamReader>> Http2Client::OpenStream(const std::string& path,
                                                              const Headers& headers,
                                                              const std::string& body) {
  const auto deadline = Clock::now() + timeout_;
  KVC_ASSIGN_OR_RETURN(auto conn, Http2Connection::Connect(host_, port_, deadline));
  KVC_ASSIGN_OR_RETURN(const int32_t id, conn->Submit("POST", path, headers, body));
  Http2Connection::Stream* s = conn->Find(id);
  KVC_ASSIGN_OR_RETURN(bool ready,
                       conn->Pump([s] { return s->headers_done || s->closed; }, deadline));
  if (!ready) return Unavailable("HTTP/2: timed out waiting for the response head of " + path);
  if (!s->headers_done) {
    Result<HttpResponse> failed = conn->TakeResponse(id);
    return failed.ok() ? Internal("HTTP/2: response without a final status") : failed.status();
  }
  return std::unique_ptr<StreamReader>(
      std::make_unique<Http2StreamReader>(std::move(conn), id, timeout_));
}

}  // namespace kvc::testutil
