// Self-test of the HTTP/1.1 and HTTP/2 test clients against small fixture servers that live in
// this file: a synchronous Beast server (thread per connection) and an nghttp2 server session
// over blocking-accepted sockets (thread per connection).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "testutil/closed_port.h"
#include "testutil/http_client.h"

namespace kvc::testutil {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A KV Connect watch frame: u32 little-endian length, then the payload.
std::string Frame(const std::string& payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + payload;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) % 251);
  return s;
}

// Signals an event to a waiting test thread.
class Notification {
 public:
  void Notify() {
    MutexLock lock(mu_);
    ++count_;
    cv_.NotifyAll();
  }
  bool WaitFor(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    MutexLock lock(mu_);
    while (count_ == 0) {
      if (!cv_.WaitUntil(mu_, deadline)) return count_ > 0;
    }
    return true;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int count_ KVC_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 fixture server. Targets:
//   /echo...      200, body echoed, x-method / x-target / x-echo (request's x-echo) headers
//   /close        200 with Connection: close
//   /slow         2 s delay (cut short when the server stops), then 200
//   /status/404   404
//   /early        413 and close, without reading the request body
//   /stream       chunked: frame "one", a keep-alive frame, frame "two" split over two chunks
//   /stream?hold  as /stream but never ends; notifies stream_closed() when the client closes
class Http1TestServer {
 public:
  Http1TestServer() : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    acceptor_.non_blocking(true);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~Http1TestServer() {
    stop_ = true;
    accept_thread_.join();
    {
      MutexLock lock(mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // unblocks reads in Serve()
    }
    for (std::thread& t : conn_threads_) t.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return connections_; }
  Notification& stream_closed() { return stream_closed_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd pfd{acceptor_.native_handle(), POLLIN, 0};
      if (::poll(&pfd, 1, 20) <= 0) continue;
      tcp::socket socket(ioc_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec) continue;
      ++connections_;
      {
        MutexLock lock(mu_);
        open_fds_.insert(socket.native_handle());
      }
      conn_threads_.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
    }
  }

  void Serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    while (true) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      beast::error_code ec;
      http::read_header(socket, buffer, parser, ec);
      if (!ec && parser.get().target() == "/early") {
        // Rejects the request without reading its body, then closes.
        http::response<http::string_body> res{http::status::payload_too_large, 11};
        res.keep_alive(false);
        res.body() = "too large";
        res.prepare_payload();
        http::write(socket, res, ec);
        break;
      }
      if (!ec) http::read(socket, buffer, parser, ec);
      if (ec == http::error::end_of_stream || ec == asio::error::connection_reset) break;
      if (ec) {
        http::response<http::string_body> res{http::status::bad_request, 11};
        res.keep_alive(false);
        res.body() = "bad request: " + ec.message();
        res.prepare_payload();
        http::write(socket, res, ec);
        break;
      }
      if (!Handle(socket, parser.get())) break;
    }
    {
      MutexLock lock(mu_);
      open_fds_.erase(socket.native_handle());
    }
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  // Answers one request; returns whether to keep the connection open.
  bool Handle(tcp::socket& socket, const http::request<http::string_body>& req) {
    beast::error_code ec;
    const std::string target(req.target());
    if (target.rfind("/stream", 0) == 0) {
      http::response<http::empty_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "application/octet-stream");
      res.chunked(true);
      http::response_serializer<http::empty_body> sr{res};
      http::write_header(socket, sr, ec);
      const std::string two = Frame("two");
      for (const std::string& piece : {Frame("one"), Frame(""), two.substr(0, 5), two.substr(5)}) {
        std::this_thread::sleep_for(milliseconds(20));
        asio::write(socket, http::make_chunk(asio::buffer(piece)), ec);
        if (ec) return false;
      }
      if (target == "/stream?hold") {
        char byte;
        socket.read_some(asio::buffer(&byte, 1), ec);  // returns when the client closes
        if (ec) stream_closed_.Notify();
        return false;
      }
      asio::write(socket, http::make_chunk_last(), ec);
      return !ec && req.keep_alive();
    }
    http::response<http::string_body> res{http::status::ok, 11};
    res.keep_alive(req.keep_alive());
    if (target == "/slow") {
      const auto until = Clock::now() + std::chrono::seconds(2);
      while (!stop_ && Clock::now() < until) std::this_thread::sleep_for(milliseconds(10));
      res.body() = "slow";
    } else if (target == "/close") {
      res.keep_alive(false);
      res.body() = "bye";
    } else if (target == "/status/404") {
      res.result(http::status::not_found);
      res.body() = "not found";
    } else {
      res.set("x-method", req.method_string());
      res.set("x-target", req.target());
      if (req.count("x-echo") > 0) res.set("x-echo", req["x-echo"]);
      res.body() = req.body();
    }
    res.prepare_payload();
    http::write(socket, res, ec);
    return !ec && res.keep_alive();
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  std::vector<std::thread> conn_threads_;  // touched only by the accept thread until joined
  Mutex mu_;
  std::set<int> open_fds_ KVC_GUARDED_BY(mu_);
  Notification stream_closed_;
};

// ---------------------------------------------------------------------------------------------
// HTTP/2 fixture server (h2c prior knowledge). Paths:
//   /echo         200, body echoed, x-method / x-path / x-echo headers
//   /delay/<ms>   200 after <ms>, body "delayed <ms>"
//   /slow         200 after 2 s
//   /status/404   404
//   /early        413 as soon as the request HEADERS arrive, before the body
//   /reset        RST_STREAM(INTERNAL_ERROR)
//   /goaway       GOAWAY refusing this stream, then closes the connection
//   /stream       frames as in the HTTP/1.1 server, in separate DATA frames, then END_STREAM
//   /stream?hold  as /stream but never ends
// Records RST_STREAM(CANCEL) from clients and the peak number of concurrently open streams.
class Http2TestServer {
 public:
  Http2TestServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 64) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen: " << std::strerror(errno);
    }
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~Http2TestServer() {
    stop_ = true;
    accept_thread_.join();
    for (std::thread& t : conn_threads_) t.join();
    ::close(listen_fd_);
  }

  uint16_t port() const { return port_; }
  int connections() const { return connections_; }
  int peak_concurrent_streams() const { return peak_streams_; }
  Notification& cancelled() { return cancelled_; }

 private:
  struct Stream {
    std::string method;
    std::string path;
    std::map<std::string, std::string> headers;
    std::string body;
    std::string out;  // response body queued for the data provider
    size_t out_offset = 0;
    bool out_eof = false;  // END_STREAM once `out` is drained
    bool handled = false;  // a response has been started
  };

  // One connection's nghttp2 server session, run by its own thread.
  class Conn {
   public:
    Conn(Http2TestServer* server, int fd) : server_(server), fd_(fd) {}

    void Run() {
      nghttp2_session_callbacks* cbs;
      nghttp2_session_callbacks_new(&cbs);
      nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &OnBeginHeaders);
      nghttp2_session_callbacks_set_on_header_callback(cbs, &OnHeader);
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &OnData);
      nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &OnFrameRecv);
      nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &OnStreamClose);
      nghttp2_session_server_new(&session_, cbs, this);
      nghttp2_session_callbacks_del(cbs);
      const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
      nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
      std::string out;
      while (!server_->stop_) {
        RunTimers();
        for (;;) {
          const uint8_t* data;
          const ssize_t n = nghttp2_session_mem_send(session_, &data);
          if (n <= 0) break;
          out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
        }
        while (!out.empty()) {
          const ssize_t n = ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n <= 0) break;
          out.erase(0, static_cast<size_t>(n));
        }
        const bool flushed = out.empty() && !nghttp2_session_want_write(session_);
        if (flushed && (close_after_flush_ || !nghttp2_session_want_read(session_))) break;
        pollfd pfd{fd_, static_cast<short>(POLLIN | (out.empty() ? 0 : POLLOUT)), 0};
        if (::poll(&pfd, 1, 5) <= 0 || (pfd.revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
          continue;
        }
        uint8_t buf[16384];
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN) continue;
        if (n <= 0 || nghttp2_session_mem_recv(session_, buf, static_cast<size_t>(n)) < 0) break;
      }
      nghttp2_session_del(session_);
      ::close(fd_);
    }

   private:
    struct Timer {
      Clock::time_point when;
      std::function<void()> action;
    };

    static Conn* Self(void* p) { return static_cast<Conn*>(p); }

    Stream* Find(int32_t id) {
      auto it = streams_.find(id);
      return it == streams_.end() ? nullptr : it->second.get();
    }

    void After(milliseconds delay, std::function<void()> action) {
      timers_.push_back({Clock::now() + delay, std::move(action)});
    }

    void RunTimers() {
      const auto now = Clock::now();
      std::vector<std::function<void()>> due;
      for (auto it = timers_.begin(); it != timers_.end();) {
        if (it->when <= now) {
          due.push_back(std::move(it->action));
          it = timers_.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& action : due) action();
    }

    static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                            nghttp2_data_source* source, void*) {
      auto* s = static_cast<Stream*>(source->ptr);
      if (s->out_offset == s->out.size()) {
        if (!s->out_eof) return NGHTTP2_ERR_DEFERRED;
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
      }
      // At most one queued piece per DATA frame, so a stream's pieces arrive separately.
      const size_t n = std::min(length, s->out.size() - s->out_offset);
      std::memcpy(buf, s->out.data() + s->out_offset, n);
      s->out_offset += n;
      if (s->out_offset == s->out.size() && s->out_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }

    void Respond(int32_t id, int status, std::vector<std::pair<std::string, std::string>> fields,
                 std::string body, bool eof) {
      Stream* s = Find(id);
      if (s == nullptr) return;
      s->out = std::move(body);
      s->out_eof = eof;
      fields.insert(fields.begin(), {":status", std::to_string(status)});
      std::vector<nghttp2_nv> nva;
      for (auto& [name, value] : fields) {
        nva.push_back({reinterpret_cast<uint8_t*>(name.data()),
                       reinterpret_cast<uint8_t*>(value.data()), name.size(), value.size(),
                       NGHTTP2_NV_FLAG_NONE});
      }
      nghttp2_data_provider provider{};
      provider.source.ptr = s;
      provider.read_callback = &ReadBody;
      nghttp2_submit_response(session_, id, nva.data(), nva.size(), &provider);
    }

    // Queues more response body on a streaming response; `eof` ends it.
    void Append(int32_t id, const std::string& bytes, bool eof) {
      Stream* s = Find(id);
      if (s == nullptr) return;
      s->out.append(bytes);
      s->out_eof = eof;
      nghttp2_session_resume_data(session_, id);
    }

    void Handle(int32_t id) {
      Stream* s = Find(id);
      const std::string& path = s->path;
      if (path == "/echo") {
        Respond(id, 200,
                {{"x-method", s->method}, {"x-path", s->path}, {"x-echo", s->headers["x-echo"]}},
                s->body, true);
      } else if (path.rfind("/delay/", 0) == 0) {
        const int ms = std::stoi(path.substr(7));
        After(milliseconds(ms),
              [this, id, ms] { Respond(id, 200, {}, "delayed " + std::to_string(ms), true); });
      } else if (path == "/slow") {
        After(milliseconds(2000), [this, id] { Respond(id, 200, {}, "slow", true); });
      } else if (path == "/reset") {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
      } else if (path == "/goaway") {
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, id - 2 > 0 ? id - 2 : 0,
                              NGHTTP2_NO_ERROR, nullptr, 0);
        close_after_flush_ = true;
      } else if (path == "/stream" || path == "/stream?hold") {
        Respond(id, 200, {{"content-type", "application/octet-stream"}}, "", false);
        const bool hold = path == "/stream?hold";
        const std::string two = Frame("two");
        After(milliseconds(10), [this, id] { Append(id, Frame("one"), false); });
        After(milliseconds(30), [this, id] { Append(id, Frame(""), false); });
        After(milliseconds(50), [this, id, two] { Append(id, two.substr(0, 5), false); });
        After(milliseconds(80), [this, id, two, hold] { Append(id, two.substr(5), !hold); });
      } else if (path == "/early") {
        Respond(id, 413, {}, "too large", true);
      } else if (path == "/status/404") {
        Respond(id, 404, {}, "not found", true);
      } else {
        Respond(id, 404, {}, "no such path", true);
      }
    }

    static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
      Conn* self = Self(user_data);
      if (frame->hd.type != NGHTTP2_HEADERS) return 0;
      self->streams_[frame->hd.stream_id] = std::make_unique<Stream>();
      int peak = self->server_->peak_streams_;
      const int now = static_cast<int>(self->streams_.size());
      while (now > peak && !self->server_->peak_streams_.compare_exchange_weak(peak, now)) {
      }
      return 0;
    }

    static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                        size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                        void* user_data) {
      Stream* s = Self(user_data)->Find(frame->hd.stream_id);
      if (s == nullptr) return 0;
      const std::string n(reinterpret_cast<const char*>(name), namelen);
      const std::string v(reinterpret_cast<const char*>(value), valuelen);
      if (n == ":method") {
        s->method = v;
      } else if (n == ":path") {
        s->path = v;
      } else {
        s->headers[n] = v;
      }
      return 0;
    }

    static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                      void* user_data) {
      Stream* s = Self(user_data)->Find(id);
      if (s != nullptr) s->body.append(reinterpret_cast<const char*>(data), len);
      return 0;
    }

    static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
      Conn* self = Self(user_data);
      if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
      Stream* s = self->Find(frame->hd.stream_id);
      if (s == nullptr || s->handled) return 0;
      const bool early = frame->hd.type == NGHTTP2_HEADERS && s->path == "/early";
      if (early || (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
        s->handled = true;
        self->Handle(frame->hd.stream_id);
      }
      return 0;
    }

    static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* user_data) {
      Conn* self = Self(user_data);
      if (error_code == NGHTTP2_CANCEL) self->server_->cancelled_.Notify();
      self->streams_.erase(id);
      return 0;
    }

    Http2TestServer* server_;
    int fd_;
    nghttp2_session* session_ = nullptr;
    std::map<int32_t, std::unique_ptr<Stream>> streams_;
    std::deque<Timer> timers_;
    bool close_after_flush_ = false;
  };

  void AcceptLoop() {
    while (!stop_) {
      pollfd pfd{listen_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ++connections_;
      conn_threads_.emplace_back([this, fd] { Conn(this, fd).Run(); });
    }
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> peak_streams_{0};
  std::thread accept_thread_;
  std::vector<std::thread> conn_threads_;  // touched only by the accept thread until joined
  Notification cancelled_;
};

// ---------------------------------------------------------------------------------------------
// FrameReader over a scripted StreamReader.

class ScriptedReader : public StreamReader {
 public:
  explicit ScriptedReader(std::vector<std::string> chunks)
      : chunks_(chunks.begin(), chunks.end()) {}
  int status() const override { return 200; }
  const std::map<std::string, std::string>& headers() const override { return headers_; }
  bool finished() const override { return finished_; }
  Result<std::string> Read(milliseconds) override {
    if (chunks_.empty()) {
      finished_ = true;
      return Unavailable("end of stream");
    }
    std::string chunk = std::move(chunks_.front());
    chunks_.pop_front();
    return chunk;  // an empty chunk plays a timeout
  }

 private:
  std::deque<std::string> chunks_;
  std::map<std::string, std::string> headers_;
  bool finished_ = false;
};

TEST(FrameReaderTest, SplitsFramesAcrossAndWithinChunks) {
  const std::string bytes = Frame("alpha") + Frame("") + Frame("gamma-long-payload");
  ScriptedReader reader({bytes.substr(0, 2), bytes.substr(2, 10), bytes.substr(12)});
  FrameReader frames(&reader);
  for (const std::string expected : {"alpha", "", "gamma-long-payload"}) {
    auto next = frames.Next(milliseconds(100));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ(**next, expected);
  }
  auto end = frames.Next(milliseconds(100));
  EXPECT_FALSE(end.ok());
  EXPECT_TRUE(reader.finished());
}

TEST(FrameReaderTest, TimeoutReturnsNullopt) {
  ScriptedReader reader({Frame("x").substr(0, 3), ""});
  FrameReader frames(&reader);
  auto next = frames.Next(milliseconds(0));
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(FrameReaderTest, TruncatedFrameAtEndIsInternalError) {
  ScriptedReader reader({Frame("truncated").substr(0, 7)});
  FrameReader frames(&reader);
  auto next = frames.Next(milliseconds(100));
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), StatusCode::kInternal);
}

