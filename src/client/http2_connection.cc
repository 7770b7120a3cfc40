// HTTP/2 client connection: an nghttp2 client session fed from an Asio socket (h2c with prior
// knowledge, or TLS with ALPN h2). Frames are exchanged with nghttp2_session_mem_recv/mem_send;
// one read and at most one write are outstanding at a time.
#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/asio/write.hpp>
#include <charconv>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "client/transport.h"

namespace kvc::client {
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
class Http2Connection final : public ConnectionBase<Socket> {
  using Base = ConnectionBase<Socket>;
  using Base::broken_;
  using Base::io_;
  using Base::options_;
  using Base::socket_;

 public:
  using Base::Base;

  ~Http2Connection() override {
    if (session_ != nullptr) nghttp2_session_del(session_);
  }

  void Connect(std::function<void(Status)> done) override {
    this->Open(std::move(done), "h2", [this] {
      if (Status init = InitSession(); !init.ok()) {
        this->Fail(std::move(init));
        return;
      }
      DoRead();
      Flush();
    });
  }

  void Cancel(RequestId id) override {
    if (id == 0 || id > static_cast<RequestId>(std::numeric_limits<int32_t>::max())) return;
    const auto stream_id = static_cast<int32_t>(id);
    auto it = streams_.find(stream_id);
    if (it == streams_.end()) return;
    if (!it->second->completed) {
      CompleteFailed(*it->second, Unavailable("cancelled by the client"));
    }
    if (!broken_.ok()) return;
    // Also stops the upload of a body whose response already came (nghttp2 ignores a reset of
    // a stream it has closed meanwhile).
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    Flush();
  }

  void Close() override {
    if (!broken_.ok() || closing_) return;
    closing_ = true;
    FailRequests(Unavailable("closed by the client"));
    if (session_ != nullptr) {
      // Say goodbye (GOAWAY); once it is written Flush() ends the connection (Fail(), or the
      // linger first).
      nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
      Flush();
      if (writing_ || lingering_) return;
    }
    this->Fail(Unavailable("closed by the client"));
  }

  bool usable() const override { return broken_.ok() && !goaway_ && !closing_; }

 private:
  // One request/response exchange. Owned by streams_ from submission until nghttp2 closes the
  // stream (nghttp2 reads the request body from here while sending, possibly after the
  // response was delivered).
  struct StreamState {
    std::string request_body;
    size_t request_offset = 0;
    Receiver receiver;
    Response response;       // the body only when !receiver.stream
    bool head_done = false;  // the final (non-1xx) response HEADERS arrived
    bool completed = false;  // the callback was delivered (or is posted)
    Status failure;          // e.g. response over max_response_bytes
  };

