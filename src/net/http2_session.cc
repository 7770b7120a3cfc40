// HTTP/2 server session (h2c with prior knowledge, or h2 by ALPN over TLS) on nghttp2. nghttp2 does
// the framing, flow control and HPACK; this class moves bytes between it and the socket, turns each
// request stream into a service::HttpRequest, and feeds responses back through data providers,
// deferring streaming bodies (watch) until bytes arrive.
#include <nghttp2/nghttp2.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <list>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "net/session.h"
#include "service/http_status.h"

namespace kvc::net {
namespace {

struct H2Stream {
  int32_t id = 0;
  service::HttpRequest req;
  size_t header_bytes = 0;
  bool too_large = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool headers_too_large = false;
  bool dispatched = false;
  bool responded = false;
  bool head_request = false;  // HEAD: the answer is its header block alone (RFC 9110 9.3.2)
  std::shared_ptr<std::atomic<bool>> client_gone;  // HttpRequest::client_gone
  // Response body.
  std::string out;
  size_t out_off = 0;
  bool eof = false;
  bool deferred = false;
  // Streaming: bytes ever queued and ever taken into DATA frames, and the sinks' `written`
  // callbacks, each due once `taken` reaches its mark. A list, not a deque: libstdc++'s deque
  // allocates when constructed, and most streams (every plain request) never use this.
  uint64_t queued = 0;
  uint64_t taken = 0;
  std::list<std::pair<uint64_t, std::function<void()>>> written;
  std::shared_ptr<service::StreamSource> source;
  std::unique_ptr<asio::steady_timer> heartbeat;
  std::string heartbeat_bytes;
  std::chrono::milliseconds heartbeat_interval{0};
};

// The session whose Feed() this thread is inside, if any: an answer given from within it (a
// read-cache hit, an error) is on that session's own thread, synchronously, and is applied at
// once instead of posted. Each thread reads only its own value, so no other thread can race it.
thread_local const void* t_feeding_session = nullptr;

// Stream: tcp::socket (h2c) or TlsStream (h2 negotiated with ALPN).
template <class Stream>
class Http2Session : public Session, public std::enable_shared_from_this<Http2Session<Stream>> {
 public:
  Http2Session(ServerContext* ctx, Stream stream)
      : ctx_(ctx),
        socket_(std::move(stream)),
        housekeeping_(socket_.get_executor()),
        linger_timer_(socket_.get_executor()) {
    boost::system::error_code ec;
    auto ep = LowestSocket(socket_).remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  ~Http2Session() override {
    // Streams left open (e.g. the I/O loop stopped after the shutdown grace period) must still
    // release their sources, which hold engine subscriptions.
    ctx_->h2_streams_open -= static_cast<int64_t>(streams_.size());
    for (auto& [id, st] : streams_) {
      if (st->client_gone && !st->responded) st->client_gone->store(true);
      if (!st->dispatched) ReleaseBody(st.get());
      if (st->source) st->source->Cancel();
    }
    if (session_) nghttp2_session_del(session_);
    ctx_->registry.Remove(this);
  }

  void Start(std::string initial) {
    ctx_->registry.Add(this, this->weak_from_this());
    nghttp2_session_callbacks* cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &OnDataChunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &OnFrameRecv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &OnStreamClose);
    nghttp2_option* opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_max_settings(opt, 64);
    nghttp2_session_server_new2(&session_, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);

    const auto& o = ctx_->options;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.h2_max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(o.h2_initial_window)},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(o.max_header_bytes)},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv, std::size(iv));
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, o.h2_connection_window);
    if (!Feed(initial.data(), initial.size())) return;
    // A connection accepted while the server shuts down is told to go away at once.
    if (ctx_->stopping) Shutdown();
    ArmHousekeeping();
    DoWrite();
    DoRead();
  }

  void Shutdown() override {
    asio::post(socket_.get_executor(), [self = this->shared_from_this()] {
      if (self->closed_) return;
      if (self->lingering_) {
        self->Close();
        return;
      }
      self->shutting_down_ = true;
      spdlog::debug("{}: HTTP/2 shutdown with {} open streams", self->peer_, self->streams_.size());
      nghttp2_submit_goaway(self->session_, NGHTTP2_FLAG_NONE,
                            nghttp2_session_get_last_proc_stream_id(self->session_),
                            NGHTTP2_NO_ERROR, nullptr, 0);
      // End streaming responses; regular in-flight requests complete normally. Ending a stream
      // may close it (and erase it from streams_) once written, so collect first and write once.
      std::vector<H2Stream*> streaming;
      for (auto& [id, st] : self->streams_) {
        if (st->source) streaming.push_back(st.get());
      }
      for (H2Stream* st : streaming) self->EndStreamBody(st, /*write=*/false);
      self->DoWrite();
    });
  }

  // --- called on the session's I/O thread by sinks ---
  void StreamSend(int32_t id, H2Stream* expected, const std::string& bytes,
                  std::function<void()> written = nullptr) {
    H2Stream* st = Find(id, expected);
    if (!st || st->eof) return;
    if (st->out.size() - st->out_off + bytes.size() > ctx_->options.max_stream_buffer_bytes) {
      spdlog::info("{}: stream {} client too slow, resetting", peer_, id);
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
      DoWrite();
      return;
    }
    if (st->out_off > 0 && st->out_off * 2 > st->out.size()) {
      st->out.erase(0, st->out_off);
      st->out_off = 0;
    }
    st->out += bytes;
    st->queued += bytes.size();
    if (written) st->written.emplace_back(st->queued, std::move(written));
    Resume(st);
  }

  void StreamClose(int32_t id, H2Stream* expected) {
    H2Stream* st = Find(id, expected);
    if (st) EndStreamBody(st);
  }

  // The source failed: reset the stream so the client sees a broken body.
  void StreamAbort(int32_t id, H2Stream* expected) {
    H2Stream* st = Find(id, expected);
    if (!st || st->eof) return;
    if (st->source) {
      st->source->Cancel();
      st->source.reset();
    }
    if (st->heartbeat) st->heartbeat->cancel();
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
    DoWrite();
  }

 private:
  H2Stream* Find(int32_t id, H2Stream* expected) {
    auto it = streams_.find(id);
    if (it == streams_.end() || it->second.get() != expected) return nullptr;
    return it->second.get();
  }

  // Makes nghttp2 poll the stream's body again; writes unless told not to (callers iterating
  // streams_ must not write, since a write can close and erase streams).
  void Resume(H2Stream* st, bool write = true) {
    if (st->deferred) {
      st->deferred = false;
      nghttp2_session_resume_data(session_, st->id);
    }
    if (write) DoWrite();
  }

  void EndStreamBody(H2Stream* st, bool write = true) {
    if (st->source) {
      st->source->Cancel();
      st->source.reset();
    }
    if (st->heartbeat) st->heartbeat->cancel();
    st->eof = true;
    Resume(st, write);
  }

  // Hands `data` to nghttp2. REQUIRES: the caller calls DoWrite() next (Start and OnRead do), which
  // sends whatever the requests answered on the spot queued (FlushSoon relies on it).
  bool Feed(const char* data, size_t n) {
    const void* const outer = std::exchange(t_feeding_session, this);
    ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), n);
    t_feeding_session = outer;
    if (rv < 0) {
      spdlog::debug("{}: HTTP/2 protocol error: {}", peer_, nghttp2_strerror(static_cast<int>(rv)));
      // Let nghttp2 send its GOAWAY if it queued one, then close.
      close_after_write_ = true;
      DoWrite();
      return false;
    }
    return true;
  }

  void DoRead() {
    if (closed_ || reading_) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(read_buf_),
                            [self = this->shared_from_this()](boost::system::error_code ec,
                                                              size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      Close();
      return;
    }
    if (lingering_) {  // discarded
      lingered_bytes_ += n;
      if (lingered_bytes_ >= ctx_->options.linger_max_bytes) {
        Close();
        return;
      }
      DoRead();
      return;
    }
    const uint64_t dispatched_before = dispatched_;
    if (!Feed(read_buf_.data(), n)) return;
    // Bytes that completed no request (WINDOW_UPDATE, PING, SETTINGS, a partial request) get
    // no answer to carry our ACK, and a client that does not set TCP_NODELAY then holds its
    // next request until the kernel's delayed ACK fires, 40 ms later. Acknowledge those at
    // once; reads that complete requests are acknowledged by the responses.
    if (dispatched_ == dispatched_before) QuickAck(LowestSocket(socket_));
    DoWrite();
    DoRead();
    closed_streams_.clear();  // nothing below this completion handler holds one of them
  }

  void DoWrite() {
    if (writing_ || closed_ || lingering_) return;
    write_buf_.clear();
    while (write_buf_.size() < 256 * 1024) {
      const uint8_t* data = nullptr;
      ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        Close();
        return;
      }
      if (n == 0) break;
      write_buf_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (write_buf_.empty()) {
      if (close_after_write_ ||
          (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) ||
          (shutting_down_ && streams_.empty())) {
        Linger();
      }
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(write_buf_),
                      [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
                        self->writing_ = false;
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->DoWrite();
                        self->closed_streams_.clear();  // as in OnRead
                      });
  }

  // A lingering close once the last frames (a GOAWAY) are written: a client still sending
  // (e.g. the rest of a body after a protocol error) would otherwise get a TCP reset, which can
  // destroy the GOAWAY before it is read. End our side, read and discard for up to
  // linger_timeout and linger_max_bytes, then close.
  void Linger() {
    if (closed_ || lingering_) return;
    if (shutting_down_ || ctx_->stopping) {  // a graceful stop: the client sends no more requests
      Close();
      return;
    }
    lingering_ = true;
    housekeeping_.cancel();
    boost::system::error_code ec;
    LowestSocket(socket_).shutdown(tcp::socket::shutdown_send, ec);
    if (ec || ctx_->options.linger_max_bytes == 0) {
      Close();
      return;
    }
    linger_timer_.expires_after(ctx_->options.linger_timeout);
    linger_timer_.async_wait([self = this->shared_from_this()](boost::system::error_code tec) {
      if (!tec) self->Close();
    });
    if (!reading_) DoRead();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    spdlog::debug("{}: HTTP/2 connection closed", peer_);
    for (auto& [id, st] : streams_) {
      if (!st->dispatched) ReleaseBody(st.get());
      if (st->source) st->source->Cancel();
      st->source.reset();
      if (st->heartbeat) st->heartbeat->cancel();
    }
    ctx_->h2_streams_open -= static_cast<int64_t>(streams_.size());
    streams_.clear();
    housekeeping_.cancel();
    linger_timer_.cancel();
    boost::system::error_code ec;
    LowestSocket(socket_).shutdown(tcp::socket::shutdown_both, ec);
    LowestSocket(socket_).close(ec);
  }

  // Runs every second: resets streams whose request did not complete within request_timeout
  // (they hold buffered bodies), and closes the connection after idle_timeout without open
  // streams or request frames (HEADERS, DATA). PING, SETTINGS and WINDOW_UPDATE frames do not
  // count, so a client that only pings cannot hold a connection forever; an open watch stream
  // or a request being answered keeps it.
  void ArmHousekeeping() {
    housekeeping_.expires_after(std::chrono::seconds(1));
    housekeeping_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (ec || self->closed_ || self->lingering_) return;
      self->Housekeeping();
    });
  }

  void Housekeeping() {
    const auto now = std::chrono::steady_clock::now();
    if (activity_ || !streams_.empty()) {
      last_activity_ = now;
      activity_ = false;
    }
    std::vector<int32_t> stale;
    for (auto& [id, st] : streams_) {
      if (!st->dispatched && now - st->started > ctx_->options.request_timeout) stale.push_back(id);
    }
    for (int32_t id : stale) {
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
    if (streams_.empty() && now - last_activity_ > ctx_->options.idle_timeout) {
      nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                            nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                            nullptr, 0);
      close_after_write_ = true;
    }
    DoWrite();
    if (!closed_) ArmHousekeeping();
  }

  // Undispatched request bodies are accounted per connection and server-wide.
  void ReleaseBody(H2Stream* st) {
    pending_body_bytes_ -= st->req.body.size();
    ctx_->pending_body_bytes -= st->req.body.size();
  }

  void Dispatch(H2Stream* st) {
    st->dispatched = true;
    ++dispatched_;
    ReleaseBody(st);
    if (st->headers_too_large) {
      service::HttpResponse r = service::ErrorResponse(
          Status(StatusCode::kHeadersTooLarge, "The request headers are too large."));
      Respond(st, std::move(r));
      return;
    }
    if (st->too_large) {
      Respond(st, service::ErrorResponse(Status(StatusCode::kPayloadTooLarge,
                                                "The request body exceeds the limit of " +
                                                    std::to_string(ctx_->options.max_body_bytes) +
                                                    " bytes.")));
      return;
    }
    if (st->req.scheme.empty()) st->req.scheme = kIsTls<Stream> ? "https" : "http";
    st->req.tls = kIsTls<Stream>;
    st->req.http2 = true;
    st->req.peer = peer_;
    st->client_gone = std::make_shared<std::atomic<bool>>(false);
    st->req.client_gone = st->client_gone;
    auto self = this->shared_from_this();
    const int32_t id = st->id;
    ++inflight_;
    ctx_->handler->Handle(std::move(st->req), [self, id, st](service::HttpResponse resp) {
      // Answered within this session's Feed() on its own thread: at once, so the answer leaves
      // with the write that follows the read (Feed's REQUIRES). From elsewhere: posted.
      if (t_feeding_session == self.get()) {
        self->Answer(id, st, std::move(resp));
        return;
      }
      asio::post(self->socket_.get_executor(), [self, id, st, resp = std::move(resp)]() mutable {
        self->Answer(id, st, std::move(resp));
      });
    });
  }

  // The handler's answer for stream `id`, on this session's thread.
  void Answer(int32_t id, H2Stream* st, service::HttpResponse resp) {
    --inflight_;
    H2Stream* live = closed_ ? nullptr : Find(id, st);
    if (!live) {
      if (resp.stream) resp.stream->Cancel();
      return;
    }
    Respond(live, std::move(resp));
  }

  class Sink : public service::StreamSink {
   public:
    Sink(std::weak_ptr<Http2Session> s, int32_t id, H2Stream* st)
        : s_(std::move(s)), id_(id), st_(st) {}
    void Send(std::string bytes) override { SendThen(std::move(bytes), nullptr); }
    void SendThen(std::string bytes, const std::function<void()>& written) override {
      if (auto s = s_.lock()) {
        asio::post(s->socket_.get_executor(),
                   [s, id = id_, st = st_, b = std::move(bytes), w = written]() mutable {
                     s->StreamSend(id, st, b, std::move(w));
                   });
      }
    }
    void Close() override {
      if (auto s = s_.lock()) {
        asio::post(s->socket_.get_executor(), [s, id = id_, st = st_] { s->StreamClose(id, st); });
      }
    }
    void Abort() override {
      if (auto s = s_.lock()) {
        asio::post(s->socket_.get_executor(), [s, id = id_, st = st_] { s->StreamAbort(id, st); });
      }
    }

   private:
    std::weak_ptr<Http2Session> s_;
    int32_t id_;
    H2Stream* st_;  // identity check only; never dereferenced without Find()
  };

  void Respond(H2Stream* st, service::HttpResponse resp) {
    st->responded = true;
    // The header list points into `resp`, these buffers and string literals: the submit calls
    // below copy every name and value (nghttp2_submit_response), so nothing is copied here.
    char status[16];
    const size_t status_len = static_cast<size_t>(
        std::to_chars(status, status + sizeof status, resp.status).ptr - status);
    char length[24];
    const size_t length_len = static_cast<size_t>(
        std::to_chars(length, length + sizeof length, resp.body.size()).ptr - length);
    std::string hsts;
    if constexpr (kIsTls<Stream>) hsts = HstsValue(ctx_->options);
    std::vector<nghttp2_nv> nva;
    nva.reserve(4 + resp.headers.size());
    auto add = [&nva](std::string_view name, std::string_view value) {
      // NOLINTBEGIN(cppcoreguidelines-pro-type-const-cast): nghttp2 only reads them
      nva.push_back({const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(name.data())),
                     const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(value.data())),
                     name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
      // NOLINTEND(cppcoreguidelines-pro-type-const-cast)
    };
    add(":status", {status, status_len});
    if (!resp.content_type.empty()) add("content-type", resp.content_type);
    if (!resp.stream) add("content-length", {length, length_len});
    for (const auto& [name, value] : resp.headers) add(name, value);
    if (!hsts.empty()) add("strict-transport-security", hsts);
    if (st->head_request) {
      // The header block ends the stream: a DATA frame after it would be a protocol error for
      // the client (RFC 9113 8.1.1), so any body or stream is dropped here.
      if (resp.stream) resp.stream->Cancel();
      st->eof = true;
      if (nghttp2_submit_response(session_, st->id, nva.data(), nva.size(), nullptr) != 0) {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
      }
      FlushSoon();
      return;
    }
    nghttp2_data_provider prd;
    prd.source.ptr = st;
    prd.read_callback = &ReadBody;
    if (resp.stream) {
      st->source = resp.stream;
      st->heartbeat_bytes = resp.heartbeat;
      st->heartbeat_interval = resp.heartbeat_interval;
    } else {
      st->out = std::move(resp.body);
      st->eof = true;
    }
    int rv = nghttp2_submit_response(session_, st->id, nva.data(), nva.size(), &prd);
    if (rv != 0) {
      spdlog::warn("{}: cannot respond on stream {}: {}", peer_, st->id, nghttp2_strerror(rv));
      if (st->source) {
        st->source->Cancel();
        st->source.reset();
      }
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
      FlushSoon();  // not DoWrite: this may run inside nghttp2's receive callbacks (Answer)
      return;
    }
    if (st->source) {
      st->source->Start(std::make_shared<Sink>(this->weak_from_this(), st->id, st));
      if (!st->heartbeat_bytes.empty() && st->heartbeat_interval.count() > 0) {
        st->heartbeat = std::make_unique<asio::steady_timer>(socket_.get_executor());
        ScheduleHeartbeat(st->id, st);
      }
      if (shutting_down_) EndStreamBody(st);
    }
    FlushSoon();
  }

  // Writes after the handlers already queued on this connection's executor have run, so the
  // responses that complete together (a burst of cache hits, a group commit) leave in one
  // write and the client reads them in one go, instead of one write for the first and
  // another for the rest. An answer given while Feed() runs (a cache hit) needs no post: Feed's
  // caller writes right after it, which saves a turn of the event loop per request.
  void FlushSoon() {
    if (flush_posted_ || t_feeding_session == this) return;
    flush_posted_ = true;
    asio::post(socket_.get_executor(), [self = this->shared_from_this()] {
      self->flush_posted_ = false;
      self->DoWrite();
    });
  }

  void ScheduleHeartbeat(int32_t id, H2Stream* st) {
    st->heartbeat->expires_after(st->heartbeat_interval);
    st->heartbeat->async_wait(
        [self = this->shared_from_this(), id, st](boost::system::error_code ec) {
          if (ec) return;
          H2Stream* live = self->Find(id, st);
          if (!live || live->eof) return;
          self->StreamSend(id, st, live->heartbeat_bytes);
          if (self->Find(id, st)) self->ScheduleHeartbeat(id, st);
        });
  }

  // --- nghttp2 callbacks (run inside mem_recv / mem_send, on the I/O thread) ---
  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source* source, void*) {
    auto* st = static_cast<H2Stream*>(source->ptr);
    const size_t avail = st->out.size() - st->out_off;
    const size_t n = std::min(avail, length);
    if (n > 0) {
      std::memcpy(buf, st->out.data() + st->out_off, n);
      st->out_off += n;
      st->taken += n;
      while (!st->written.empty() && st->written.front().first <= st->taken) {
        auto done = std::move(st->written.front().second);
        st->written.pop_front();
        done();  // only signals its source; never calls back into the session
      }
    }
    if (st->out_off == st->out.size()) {
      st->out.clear();
      st->out_off = 0;
      if (st->eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
      } else if (n == 0) {
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
    }
    return static_cast<ssize_t>(n);
  }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<Http2Session*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    // Refused streams are retried by clients: used while shutting down and when too many
    // requests of this connection are still being handled.
    if (self->shutting_down_ || self->inflight_ >= self->ctx_->options.h2_max_inflight_requests) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    auto st = std::make_unique<H2Stream>();
    st->id = frame->hd.stream_id;
    ++self->ctx_->h2_streams_open;
    ++self->ctx_->h2_streams_total;
    nghttp2_session_set_stream_user_data(session, st->id, st.get());
    self->streams_[st->id] = std::move(st);
    return 0;
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto* self = static_cast<Http2Session*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto* st =
        static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
    if (!st) return 0;
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > self->ctx_->options.max_header_bytes) {
      st->headers_too_large = true;
      return 0;
    }
    // Views into nghttp2's buffers; only what the request keeps is copied, once.
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":method") {
      st->head_request = v == "HEAD";
      st->req.method = v;
    } else if (n == ":path") {
      const auto q = v.find('?');
      st->req.path = v.substr(0, q);
      if (q != std::string_view::npos) st->req.query = v.substr(q + 1);
    } else if (n == ":scheme") {
      st->req.scheme = v;
    } else if (n == ":authority") {
      st->req.authority = v;
    } else if (!n.empty() && n[0] != ':') {
      if (n == "host" && st->req.authority.empty()) st->req.authority = v;
      st->req.headers.emplace_back(n, v);
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t len, void* user) {
    auto* self = static_cast<Http2Session*>(user);
    auto* st = static_cast<H2Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (!st || st->too_large || st->dispatched) return 0;
    if (st->req.body.size() + len > self->ctx_->options.max_body_bytes) {
      self->ReleaseBody(st);
      st->too_large = true;
      st->req.body.clear();
      st->req.body.shrink_to_fit();
      return 0;
    }
    const auto& o = self->ctx_->options;
    if (self->pending_body_bytes_ + len > o.h2_max_pending_body_bytes ||
        self->ctx_->pending_body_bytes + len > o.max_pending_body_bytes) {
      // Too much unfinished upload buffered: refuse this stream (clients may retry).
      self->ReleaseBody(st);
      st->req.body.clear();
      st->req.body.shrink_to_fit();
      st->too_large = true;
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    st->req.body.append(reinterpret_cast<const char*>(data), len);
    self->pending_body_bytes_ += len;
    self->ctx_->pending_body_bytes += len;
    return 0;
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<Http2Session*>(user);
    if (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) {
      self->activity_ = true;  // requests; control frames alone leave the connection idle
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      auto* st = static_cast<H2Stream*>(
          nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
      if (st && !st->dispatched) self->Dispatch(st);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user) {
    auto* self = static_cast<Http2Session*>(user);
    auto it = self->streams_.find(stream_id);
    if (it == self->streams_.end()) return 0;
    H2Stream* st = it->second.get();
    --self->ctx_->h2_streams_open;
    if (st->client_gone && !st->responded) st->client_gone->store(true);
    if (!st->dispatched) self->ReleaseBody(st);
    if (st->source) {
      st->source->Cancel();
      st->source.reset();
    }
    if (st->heartbeat) st->heartbeat->cancel();
    // Not destroyed here: nghttp2 may still reference the data source within this call.
    self->closed_streams_.push_back(std::move(it->second));
    self->streams_.erase(it);
    return 0;
  }

  ServerContext* ctx_;
  Stream socket_;
  asio::steady_timer housekeeping_;
  asio::steady_timer linger_timer_;  // ends a lingering close
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  uint64_t dispatched_ = 0;        // requests dispatched on this connection
  uint32_t inflight_ = 0;          // dispatched requests not yet answered
  size_t pending_body_bytes_ = 0;  // bodies of undispatched streams
  nghttp2_session* session_ = nullptr;
  std::string peer_;
  std::array<char, 32 * 1024> read_buf_{};
  std::string write_buf_;
  bool writing_ = false;
  bool flush_posted_ = false;  // a FlushSoon() write is queued
  bool closed_ = false;
  bool close_after_write_ = false;
  bool reading_ = false;    // a read is pending
  bool lingering_ = false;  // see Linger()
  size_t lingered_bytes_ = 0;
  bool shutting_down_ = false;
  bool activity_ = false;  // a request frame arrived since the last housekeeping round
  std::map<int32_t, std::unique_ptr<H2Stream>> streams_;
  // Streams nghttp2 closed (OnStreamClose), freed at the end of the next read or write
  // completion handler: nghttp2 may still use one within the call that closed it, and code on
  // the stack of a write may still hold its pointer. (A post per stream did this before: an
  // allocation and a trip through the event loop per request.)
  std::vector<std::unique_ptr<H2Stream>> closed_streams_;
};

}  // namespace

void StartHttp2Session(ServerContext* ctx, tcp::socket socket, std::string initial) {
  std::make_shared<Http2Session<tcp::socket>>(ctx, std::move(socket))->Start(std::move(initial));
}

void StartHttp2Session(ServerContext* ctx, TlsStream stream, std::string initial) {
  std::make_shared<Http2Session<TlsStream>>(ctx, std::move(stream))->Start(std::move(initial));
}

}  // namespace kvc::net