TEST(FrameReaderTest, OversizedFrameIsRejected) {
  ScriptedReader reader({std::string("\xff\xff\xff\xff", 4)});
  FrameReader frames(&reader);
  auto next = frames.Next(milliseconds(100));
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), StatusCode::kInternal);
}

// ---------------------------------------------------------------------------------------------
// Http1Client

TEST(Http1ClientTest, EchoesOverOneKeepAliveConnection) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (int i = 0; i < 3; ++i) {
    const std::string body = "hello " + std::to_string(i);
    auto res = (*client)->Post("/echo", {{"X-Echo", "v" + std::to_string(i)}}, body);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, body);
    EXPECT_EQ(res->headers["x-method"], "POST");
    EXPECT_EQ(res->headers["x-target"], "/echo");
    EXPECT_EQ(res->headers["x-echo"], "v" + std::to_string(i));
    EXPECT_EQ(res->headers["content-length"], std::to_string(body.size()));
  }
  auto get = (*client)->Get("/echo?q=1");
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->headers["x-method"], "GET");
  EXPECT_EQ(get->body, "");
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http1ClientTest, LargeBody) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string body = Pattern(3 << 20, 7);
  auto res = (*client)->Post("/echo", {}, body);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_TRUE(res->body == body);
}

TEST(Http1ClientTest, StatusCodesAndServerClose) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto not_found = (*client)->Get("/status/404");
  ASSERT_TRUE(not_found.ok()) << not_found.status().ToString();
  EXPECT_EQ(not_found->status, 404);
  EXPECT_EQ(not_found->body, "not found");
  auto bye = (*client)->Get("/close");
  ASSERT_TRUE(bye.ok()) << bye.status().ToString();
  EXPECT_EQ(bye->body, "bye");
  auto after = (*client)->Get("/echo");
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}