  RequestId Submit(Request& request, Receiver& receiver) override {
    auto stream = std::make_unique<StreamState>();
    stream->receiver = std::move(receiver);
    if (!usable() || session_ == nullptr) {
      Status why = !broken_.ok() ? broken_
                   : goaway_     ? Unavailable("the server sent GOAWAY")
                   : closing_    ? Unavailable("closed by the client")
                                 : Unavailable("not connected");
      CompleteFailed(*stream, std::move(why));
      return 0;
    }
    const size_t header_count =
        (request.headers ? request.headers->size() : 0) + request.extra_headers.size();
    std::vector<nghttp2_nv> nva;
    nva.reserve(5 + header_count);
    auto add = [&nva](std::string_view name, std::string_view value) {
      // nghttp2 copies names and values (no NO_COPY flags); the casts only satisfy its C API.
      nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                     value.size(), NGHTTP2_NV_FLAG_NONE});
    };
    add(":method", request.method);
    add(":scheme", options_.origin.scheme);
    add(":authority", this->authority_);
    add(":path", request.path);
    bool framed = false;
    ForEachHeader(request, [&](const std::string& name, const std::string& value) {
      framed = framed || FramesBody(name, /*http1=*/false);
      add(name, value);
    });
    std::string length;
    if (!framed && BodyNeedsLength(request)) {
      length = std::to_string(request.body.size());
      add("content-length", length);
    }
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
      return 0;
    }
    streams_[id] = std::move(stream);
    Flush();
    return static_cast<RequestId>(id);
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

  // The failure to report when the transport ends: our own Close(), else the protocol error
  // that made nghttp2 end the session (it no longer wants to read), else `transport`.
  Status Ended(Status transport) const {
    if (closing_) return Unavailable("closed by the client");
    if (!protocol_error_.empty() && nghttp2_session_want_read(session_) == 0) {
      return Internal("HTTP/2: the session ended: " + protocol_error_);
    }
    return transport;
  }

  void DoRead() {
    reading_ = true;
    auto self = this->shared_from_this();
    socket_->async_read_some(
        asio::buffer(read_buffer_), [this, self](const boost::system::error_code& ec, size_t n) {
          reading_ = false;
          if (!broken_.ok()) return;
          if (ec) {
            this->Fail(Ended(Unavailable(
                ec == asio::error::eof ? std::string("HTTP/2: the server closed the connection")
                                       : "HTTP/2: read: " + ec.message())));
            return;
          }
          if (lingering_) {  // after GOAWAY: only waiting for the server to close
            DoRead();
            return;
          }
          const ssize_t rv = nghttp2_session_mem_recv(session_, read_buffer_.data(), n);
          if (rv < 0) {
            this->Fail(Internal(std::string("HTTP/2: bad data from the server: ") +
                                (protocol_error_.empty() ? nghttp2_strerror(static_cast<int>(rv))
                                                         : protocol_error_)));
            return;
          }
          Flush();
          // A session that wants no more (GOAWAY sent or received, nothing open) is ended by
          // Flush() once its last frames are written; reading on would only race the close.
          if (broken_.ok() && !reading_ && (lingering_ || nghttp2_session_want_read(session_))) {
            DoRead();
          }
        });
  }

  // Writes what nghttp2 has queued, one chunk at a time; ends a finished session.
  void Flush() {
    if (writing_ || lingering_ || !broken_.ok() || session_ == nullptr) return;
    write_buffer_.clear();
    while (write_buffer_.size() < kMaxWriteChunk) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        this->Fail(Internal(std::string("nghttp2_session_mem_send: ") +
                            nghttp2_strerror(static_cast<int>(n))));
        return;
      }
      if (n == 0) break;
      write_buffer_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (write_buffer_.empty()) {
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        if (closing_ && options_.close_linger.count() > 0) {
          Linger();
        } else {
          this->Fail(Ended(Unavailable("HTTP/2: the session ended")));
        }
      }
      return;
    }
    writing_ = true;
    auto self = this->shared_from_this();
    asio::async_write(*socket_, asio::buffer(write_buffer_),
                      [this, self](const boost::system::error_code& ec, size_t) {
                        writing_ = false;
                        if (!broken_.ok()) return;
                        if (ec) {
                          this->Fail(Ended(Unavailable("HTTP/2: write: " + ec.message())));
                          return;
                        }
                        Flush();
                      });
  }

  // After Close() wrote GOAWAY: half-closes and reads until the server closes or the linger
  // ends, then closes (Fail()).
  void Linger() {
    lingering_ = true;
    boost::system::error_code ignored;
    socket_->lowest_layer().shutdown(tcp::socket::shutdown_send, ignored);
    auto self = this->shared_from_this();
    this->timer_.expires_after(options_.close_linger);
    this->timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (!ec) this->Fail(Unavailable("closed by the client"));
    });
    if (!reading_) DoRead();
  }

  void FailRequests(const Status& status) override {
    for (auto& [id, stream] : streams_) {
      if (!stream->completed) CompleteFailed(*stream, status);
    }
  }

  // Posts the failure callback of `stream` and marks it completed.
  void CompleteFailed(StreamState& stream, Status status) {
    stream.completed = true;
    PostFailure(io_, stream.receiver, std::move(status));
  }

  // Posts the callback of a stream whose response ended (END_STREAM).
  void CompleteEnded(StreamState& stream) {
    if (stream.completed) return;
    if (!stream.failure.ok()) {
      CompleteFailed(stream, stream.failure);
      return;
    }
    stream.completed = true;
    PostSuccess(io_, stream.receiver, stream.response);
  }

  // Posts the failure callback of a stream nghttp2 closed before its response ended.
  void CompleteClosed(StreamState& stream, int32_t id, uint32_t error_code) {
    if (stream.completed) return;
    CompleteFailed(stream, !stream.failure.ok()
                               ? stream.failure
                               : Internal("HTTP/2 stream " + std::to_string(id) +
                                          " was reset before the response ended (" +
                                          Http2Error(error_code) + ")"));
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
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                      void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    StreamState* s = Find(session, frame->hd.stream_id);
    if (s == nullptr || s->completed) return 0;
    const bool keep = Self(user_data)->options_.keep_headers;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    Response& r = s->response;
    if (s->head_done) {  // trailers
      if (keep) r.trailers.emplace_back(n, v);
      return 0;
    }
    if (n == ":status") {
      // Each response head (1xx or final) starts afresh.
      r.status = 0;
      std::from_chars(v.data(), v.data() + v.size(), r.status);
      r.content_type.clear();
      r.headers.clear();
      return 0;
    }
    if (n == "content-type") r.content_type.assign(v);
    if (keep && !n.empty() && n[0] != ':') r.headers.emplace_back(n, v);
    return 0;
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    Http2Connection* self = Self(user_data);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: {
        StreamState* s = Find(session, frame->hd.stream_id);
        if (s == nullptr) break;
        if (frame->hd.type == NGHTTP2_HEADERS && !s->head_done && s->response.status >= 200) {
          s->head_done = true;
          if (s->receiver.stream && !s->completed && s->receiver.stream->on_head) {
            s->receiver.stream->on_head(s->response);
          }
        }
        // The response is complete even if the request body is still being sent.
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) self->CompleteEnded(*s);
        break;
      }
      case NGHTTP2_SETTINGS:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) self->ConnectDone();
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
    if (s->receiver.stream) {
      if (s->receiver.stream->on_data) s->receiver.stream->on_data(chunk);
      return 0;
    }
    if (s->response.body.size() + len > Self(user_data)->options_.max_response_bytes) {
      s->failure = Status(StatusCode::kPayloadTooLarge, "the response body exceeds the limit");
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
      return 0;
    }
    s->response.body.append(chunk);
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

  // nghttp2's description of the last protocol error it detected, for error messages.
  static int OnError(nghttp2_session*, int, const char* msg, size_t len, void* user_data) {
    Self(user_data)->protocol_error_.assign(msg, len);
    return 0;
  }

  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<StreamState>> streams_;
  std::array<uint8_t, kReadBufferSize> read_buffer_;
  std::string write_buffer_;  // being written while writing_
  bool reading_ = false;      // a read is outstanding
  bool writing_ = false;
  bool goaway_ = false;
  bool closing_ = false;    // Close() was called
  bool lingering_ = false;  // GOAWAY written, socket half-closed, waiting for the server
  std::string protocol_error_;
};

}  // namespace

std::shared_ptr<Connection> MakeHttp2Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls) {
  return MakeOverSocket<Http2Connection>(io, options, addresses, tls);
}

}  // namespace internal
}  // namespace kvc::client
