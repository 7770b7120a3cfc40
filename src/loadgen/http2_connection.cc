// HTTP/2 client connection: an nghttp2 client session fed from an Asio socket (h2c with prior
// knowledge, or TLS with ALPN h2). Frames are exchanged with nghttp2_session_mem_recv/mem_send;
// one read and at most one write are outstanding at a time.
#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "loadgen/transport.h"

namespace kvc::loadgen {
namespace internal {
namespace {

// Serialized frames gathered before one socket write.
constexpr size_t kMaxWriteChunk = 64 * 1024;
constexpr size_t kReadBufferSize = 64 * 1024;

std::string Http2Error(uint32_t code) { return nghttp2_http2_strerror(code); }

// An HTTP/2 client connection over `Socket` (PlainSocket or TlsSocket). Owns its socket and
// nghttp2 session; streams live in streams_ until nghttp2 closes them. Thread-safety: see
// Connection (one io_context, one thread; no strand needed).
template <class Socket>
class Http2Connection final : public Connection {
 public:
  Http2Connection(asio::io_context& io, ConnectionOptions options,
                  const std::vector<std::string>& addresses, asio::ssl::context* tls)
      : io_(io),
        options_(std::move(options)),
        authority_(options_.origin.Authority()),
        endpoints_(ToEndpoints(addresses, options_.origin.port)),
        socket_(NewSocket<Socket>(io, tls)),
        timer_(io) {}

  ~Http2Connection() override {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  void Connect(std::function<void(Status)> done) override {
    auto self = shared_from_this();
    connect_done_ = std::move(done);
    timer_.expires_after(options_.connect_timeout);
    timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (!ec && connect_done_) {
        Fail(Unavailable("connecting to " + options_.origin.Authority() + " timed out"));
      }
    });
    OpenSocket(*socket_, endpoints_, options_.origin, "h2", [this, self](Status s) {
      if (!broken_.ok()) return;  // timed out or closed meanwhile
      if (!s.ok()) {
        Fail(std::move(s));
        return;
      }
      if (Status init = InitSession(); !init.ok()) {
        Fail(std::move(init));
        return;
      }
      DoRead();
      Flush();
    });
  }

  void Send(Request request, ResponseHandler done) override {
    auto stream = std::make_unique<StreamState>();
    stream->done = std::move(done);
    Submit(std::move(request), std::move(stream));
  }

  void SendStreaming(Request request, StreamHandlers handlers) override {
    auto stream = std::make_unique<StreamState>();
    stream->streaming = true;
    stream->handlers = std::move(handlers);
    Submit(std::move(request), std::move(stream));
  }

  void Close() override {
    if (!broken_.ok()) return;
    closing_ = true;
    FailStreams(Unavailable("closed by the client"));
    if (session_ != nullptr) {
      // Say goodbye (GOAWAY) if the socket takes it at once; Fail() below closes the socket
      // when the write finishes, or right away if none could start.
      nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
      Flush();
      if (writing_) return;
    }
    Fail(Unavailable("closed by the client"));
  }

  bool usable() const override { return broken_.ok() && !goaway_ && !closing_; }

 private:
  // One request/response exchange. Owned by streams_ from submission until nghttp2 closes the
  // stream (nghttp2 reads the request body from here while sending).
  struct StreamState {
    std::string request_body;
    size_t request_offset = 0;
    bool streaming = false;
    ResponseHandler done;     // !streaming
    StreamHandlers handlers;  // streaming
    int status = 0;
    std::string content_type;
    std::string body;
    bool head_delivered = false;
    bool end_stream = false;
    bool completed = false;  // the callback was delivered (or is posted)
    Status failure;          // e.g. response over max_response_bytes
  };