TEST(Http1ClientTest, EarlyResponseWhileSendingBody) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto res = (*client)->Post("/early", {}, Pattern(16 << 20, 1));
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(res->body, "too large");
}

TEST(Http1ClientTest, RequestTimesOut) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->set_timeout(milliseconds(100));
  const auto start = Clock::now();
  auto res = (*client)->Get("/slow");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, milliseconds(1500));
}

TEST(Http1ClientTest, ConnectRefused) {
  const ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  auto client = Http1Client::Connect("127.0.0.1", closed.port());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
}

TEST(Http1ClientTest, SendRawReturnsServerAnswerToMalformedRequest) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto raw = (*client)->SendRaw("GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
                                std::chrono::seconds(5));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << *raw;
  auto after = (*client)->Get("/echo");
  EXPECT_FALSE(after.ok());  // SendRaw consumes the connection
}

TEST(Http1ClientTest, SendRawTimesOutOnIncompleteRequest) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const auto start = Clock::now();
  auto raw =
      (*client)->SendRaw("POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", milliseconds(200));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(*raw, "");
  EXPECT_GE(Clock::now() - start, milliseconds(190));
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(Http1ClientTest, StreamsChunkedBodyIntoFrames) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto reader = (*client)->OpenStream("/stream", {{"x-echo", "w"}}, "watch request");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->status(), 200);
  EXPECT_EQ((*reader)->headers().at("transfer-encoding"), "chunked");
  FrameReader frames(reader->get());
  for (const std::string expected : {"one", "", "two"}) {
    auto next = frames.Next(std::chrono::seconds(5));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ(**next, expected);
  }
  auto end = frames.Next(std::chrono::seconds(5));
  EXPECT_FALSE(end.ok());
  EXPECT_TRUE((*reader)->finished());
  // The client's own connection is still usable.
  auto res = (*client)->Post("/echo", {}, "still here");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->body, "still here");
}

