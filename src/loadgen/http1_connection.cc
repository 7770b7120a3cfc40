// HTTP/1.1 keep-alive client connection (Beast) over plain TCP or TLS: requests are queued and
// sent one at a time; a streamed response body (watch) is delivered as it arrives.
#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <limits>
#include <optional>

#include "loadgen/transport.h"

namespace kvc::loadgen {
namespace internal {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kStreamChunkSize = 16 * 1024;

// An HTTP/1.1 keep-alive client connection over `Socket` (PlainSocket or TlsSocket). Owns its
// socket, the request being answered (current_) and the queue behind it. Thread-safety: see
// Connection (one io_context, one thread).
template <class Socket>
class Http1Connection final : public Connection {
 public:
  Http1Connection(asio::io_context& io, ConnectionOptions options,
                  const std::vector<std::string>& addresses, asio::ssl::context* tls)
      : io_(io),
        options_(std::move(options)),
        authority_(options_.origin.Authority()),
        endpoints_(ToEndpoints(addresses, options_.origin.port)),
        socket_(NewSocket<Socket>(io, tls)),
        timer_(io) {}

  void Connect(std::function<void(Status)> done) override {
    auto self = shared_from_this();
    connect_done_ = std::move(done);
    timer_.expires_after(options_.connect_timeout);
    timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (!ec && connect_done_) {
        Fail(Unavailable("connecting to " + options_.origin.Authority() + " timed out"));
      }
    });
    OpenSocket(*socket_, endpoints_, options_.origin, "http/1.1", [this, self](Status s) {
      if (!broken_.ok()) return;  // timed out or closed meanwhile
      if (!s.ok()) {
        Fail(std::move(s));
        return;
      }
      timer_.cancel();
      connected_ = true;
      asio::post(io_, [done = std::move(connect_done_)] { done(Status::Ok()); });
      connect_done_ = nullptr;
      DoNext();
    });
  }

  void Send(Request request, ResponseHandler done) override {
    Pending p;
    p.request = std::move(request);
    p.done = std::move(done);
    Enqueue(std::move(p));
  }

  void SendStreaming(Request request, StreamHandlers handlers) override {
    Pending p;
    p.request = std::move(request);
    p.streaming = true;
    p.handlers = std::move(handlers);
    Enqueue(std::move(p));
  }

  void Close() override { Fail(Unavailable("closed by the client")); }

  bool usable() const override { return broken_.ok(); }

 private:
  struct Pending {
    Request request;
    bool streaming = false;
    ResponseHandler done;
    StreamHandlers handlers;
  };

  void Enqueue(Pending p) {
    if (!broken_.ok()) {
      FailPending(std::move(p), broken_);
      return;
    }
    queue_.push_back(std::move(p));
    DoNext();
  }

  void DoNext() {
    if (busy_ || !connected_ || !broken_.ok() || queue_.empty()) return;
    busy_ = true;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    request_ = {};
    request_.method(http::verb::post);
    request_.target(current_.request.path);
    request_.version(11);
    request_.set(http::field::host, authority_);
    if (current_.request.headers) {
      for (const auto& [name, value] : *current_.request.headers) request_.set(name, value);
    }
    for (const auto& [name, value] : current_.request.extra_headers) request_.set(name, value);
    request_.body() = std::move(current_.request.body);
    request_.keep_alive(true);
    request_.prepare_payload();
    auto self = shared_from_this();
    http::async_write(*socket_, request_,
                      [this, self](const boost::system::error_code& ec, size_t) {
                        if (!broken_.ok()) return;
                        if (ec) {
                          Fail(Unavailable("HTTP/1.1: write: " + ec.message()));
                          return;
                        }
                        if (current_.streaming) {
                          ReadStreamHead();
                        } else {
                          ReadResponse();
                        }
                      });
  }

  void ReadResponse() {
    parser_.emplace();
    parser_->body_limit(options_.max_response_bytes);
    auto self = shared_from_this();
    http::async_read(*socket_, buffer_, *parser_,
                     [this, self](const boost::system::error_code& ec, size_t) {
                       if (!broken_.ok()) return;
                       if (ec) {
                         Fail(ReadError(ec));
                         return;
                       }
                       http::response<http::string_body> res = parser_->release();
                       parser_.reset();
                       Response r;
                       r.status = static_cast<int>(res.result_int());
                       r.content_type = std::string(res[http::field::content_type]);
                       r.body = std::move(res.body());
                       const bool keep_alive = res.keep_alive();
                       asio::post(io_, [h = std::move(current_.done), r = std::move(r)]() mutable {
                         h(Result<Response>(std::move(r)));
                       });
                       FinishCurrent(keep_alive);
                     });
  }

