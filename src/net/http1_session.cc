// HTTP/1.1 keep-alive session on Boost.Beast. One request at a time (no pipelining); a fresh
// parser with body and header limits per request; a timeout before every read; streaming
// responses use chunked transfer encoding, and a read kept pending during a stream notices when
// the client goes away. An error answer that ends the connection is followed by a lingering
// close (see ServerOptions::linger_timeout).
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <deque>
#include <optional>
#include <type_traits>

#include "net/session.h"
#include "service/http_status.h"

namespace kvc::net {
namespace http = beast::http;

namespace {

// Stream: beast::tcp_stream (plain) or TlsStream.
template <class Stream>
class Http1Session : public Session, public std::enable_shared_from_this<Http1Session<Stream>> {
 public:
  Http1Session(ServerContext* ctx, Stream stream, std::string initial)
      : ctx_(ctx), stream_(std::move(stream)), heartbeat_(stream_.get_executor()) {
    if (!initial.empty()) {  // an empty buffer's data() may be null: no memcpy then
      auto b = buffer_.prepare(initial.size());
      std::memcpy(b.data(), initial.data(), initial.size());
      buffer_.commit(initial.size());
    }
    boost::system::error_code ec;
    auto ep = LowestSocket(stream_).remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  ~Http1Session() override {
    if (source_) source_->Cancel();
    ctx_->registry.Remove(this);
  }

  void Start() {
    ctx_->registry.Add(this, this->weak_from_this());
    // A connection accepted while the server shuts down gets its request answered and closes.
    shutting_down_ = ctx_->stopping;
    DoRead();
  }

  void Shutdown() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->shutting_down_ = true;
      if (self->state_ == State::kReading || self->state_ == State::kLingering) {
        self->Close();
      } else if (self->state_ == State::kStreaming) {
        self->EndStream();
      }
      // kHandling: closes after the response is written.
    });
  }

  // Called (via post) by the stream sink; `written` runs once the chunk is on the socket.
  void QueueChunk(std::string bytes, std::function<void()> written = nullptr) {
    if (state_ != State::kStreaming) return;
    pending_bytes_ += bytes.size();
    if (pending_bytes_ > ctx_->options.max_stream_buffer_bytes) {
      spdlog::info("{}: streaming client too slow, closing", peer_);
      Close();
      return;
    }
    chunks_.push_back(Chunk{std::move(bytes), std::move(written)});
    WriteChunks();
  }

  void EndStreamFromSource() {
    if (state_ == State::kStreaming) EndStream();
  }

  // The source failed: close without the final chunk, so the client sees a broken body.
  void AbortStreamFromSource() {
    if (state_ == State::kStreaming) Close();
  }

 private:
  enum class State { kReading, kHandling, kStreaming, kLingering, kClosed };

  // Bytes discarded per read while lingering.
  static constexpr size_t kLingerReadBytes = 64 * 1024;