TEST(Http1ClientTest, StreamReadTimesOutAndCloseReachesServer) {
  Http1TestServer server;
  auto client = Http1Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto reader = (*client)->OpenStream("/stream?hold", {}, "");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FrameReader frames(reader->get());
  for (int i = 0; i < 3; ++i) {
    auto next = frames.Next(std::chrono::seconds(5));
    ASSERT_TRUE(next.ok() && next->has_value());
  }
  auto idle = frames.Next(milliseconds(100));
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_FALSE(idle->has_value());
  auto raw = (*reader)->Read(milliseconds(50));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw, "");
  reader->reset();
  EXPECT_TRUE(server.stream_closed().WaitFor(std::chrono::seconds(5)));
}

// ---------------------------------------------------------------------------------------------
// Http2Client

TEST(Http2ClientTest, EchoesWithHeaders) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto res = (*client)->Post("/echo", {{"X-Echo", "Hi"}}, "payload");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "payload");
  EXPECT_EQ(res->headers["x-method"], "POST");
  EXPECT_EQ(res->headers["x-path"], "/echo");
  EXPECT_EQ(res->headers["x-echo"], "Hi");
  auto empty = (*client)->Post("/echo", {}, "");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->body, "");
  auto not_found = (*client)->Post("/status/404", {}, "x");
  ASSERT_TRUE(not_found.ok()) << not_found.status().ToString();
  EXPECT_EQ(not_found->status, 404);
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http2ClientTest, LargeBodiesRespectFlowControl) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const std::string body = Pattern(3 << 20, 3);  // beyond both peers' windows
  auto res = (*client)->Post("/echo", {}, body);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_TRUE(res->body == body);
}