  void Submit(Request request, std::unique_ptr<StreamState> stream) {
    if (!usable() || session_ == nullptr) {
      Status why = !broken_.ok() ? broken_
                   : goaway_     ? Unavailable("the server sent GOAWAY")
                   : closing_    ? Unavailable("closed by the client")
                                 : Unavailable("not connected");
      CompleteFailed(*stream, std::move(why));
      return;
    }
    const std::string& scheme = options_.origin.scheme;
    const std::string length = std::to_string(request.body.size());
    std::vector<nghttp2_nv> nva;
    nva.reserve(6 + (request.headers ? request.headers->size() : 0) + request.extra_headers.size());
    auto add = [&nva](std::string_view name, std::string_view value) {
      // nghttp2 copies names and values (no NO_COPY flags); the casts only satisfy its C API.
      nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                     value.size(), NGHTTP2_NV_FLAG_NONE});
    };
    add(":method", "POST");
    add(":scheme", scheme);
    add(":authority", authority_);
    add(":path", request.path);
    if (request.headers) {
      for (const auto& [name, value] : *request.headers) add(name, value);
    }
    for (const auto& [name, value] : request.extra_headers) add(name, value);
    add("content-length", length);
    stream->request_body = std::move(request.body);
    nghttp2_data_provider provider{};
    provider.source.ptr = stream.get();
    provider.read_callback = &Http2Connection::ReadRequestBody;
    const int32_t id =
        nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                               stream->request_body.empty() ? nullptr : &provider, stream.get());
    if (id < 0) {
      CompleteFailed(*stream, Internal(std::string("HTTP/2: cannot submit a request: ") +
                                       nghttp2_strerror(id)));
      return;
    }
    streams_[id] = std::move(stream);
    Flush();
  }

  Status InitSession() {
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
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(options_.h2_stream_window)},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0 ||
        nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                              options_.h2_connection_window) != 0) {
      return Internal("nghttp2: cannot submit SETTINGS");
    }
    return Status::Ok();
  }

  void DoRead() {
    auto self = shared_from_this();
    socket_->async_read_some(
        asio::buffer(read_buffer_), [this, self](const boost::system::error_code& ec, size_t n) {
          if (!broken_.ok()) return;
          if (ec) {
            Fail(Unavailable(ec == asio::error::eof
                                 ? std::string("HTTP/2: the server closed the connection")
                                 : "HTTP/2: read: " + ec.message()));
            return;
          }
          const ssize_t rv = nghttp2_session_mem_recv(session_, read_buffer_.data(), n);
          if (rv < 0) {
            Fail(Internal(std::string("HTTP/2: bad data from the server: ") +
                          (protocol_error_.empty() ? nghttp2_strerror(static_cast<int>(rv))
                                                   : protocol_error_)));
            return;
          }
          Flush();
          if (broken_.ok()) DoRead();
        });
  }

  // Writes what nghttp2 has queued, one chunk at a time; notices a finished session.
  void Flush() {
    if (writing_ || !broken_.ok() || session_ == nullptr) return;
    write_buffer_.clear();
    while (write_buffer_.size() < kMaxWriteChunk) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        Fail(Internal(std::string("nghttp2_session_mem_send: ") +
                      nghttp2_strerror(static_cast<int>(n))));
        return;
      }
      if (n == 0) break;
      write_buffer_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (write_buffer_.empty()) {
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        Fail(closing_                  ? Unavailable("closed by the client")
             : protocol_error_.empty() ? Unavailable("HTTP/2: the session ended")
                                       : Internal("HTTP/2: the session ended: " + protocol_error_));
      }
      return;
    }
    writing_ = true;
    auto self = shared_from_this();
    asio::async_write(*socket_, asio::buffer(write_buffer_),
                      [this, self](const boost::system::error_code& ec, size_t) {
                        writing_ = false;
                        if (!broken_.ok()) return;
                        if (ec) {
                          Fail(Unavailable("HTTP/2: write: " + ec.message()));
                          return;
                        }
                        Flush();
                      });
  }

  // Marks the connection failed: closes the socket and fails every open stream. Idempotent.
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
    FailStreams(broken_);
  }

  void FailStreams(const Status& status) {
    for (auto& [id, stream] : streams_) {
      if (!stream->completed) CompleteFailed(*stream, status);
    }
  }

  // Posts the failure callback of `stream` and marks it completed.
  void CompleteFailed(StreamState& stream, Status status) {
    stream.completed = true;
    if (stream.streaming) {
      asio::post(io_, [h = std::move(stream.handlers.on_end), s = std::move(status)] { h(s); });
    } else {
      asio::post(io_, [h = std::move(stream.done), s = std::move(status)]() mutable {
        h(Result<Response>(std::move(s)));
      });
    }
  }

  // Posts the callback of a stream nghttp2 closed.
  void CompleteClosed(StreamState& stream, int32_t id, uint32_t error_code) {
    if (stream.completed) return;
    if (!stream.failure.ok()) {
      CompleteFailed(stream, stream.failure);
      return;
    }
    if (!stream.end_stream) {
      CompleteFailed(stream, Internal("HTTP/2 stream " + std::to_string(id) +
                                      " was reset before the response ended (" +
                                      Http2Error(error_code) + ")"));
      return;
    }
    stream.completed = true;
    if (stream.streaming) {
      asio::post(io_, [h = std::move(stream.handlers.on_end)] { h(Status::Ok()); });
      return;
    }
    Response response;
    response.status = stream.status;
    response.content_type = std::move(stream.content_type);
    response.body = std::move(stream.body);
    asio::post(io_, [h = std::move(stream.done), r = std::move(response)]() mutable {
      h(Result<Response>(std::move(r)));
    });
  }

  static Http2Connection* Self(void* user_data) { return static_cast<Http2Connection*>(user_data); }

  static StreamState* Find(nghttp2_session* session, int32_t id) {
    return static_cast<StreamState*>(nghttp2_session_get_stream_user_data(session, id));
  }

  static ssize_t ReadRequestBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                                 uint32_t* data_flags, nghttp2_data_source* source, void*) {
    auto* s = static_cast<StreamState*>(source->ptr);
    const size_t n = std::min(length, s->request_body.size() - s->request_offset);
    // NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes for nghttp2, not a C string
    std::memcpy(buf, s->request_body.data() + s->request_offset, n);
    s->request_offset += n;
    if (s->request_offset == s->request_body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void*) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    StreamState* s = Find(session, frame->hd.stream_id);
    if (s == nullptr || s->head_delivered) return 0;  // trailers are ignored
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      s->status = 0;
      std::from_chars(v.data(), v.data() + v.size(), s->status);
    } else if (n == "content-type") {
      s->content_type.assign(v);
    }
    return 0;
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    Http2Connection* self = Self(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: {
        StreamState* s = Find(session, frame->hd.stream_id);
        if (s == nullptr) break;
        if (frame->hd.type == NGHTTP2_HEADERS && s->status >= 200 && !s->head_delivered) {
          s->head_delivered = true;
          if (s->streaming && !s->completed && s->handlers.on_head) {
            s->handlers.on_head(s->status, s->content_type);
          }
        }
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) s->end_stream = true;
        break;
      }
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 && self->connect_done_) {
          self->timer_.cancel();
          asio::post(self->io_, [done = std::move(self->connect_done_)] { done(Status::Ok()); });
          self->connect_done_ = nullptr;
        }
        break;
      case NGHTTP2_GOAWAY:
        // nghttp2 closes our streams above last_stream_id itself (REFUSED_STREAM).
        self->goaway_ = true;
        break;
      default:
        break;
    }
    return 0;
  }

  static int OnDataChunkRecv(nghttp2_session* session, uint8_t, int32_t stream_id,
                             const uint8_t* data, size_t len, void* user_data) {
    StreamState* s = Find(session, stream_id);
    if (s == nullptr || s->completed || !s->failure.ok()) return 0;
    const std::string_view chunk(reinterpret_cast<const char*>(data), len);
    if (s->streaming) {
      if (s->handlers.on_data) s->handlers.on_data(chunk);
      return 0;
    }
    if (s->body.size() + len > Self(user_data)->options_.max_response_bytes) {
      s->failure = Status(StatusCode::kPayloadTooLarge, "the response body exceeds the limit");
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
      return 0;
    }
    s->body.append(chunk);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                           void* user_data) {
    Http2Connection* self = Self(user_data);
    auto it = self->streams_.find(stream_id);
    if (it == self->streams_.end()) return 0;
    self->CompleteClosed(*it->second, stream_id, error_code);
    self->streams_.erase(it);
    return 0;
  }

  static int OnFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int lib_error_code,
                            void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Http2Connection* self = Self(user_data);
    auto it = self->streams_.find(frame->hd.stream_id);
    if (it == self->streams_.end()) return 0;
    if (!it->second->completed) {
      self->CompleteFailed(*it->second, Unavailable(std::string("HTTP/2: request not sent: ") +
                                                    nghttp2_strerror(lib_error_code)));
    }
    self->streams_.erase(it);
    return 0;
  }

  static int OnError(nghttp2_session*, int, const char* msg, size_t len, void* user_data) {
    Self(user_data)->protocol_error_.assign(msg, len);
    return 0;
  }

  asio::io_context& io_;
  ConnectionOptions options_;
  std::string authority_;                 // host:port, sent as :authority
  std::vector<tcp::endpoint> endpoints_;  // referenced by the pending connect
  std::unique_ptr<Socket> socket_;
  asio::steady_timer timer_;  // connect timeout
  std::function<void(Status)> connect_done_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<StreamState>> streams_;
  std::array<uint8_t, kReadBufferSize> read_buffer_;
  std::string write_buffer_;  // being written while writing_
  bool writing_ = false;
  bool goaway_ = false;
  bool closing_ = false;
  std::string protocol_error_;
  Status broken_;  // first failure; the connection is unusable after it
};

}  // namespace

std::shared_ptr<Connection> MakeHttp2Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls) {
  if (options.origin.tls()) {
    return std::make_shared<Http2Connection<TlsSocket>>(io, options, addresses, tls);
  }
  return std::make_shared<Http2Connection<PlainSocket>>(io, options, addresses, tls);
}

}  // namespace internal
}  // namespace kvc::loadgen