  void DoRead() {
    state_ = State::kReading;
    if (shutting_down_ && requests_ > 0) {
      Close();
      return;
    }
    parser_.emplace();
    parser_->body_limit(ctx_->options.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(ctx_->options.max_header_bytes));
    if (buffer_.size() > 0) {  // the next request has begun to arrive already
      ReadHeader();
      return;
    }
    // Wait for the first byte (an idle keep-alive connection may wait long), then give the
    // header block header_timeout and the whole request request_timeout, so a client that
    // trickles bytes (slowloris) is cut off.
    beast::get_lowest_layer(stream_).expires_after(requests_ == 0 ? ctx_->options.header_timeout
                                                                  : ctx_->options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(16 * 1024), [self = this->shared_from_this()](
                                                            beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (ec) {  // closed, timed out or broken before a request began: nothing to answer
        self->Close();
        return;
      }
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    if (state_ == State::kClosed) return;
    beast::get_lowest_layer(stream_).expires_after(ctx_->options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec || state_ == State::kClosed) {
      OnRead(ec);
      return;
    }
    beast::get_lowest_layer(stream_).expires_after(ctx_->options.request_timeout);
    const auto& h = parser_->get();
    if (!OnlyChunked(h)) {
      // A proxy in front may frame such a body differently than we do (request smuggling);
      // RFC 9112 section 6.3 has the server answer 400 and close.
      SendErrorAndClose(InvalidArgument(
          "Unsupported Transfer-Encoding: only a single 'chunked' coding is accepted."));
      return;
    }
    if (!parser_->is_done() && beast::iequals(h[http::field::expect], "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = this->shared_from_this()](beast::error_code wec, size_t) {
                          if (wec) {
                            self->Close();
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  // True if the request has no Transfer-Encoding, or exactly one field whose value is exactly
  // `chunked` (not `chunked, identity`, not `gzip, chunked`, not two fields).
  static bool OnlyChunked(const http::request_header<>& h) {
    const size_t fields = h.count(http::field::transfer_encoding);
    if (fields == 0) return true;
    return fields == 1 && beast::iequals(h[http::field::transfer_encoding], "chunked");
  }

  void ReadBody() {
    if (state_ == State::kClosed) return;
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::ssl::error::stream_truncated) {
      Close();
      return;
    }
    if (ec == http::error::body_limit) {
      SendErrorAndClose(Status(StatusCode::kPayloadTooLarge,
                               "The request body exceeds the limit of " +
                                   std::to_string(ctx_->options.max_body_bytes) + " bytes."));
      return;
    }
    if (ec == http::error::header_limit) {
      SendErrorAndClose(Status(StatusCode::kHeadersTooLarge, "The request headers are too large."));
      return;
    }
    if (ec) {
      SendErrorAndClose(InvalidArgument("Malformed HTTP/1.1 request: " + ec.message() + "."));
      return;
    }
    ++requests_;
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    service::HttpRequest r;
    r.method = std::string(req.method_string());
    std::string target(req.target());
    auto q = target.find('?');
    r.path = q == std::string::npos ? target : target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    r.scheme = kIsTls<Stream> ? "https" : "http";
    r.tls = kIsTls<Stream>;
    r.peer = peer_;
    for (const auto& f : req) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == "host") r.authority = std::string(f.value());
      r.headers.emplace_back(name, std::string_view(f.value().data(), f.value().size()));
    }
    r.body = std::move(req.body());
    auto gone = std::make_shared<std::atomic<bool>>(false);
    r.client_gone = gone;
    state_ = State::kHandling;
    beast::get_lowest_layer(stream_).expires_never();
    WatchForHangup(std::move(gone));
    auto self = this->shared_from_this();
    ctx_->handler->Handle(std::move(r), [self](service::HttpResponse resp) {
      asio::post(self->stream_.get_executor(),
                 [self, resp = std::move(resp)]() mutable { self->OnResponse(std::move(resp)); });
    });
  }

  // While the handler works, notices a client that closes its connection (the socket turns
  // readable with nothing to read) and sets `gone`. Only waits: the bytes of a pipelined next
  // request stay where the next read finds them, and the wait ends harmlessly whenever the
  // socket turns readable later (or is closed).
  void WatchForHangup(std::shared_ptr<std::atomic<bool>> gone) {
    auto& sock = beast::get_lowest_layer(stream_).socket();
    sock.async_wait(
        tcp::socket::wait_read, [self = this->shared_from_this(), gone = std::move(gone),
                                 seq = requests_](beast::error_code ec) {
          if (ec == asio::error::operation_aborted) return;
          if (self->state_ != State::kHandling || self->requests_ != seq) return;
          if (ec) {
            gone->store(true);
            return;
          }
          char byte = 0;
          const ssize_t n = ::recv(beast::get_lowest_layer(self->stream_).socket().native_handle(),
                                   &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            gone->store(true);
          }
        });
  }

  void OnResponse(service::HttpResponse resp) {
    if (state_ == State::kClosed) {
      if (resp.stream) resp.stream->Cancel();
      return;
    }
    if (resp.stream) {
      StartStream(std::move(resp));
      return;
    }
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(resp.status), version_);
    SetCommonHeaders(*res);
    if (!resp.content_type.empty()) res->set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) res->set(k, v);
    res->body() = std::move(resp.body);
    const bool close = !keep_alive_ || shutting_down_ || ctx_->stopping;
    res->keep_alive(!close);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(ctx_->options.request_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, close](beast::error_code ec, size_t) {
                        if (ec || close) {
                          self->Close();
                          return;
                        }
                        self->DoRead();
                      });
  }