TEST(Http2ClientTest, EarlyResponseWhileSendingBody) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto res = (*client)->Post("/early", {}, Pattern(16 << 20, 1));
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(res->body, "too large");
  auto next = (*client)->Post("/echo", {}, "next");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->body, "next");
}

TEST(Http2ClientTest, PostManyMultiplexesOnOneConnection) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<std::tuple<std::string, Headers, std::string>> reqs;
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    // Later requests finish first.
    reqs.emplace_back("/delay/" + std::to_string(400 - 10 * i), Headers{}, "body");
  }
  const auto start = Clock::now();
  auto res = (*client)->PostMany(reqs);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));  // serially it would take 6 s
  ASSERT_EQ(res->size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ((*res)[i].body, "delayed " + std::to_string(400 - 10 * i));
  }
  EXPECT_EQ(server.peak_concurrent_streams(), kRequests);
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http2ClientTest, PostManyQueuesBeyondServerConcurrencyLimit) {
  Http2TestServer server;  // SETTINGS_MAX_CONCURRENT_STREAMS = 100
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<std::tuple<std::string, Headers, std::string>> reqs(150, {"/delay/50", {}, ""});
  auto res = (*client)->PostMany(reqs);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->size(), 150u);
  for (const HttpResponse& r : *res) EXPECT_EQ(r.body, "delayed 50");
  EXPECT_EQ(server.peak_concurrent_streams(), 100);
}