  void ReadStreamHead() {
    stream_parser_.emplace();
    // Not boost::none: Beast 1.81 compares a Content-Length against an empty limit as if the
    // limit were smaller than anything, so a non-chunked answer would fail with body_limit.
    stream_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    auto self = shared_from_this();
    http::async_read_header(*socket_, buffer_, *stream_parser_,
                            [this, self](const boost::system::error_code& ec, size_t) {
                              if (!broken_.ok()) return;
                              if (ec) {
                                Fail(ReadError(ec));
                                return;
                              }
                              const auto& head = stream_parser_->get();
                              if (current_.handlers.on_head) {
                                const auto type = head[http::field::content_type];
                                current_.handlers.on_head(
                                    static_cast<int>(head.result_int()),
                                    std::string_view(type.data(), type.size()));
                              }
                              ReadStreamBody();
                            });
  }

  void ReadStreamBody() {
    if (stream_parser_->is_done()) {
      const bool keep_alive = stream_parser_->get().keep_alive();
      stream_parser_.reset();
      asio::post(io_, [h = std::move(current_.handlers.on_end)] { h(Status::Ok()); });
      FinishCurrent(keep_alive);
      return;
    }
    auto& body = stream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    auto self = shared_from_this();
    // read_some: deliver each piece as it arrives instead of waiting for a full buffer.
    http::async_read_some(*socket_, buffer_, *stream_parser_,
                          [this, self](boost::system::error_code ec, size_t) {
                            if (!broken_.ok()) return;
                            if (ec == http::error::need_buffer) ec = {};
                            const size_t got = chunk_.size() - stream_parser_->get().body().size;
                            if (got > 0 && current_.handlers.on_data) {
                              current_.handlers.on_data(std::string_view(chunk_.data(), got));
                            }
                            if (ec) {
                              Fail(ReadError(ec));
                              return;
                            }
                            ReadStreamBody();
                          });
  }

  void FinishCurrent(bool keep_alive) {
    busy_ = false;
    current_ = Pending();
    if (!keep_alive) {
      Fail(Unavailable("HTTP/1.1: the server closed the keep-alive connection"));
      return;
    }
    DoNext();
  }

  static Status ReadError(const boost::system::error_code& ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof) {
      return Unavailable("HTTP/1.1: the server closed the connection");
    }
    if (ec == http::error::body_limit) {
      return Status(StatusCode::kPayloadTooLarge, "the response body exceeds the limit");
    }
    if (ec.category() ==
        http::make_error_code(http::error::end_of_stream).category()) {  // Beast's parser errors
      return Internal("HTTP/1.1: bad response: " + ec.message());
    }
    return Unavailable("HTTP/1.1: read: " + ec.message());
  }

  void FailPending(Pending p, const Status& status) {
    if (p.streaming) {
      asio::post(io_, [h = std::move(p.handlers.on_end), s = status] { h(s); });
    } else {
      asio::post(io_, [h = std::move(p.done), s = status]() mutable {
        h(Result<Response>(std::move(s)));
      });
    }
  }

  // Marks the connection failed: closes the socket and fails the current and queued requests.
  void Fail(Status status) {
    if (!broken_.ok()) return;
    broken_ = std::move(status);
    boost::system::error_code ignored;
    timer_.cancel();
    socket_->lowest_layer().close(ignored);
    if (connect_done_) {
      asio::post(io_, [done = std::move(connect_done_), s = broken_] { done(s); });
      connect_done_ = nullptr;
    }
    if (busy_) {
      busy_ = false;
      FailPending(std::move(current_), broken_);
      current_ = Pending();
    }
    while (!queue_.empty()) {
      FailPending(std::move(queue_.front()), broken_);
      queue_.pop_front();
    }
  }

  asio::io_context& io_;
  ConnectionOptions options_;
  std::string authority_;                 // host:port, sent as Host
  std::vector<tcp::endpoint> endpoints_;  // referenced by the pending connect
  std::unique_ptr<Socket> socket_;
  asio::steady_timer timer_;  // connect timeout
  std::function<void(Status)> connect_done_;
  bool connected_ = false;
  bool busy_ = false;  // current_ is being sent or answered
  Pending current_;
  std::deque<Pending> queue_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::optional<http::response_parser<http::buffer_body>> stream_parser_;
  std::array<char, kStreamChunkSize> chunk_;
  Status broken_;  // first failure; the connection is unusable after it
};

}  // namespace

std::shared_ptr<Connection> MakeHttp1Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls) {
  if (options.origin.tls()) {
    return std::make_shared<Http1Connection<TlsSocket>>(io, options, addresses, tls);
  }
  return std::make_shared<Http1Connection<PlainSocket>>(io, options, addresses, tls);
}

}  // namespace internal
}  // namespace kvc::loadgen