  // Server, and Strict-Transport-Security over TLS (unless --hsts-max-age-s is 0).
  template <class Body>
  void SetCommonHeaders(http::response<Body>& res) const {
    res.set(http::field::server, "kvconnect");
    if constexpr (kIsTls<Stream>) {
      const std::string hsts = HstsValue(ctx_->options);
      if (!hsts.empty()) res.set(http::field::strict_transport_security, hsts);
    }
  }

  // Answers a request the session could not parse (through the one status table), then closes
  // lingering (Linger()).
  void SendErrorAndClose(const Status& error) {
    state_ = State::kHandling;
    service::HttpResponse e = service::ErrorResponse(error);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(e.status), 11);
    SetCommonHeaders(*res);
    res->set(http::field::content_type, e.content_type);
    res->body() = std::move(e.body);
    res->keep_alive(false);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(ctx_->options.request_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->Linger();
                      });
  }

  // A lingering close: the client may still be writing a body we will not read (a 413 answered
  // from the headers alone). Closing now would leave unread bytes in the receive buffer, the
  // kernel would answer with a reset, and the client would lose our answer before reading it.
  // So end our side (FIN after the answer), read and discard until the client closes, or for
  // linger_timeout and linger_max_bytes at most, then close. Under TLS the discarded bytes are
  // records we never decrypt.
  void Linger() {
    if (state_ == State::kClosed) return;
    state_ = State::kLingering;
    beast::error_code ec;
    LowestSocket(stream_).shutdown(tcp::socket::shutdown_send, ec);
    if (ec) {
      Close();
      return;
    }
    buffer_.consume(buffer_.size());
    lingered_bytes_ = 0;
    linger_deadline_ = std::chrono::steady_clock::now() + ctx_->options.linger_timeout;
    LingerRead();
  }

  void LingerRead() {
    if (state_ != State::kLingering) return;
    if (lingered_bytes_ >= ctx_->options.linger_max_bytes) {
      Close();
      return;
    }
    auto& lowest = beast::get_lowest_layer(stream_);
    lowest.expires_at(linger_deadline_);
    const size_t want =
        std::min(kLingerReadBytes, ctx_->options.linger_max_bytes - lingered_bytes_);
    lowest.async_read_some(
        buffer_.prepare(want), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
          self->lingered_bytes_ += n;  // never committed: discarded
          if (ec) {  // the client closed, the deadline passed, or the connection broke
            self->Close();
            return;
          }
          self->LingerRead();
        });
  }

  class Sink : public service::StreamSink {
   public:
    explicit Sink(std::weak_ptr<Http1Session> s) : s_(std::move(s)) {}
    void Send(std::string bytes) override { SendThen(std::move(bytes), nullptr); }
    void SendThen(std::string bytes, const std::function<void()>& written) override {
      if (auto s = s_.lock()) {
        asio::post(s->stream_.get_executor(), [s, b = std::move(bytes), w = written]() mutable {
          s->QueueChunk(std::move(b), std::move(w));
        });
      }
    }
    void Close() override {
      if (auto s = s_.lock()) {
        asio::post(s->stream_.get_executor(), [s] { s->EndStreamFromSource(); });
      }
    }
    void Abort() override {
      if (auto s = s_.lock()) {
        asio::post(s->stream_.get_executor(), [s] { s->AbortStreamFromSource(); });
      }
    }

   private:
    std::weak_ptr<Http1Session> s_;
  };

  void StartStream(service::HttpResponse resp) {
    state_ = State::kStreaming;
    source_ = std::move(resp.stream);
    heartbeat_bytes_ = std::move(resp.heartbeat);
    heartbeat_interval_ = resp.heartbeat_interval;
    header_res_.emplace(static_cast<http::status>(resp.status), version_);
    SetCommonHeaders(*header_res_);
    if (!resp.content_type.empty()) header_res_->set(http::field::content_type, resp.content_type);
    for (const auto& [k, v] : resp.headers) header_res_->set(k, v);
    header_res_->chunked(true);
    header_res_->keep_alive(false);
    serializer_.emplace(*header_res_);
    writing_ = true;
    http::async_write_header(stream_, *serializer_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->writing_ = false;
                               if (ec) {
                                 self->Close();
                                 return;
                               }
                               self->WriteChunks();
                             });
    // Watch for the client going away while we stream.
    LowestSocket(stream_).async_wait(tcp::socket::wait_read,
                                     [self = this->shared_from_this()](beast::error_code) {
                                       if (self->state_ == State::kStreaming) self->Close();
                                     });
    source_->Start(std::make_shared<Sink>(this->weak_from_this()));
    ScheduleHeartbeat();
    // Shutdown() may have run while this response was being prepared: end the stream now.
    if (shutting_down_ || ctx_->stopping) EndStream();
  }

  void ScheduleHeartbeat() {
    if (heartbeat_bytes_.empty() || heartbeat_interval_.count() <= 0) return;
    heartbeat_.expires_after(heartbeat_interval_);
    heartbeat_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->state_ != State::kStreaming) return;
      self->QueueChunk(self->heartbeat_bytes_);
      self->ScheduleHeartbeat();
    });
  }

  void WriteChunks() {
    if (writing_ || state_ == State::kClosed) return;
    if (chunks_.empty()) {
      if (ending_) {
        writing_ = true;
        asio::async_write(stream_, http::make_chunk_last(),
                          [self = this->shared_from_this()](beast::error_code, size_t) {
                            self->writing_ = false;
                            self->Close();
                          });
      }
      return;
    }
    writing_ = true;
    current_ = std::move(chunks_.front());
    chunks_.pop_front();
    asio::async_write(stream_, http::make_chunk(asio::buffer(current_.bytes)),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->pending_bytes_ -= self->current_.bytes.size();
                        if (ec) {
                          self->Close();
                          return;
                        }
                        if (auto written = std::move(self->current_.written)) written();
                        self->WriteChunks();
                      });
  }

  void EndStream() {
    if (source_) {
      source_->Cancel();
      source_.reset();
    }
    ending_ = true;
    heartbeat_.cancel();
    WriteChunks();
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    if (source_) {
      source_->Cancel();
      source_.reset();
    }
    heartbeat_.cancel();
    beast::error_code ec;
    LowestSocket(stream_).shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(stream_).close();
  }

  ServerContext* ctx_;
  Stream stream_;
  beast::flat_buffer buffer_;
  asio::steady_timer heartbeat_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string peer_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  bool shutting_down_ = false;
  uint64_t requests_ = 0;
  // Lingering close.
  size_t lingered_bytes_ = 0;
  std::chrono::steady_clock::time_point linger_deadline_;

  // Streaming state.
  std::shared_ptr<service::StreamSource> source_;
  std::optional<http::response<http::empty_body>> header_res_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  struct Chunk {
    std::string bytes;
    std::function<void()> written;  // may be empty
  };
  std::deque<Chunk> chunks_;
  Chunk current_;
  size_t pending_bytes_ = 0;
  bool writing_ = false;
  bool ending_ = false;
  std::string heartbeat_bytes_;
  std::chrono::milliseconds heartbeat_interval_{0};
};

}  // namespace

void StartHttp1Session(ServerContext* ctx, tcp::socket socket, std::string initial) {
  std::make_shared<Http1Session<beast::tcp_stream>>(ctx, beast::tcp_stream(std::move(socket)),
                                                    std::move(initial))
      ->Start();
}

void StartHttp1Session(ServerContext* ctx, TlsStream stream, std::string initial) {
  std::make_shared<Http1Session<TlsStream>>(ctx, std::move(stream), std::move(initial))->Start();
}

}  // namespace kvc::net