TEST(Http2ClientTest, PostManyLargeBodies) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<std::tuple<std::string, Headers, std::string>> reqs;
  for (int i = 0; i < 8; ++i) reqs.emplace_back("/echo", Headers{}, Pattern(512 << 10, i));
  auto res = (*client)->PostMany(reqs);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE((*res)[i].body == std::get<2>(reqs[i])) << i;
}

TEST(Http2ClientTest, RstStreamFailsOnlyThatStream) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto reset = (*client)->Post("/reset", {}, "x");
  ASSERT_FALSE(reset.ok());
  EXPECT_EQ(reset.status().code(), StatusCode::kInternal);
  EXPECT_NE(reset.status().message().find("INTERNAL_ERROR"), std::string::npos)
      << reset.status().message();
  auto res = (*client)->Post("/echo", {}, "after reset");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->body, "after reset");
}

TEST(Http2ClientTest, GoawayFailsRefusedStreamAndLaterRequests) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Post("/echo", {}, "first").ok());
  auto refused = (*client)->Post("/goaway", {}, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
  EXPECT_NE(refused.status().message().find("REFUSED_STREAM"), std::string::npos)
      << refused.status().message();
  auto later = (*client)->Post("/echo", {}, "later");
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), StatusCode::kUnavailable);
}

TEST(Http2ClientTest, TimeoutCancelsStreamAndKeepsConnection) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->set_timeout(milliseconds(100));
  const auto start = Clock::now();
  auto slow = (*client)->Post("/slow", {}, "");
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  (*client)->set_timeout(kDefaultTimeout);
  auto res = (*client)->Post("/echo", {}, "next");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->body, "next");
  EXPECT_TRUE(server.cancelled().WaitFor(std::chrono::seconds(5)));
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http2ClientTest, StreamsDataIntoFrames) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto reader = (*client)->OpenStream("/stream", {}, "watch request");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->status(), 200);
  EXPECT_EQ((*reader)->headers().at("content-type"), "application/octet-stream");
  FrameReader frames(reader->get());
  for (const std::string expected : {"one", "", "two"}) {
    auto next = frames.Next(std::chrono::seconds(5));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ(**next, expected);
  }
  auto end = frames.Next(std::chrono::seconds(5));
  EXPECT_FALSE(end.ok());
  EXPECT_TRUE((*reader)->finished());
  // The client's own connection is still usable while a reader exists.
  auto res = (*client)->Post("/echo", {}, "still here");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(server.connections(), 2);
}

