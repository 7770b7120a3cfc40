// HTTP/1.1 keep-alive client connection (Beast) over plain TCP or TLS: requests are queued and
// sent one at a time; a streamed response body (watch) is delivered as it arrives.
#include <array>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <limits>
#include <optional>

#include "client/transport.h"

namespace kvc::client {
namespace internal {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kStreamChunkSize = 16 * 1024;

// The status, content type and (if `keep_headers`) header fields of a Beast response head.
template <class Message>
Response HeadOf(const Message& message, bool keep_headers) {
  Response head;
  head.status = static_cast<int>(message.result_int());
  head.content_type = std::string(message[http::field::content_type]);
  if (keep_headers) {
    for (const auto& field : message) {
      head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
  }
  return head;
}

// An HTTP/1.1 keep-alive client connection over `Socket` (PlainSocket or TlsSocket). Owns its
// socket, the request being answered (current_) and the queue behind it. Thread-safety: see
// Connection (one io_context, one thread).
template <class Socket>
class Http1Connection final : public ConnectionBase<Socket> {
  using Base = ConnectionBase<Socket>;
  using Base::broken_;
  using Base::io_;
  using Base::socket_;

 public:
  using Base::Base;

  void Connect(std::function<void(Status)> done) override {
    this->Open(std::move(done), "http/1.1", [this] {
      connected_ = true;
      this->ConnectDone();
      DoNext();
    });
  }

  void Cancel(RequestId id) override {
    if (id == 0) return;
    if (busy_ && current_.id == id) {
      // HTTP/1.1 cannot skip the rest of a response: the connection goes with it.
      busy_ = false;
      PostFailure(io_, current_.receiver, Unavailable("cancelled by the client"));
      current_ = Pending();
      this->Fail(Unavailable("HTTP/1.1: the connection was closed to cancel a request"));
      return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->id != id) continue;
      PostFailure(io_, it->receiver, Unavailable("cancelled by the client"));
      queue_.erase(it);
      return;
    }
  }

  void Close() override { this->Fail(Unavailable("closed by the client")); }

  bool usable() const override { return broken_.ok(); }

 private:
  struct Pending {
    RequestId id = 0;
    Request request;
    Receiver receiver;
  };

  RequestId Submit(Request& request, Receiver& receiver) override {
    if (!broken_.ok()) {
      PostFailure(io_, receiver, broken_);
      return 0;
    }
    Pending p{++last_id_, std::move(request), std::move(receiver)};
    const RequestId id = p.id;
    queue_.push_back(std::move(p));
    DoNext();
    return id;
  }

  void DoNext() {
    if (busy_ || !connected_ || !broken_.ok() || queue_.empty()) return;
    busy_ = true;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    const Request& r = current_.request;
    request_ = {};
    request_.method_string(r.method);
    request_.target(r.path);
    request_.version(11);
    bool framed = false;
    ForEachHeader(r, [&](const std::string& name, const std::string& value) {
      framed = framed || FramesBody(name, /*http1=*/true);
      request_.insert(name, value);
    });
    if (request_.find(http::field::host) == request_.end()) {
      request_.set(http::field::host, this->authority_);
    }
    if (!framed && BodyNeedsLength(r)) request_.content_length(r.body.size());
    request_.body() = std::move(current_.request.body);
    write_failure_ = Status::Ok();
    auto self = this->shared_from_this();
    http::async_write(*socket_, request_,
                      [this, self](const boost::system::error_code& ec, size_t) {
                        if (!broken_.ok()) return;
                        if (ec) {
                          // The server may have answered before closing on the body (e.g.
                          // 413 without reading it): read that answer, then close.
                          write_failure_ = Unavailable("HTTP/1.1: write: " + ec.message());
                          boost::system::error_code ignored;
                          socket_->lowest_layer().shutdown(tcp::socket::shutdown_send, ignored);
                        }
                        if (current_.receiver.stream) {
                          ReadStreamHead();
                        } else {
                          ReadResponse();
                        }
                      });
  }

  void ReadResponse() {
    parser_.emplace();
    parser_->body_limit(this->options_.max_response_bytes);
    if (current_.request.method == "HEAD") parser_->skip(true);
    auto self = this->shared_from_this();
    http::async_read(*socket_, buffer_, *parser_,
                     [this, self](const boost::system::error_code& ec, size_t) {
                       if (ReadFailed(ec)) return;
                       http::response<http::string_body> res = parser_->release();
                       parser_.reset();
                       Response r = HeadOf(res, this->options_.keep_headers);
                       r.body = std::move(res.body());
                       const bool keep_alive = res.keep_alive();
                       PostSuccess(io_, current_.receiver, r);
                       FinishCurrent(keep_alive);
                     });
  }

  void ReadStreamHead() {
    stream_parser_.emplace();
    // Not boost::none: Beast 1.81 compares a Content-Length against an empty limit as if the
    // limit were smaller than anything, so a non-chunked answer would fail with body_limit.
    stream_parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    auto self = this->shared_from_this();
    http::async_read_header(*socket_, buffer_, *stream_parser_,
                            [this, self](const boost::system::error_code& ec, size_t) {
                              if (ReadFailed(ec)) return;
                              if (current_.receiver.stream->on_head) {
                                current_.receiver.stream->on_head(
                                    HeadOf(stream_parser_->get(), this->options_.keep_headers));
                              }
                              ReadStreamBody();
                            });
  }

  void ReadStreamBody() {
    if (stream_parser_->is_done()) {
      const bool keep_alive = stream_parser_->get().keep_alive();
      stream_parser_.reset();
      Response none;
      PostSuccess(io_, current_.receiver, none);
      FinishCurrent(keep_alive);
      return;
    }
    auto& body = stream_parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    auto self = this->shared_from_this();
    // read_some: deliver each piece as it arrives instead of waiting for a full buffer.
    http::async_read_some(
        *socket_, buffer_, *stream_parser_, [this, self](boost::system::error_code ec, size_t) {
          if (!broken_.ok()) return;
          if (ec == http::error::need_buffer) ec = {};
          const size_t got = chunk_.size() - stream_parser_->get().body().size;
          if (got > 0 && current_.receiver.stream->on_data) {
            current_.receiver.stream->on_data(std::string_view(chunk_.data(), got));
          }
          if (ec) {
            this->Fail(ReadError(ec));
            return;
          }
          ReadStreamBody();
        });
  }

  void FinishCurrent(bool keep_alive) {
    busy_ = false;
    current_ = Pending();
    if (!write_failure_.ok()) {
      this->Fail(write_failure_);
      return;
    }
    if (!keep_alive) {
      this->Fail(Unavailable("HTTP/1.1: the server closed the keep-alive connection"));
      return;
    }
    DoNext();
  }

  // For a read handler: true if the connection failed before, or fails now with `ec`.
  bool ReadFailed(const boost::system::error_code& ec) {
    if (!broken_.ok()) return true;
    if (ec) this->Fail(ReadError(ec));
    return !broken_.ok();
  }

  // A failed read; after a failed write, the write's failure.
  Status ReadError(const boost::system::error_code& ec) const {
    if (!write_failure_.ok()) return write_failure_;
    if (ec == http::error::end_of_stream || ec == asio::error::eof) {
      return Unavailable("HTTP/1.1: the server closed the connection");
    }
    if (ec == http::error::partial_message) {
      return Unavailable("HTTP/1.1: the server closed the connection inside a response");
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

  void FailRequests(const Status& status) override {
    if (busy_) {
      busy_ = false;
      PostFailure(io_, current_.receiver, status);
      current_ = Pending();
    }
    while (!queue_.empty()) {
      PostFailure(io_, queue_.front().receiver, status);
      queue_.pop_front();
    }
  }

  bool connected_ = false;
  bool busy_ = false;  // current_ is being sent or answered
  RequestId last_id_ = 0;
  Pending current_;
  std::deque<Pending> queue_;
  http::request<http::string_body> request_;
  Status write_failure_;  // the write of current_ failed: its answer is the last
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::optional<http::response_parser<http::buffer_body>> stream_parser_;
  std::array<char, kStreamChunkSize> chunk_;
};

}  // namespace

std::shared_ptr<Connection> MakeHttp1Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls) {
  return MakeOverSocket<Http1Connection>(io, options, addresses, tls);
}

}  // namespace internal
}  // namespace kvc::client