TEST(Http2ClientTest, ClosingStreamReaderSendsCancel) {
  Http2TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto reader = (*client)->OpenStream("/stream?hold", {}, "");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FrameReader frames(reader->get());
  for (int i = 0; i < 3; ++i) {
    auto next = frames.Next(std::chrono::seconds(5));
    ASSERT_TRUE(next.ok() && next->has_value());
  }
  auto idle = frames.Next(milliseconds(100));
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_FALSE(idle->has_value());
  EXPECT_FALSE(server.cancelled().WaitFor(milliseconds(0)));
  reader->reset();
  EXPECT_TRUE(server.cancelled().WaitFor(std::chrono::seconds(5)));
}

TEST(Http2ClientTest, ConnectRefused) {
  const ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  auto client = Http2Client::Connect("127.0.0.1", closed.port());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
}

TEST(Http2ClientTest, ConnectFailsAgainstHttp1OnlyServer) {
  Http1TestServer server;
  auto client = Http2Client::Connect("127.0.0.1", server.port(), milliseconds(2000));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInternal) << client.status().ToString();
}

// Checks the HTTP/2 fixture against a real client (the nghttp CLI), so the tests above don't
// merely agree with themselves.
TEST(Http2FixtureTest, EchoWorksWithNghttpCli) {
  if (std::system("command -v nghttp >/dev/null 2>&1") != 0) GTEST_SKIP() << "no nghttp";
  Http2TestServer server;
  const std::string body = Pattern(200 << 10, 5);
  const std::string path = testing::TempDir() + "http_client_selftest_body_" +
                           std::to_string(::getpid()) + "_" + std::to_string(server.port());
  std::ofstream(path, std::ios::binary) << body;
  const std::string cmd =
      "nghttp -d " + path + " http://127.0.0.1:" + std::to_string(server.port()) + "/echo";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(pipe), 0);
  std::remove(path.c_str());
  EXPECT_TRUE(out == body) << "got " << out.size() << " bytes";
}

}  // namespace
}  // namespace kvc::testutil
