#include "net/server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <thread>
#include <vector>

#include "common/thread_name.h"
#include "net/session.h"

namespace kvc::net {
namespace {

// Reads the first bytes of a connection to tell HTTP/2 prior knowledge from HTTP/1.1.
// Stream: tcp::socket (plain) or TlsStream (TLS without ALPN, handshake done).
template <class Stream>
class Detector : public std::enable_shared_from_this<Detector<Stream>> {
 public:
  Detector(ServerContext* ctx, Stream stream)
      : ctx_(ctx), stream_(std::move(stream)), timer_(stream_.get_executor()) {
    ++ctx_->detecting;
  }
  ~Detector() { --ctx_->detecting; }

  void Start() {
    timer_.expires_after(ctx_->options.detect_timeout);
    timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec) LowestSocket(self->stream_).close(ec);
    });
    Read();
  }

 private:
  void Read() {
    stream_.async_read_some(asio::buffer(buf_.data() + len_, buf_.size() - len_),
                            [self = this->shared_from_this()](boost::system::error_code ec,
                                                              size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    if (ec || ctx_->stopping) {
      timer_.cancel();
      LowestSocket(stream_).close(ec);
      return;  // closed before sending anything useful, or we are shutting down
    }
    len_ += n;
    const std::string_view got(buf_.data(), len_);
    const size_t cmp = std::min(len_, kHttp2Preface.size());
    const bool prefix_matches = got.substr(0, cmp) == kHttp2Preface.substr(0, cmp);
    if (prefix_matches && len_ < kHttp2Preface.size()) {
      Read();
      return;
    }
    timer_.cancel();
    std::string initial(buf_.data(), len_);
    if (prefix_matches) {
      StartHttp2Session(ctx_, std::move(stream_), std::move(initial));
    } else {
      StartHttp1Session(ctx_, std::move(stream_), std::move(initial));
    }
  }

  ServerContext* ctx_;
  Stream stream_;
  asio::steady_timer timer_;
  std::array<char, 24> buf_{};
  size_t len_ = 0;
};

// Runs the TLS handshake (bounded by tls_handshake_timeout), then starts the session the
// negotiated ALPN protocol names, or sniffs when the client offered none.
class TlsHandshake : public std::enable_shared_from_this<TlsHandshake> {
 public:
  TlsHandshake(ServerContext* ctx, tcp::socket socket, std::shared_ptr<asio::ssl::context> tls)
      : ctx_(ctx), tls_(std::move(tls)), stream_(beast::tcp_stream(std::move(socket)), *tls_) {
    ++ctx_->detecting;
  }
  ~TlsHandshake() { --ctx_->detecting; }

  void Start() {
    beast::get_lowest_layer(stream_).expires_after(ctx_->options.tls_handshake_timeout);
    stream_.async_handshake(
        asio::ssl::stream_base::server,
        [self = shared_from_this()](boost::system::error_code ec) { self->OnHandshake(ec); });
  }

 private:
  void OnHandshake(boost::system::error_code ec) {
    beast::get_lowest_layer(stream_).expires_never();
    if (ec || ctx_->stopping) {
      spdlog::debug("TLS handshake failed: {}", ec.message());
      boost::system::error_code ignored;
      LowestSocket(stream_).close(ignored);
      return;
    }
    const unsigned char* proto = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(stream_.native_handle(), &proto, &len);
    const std::string_view alpn(reinterpret_cast<const char*>(proto), proto ? len : 0);
    if (alpn == "h2") {
      StartHttp2Session(ctx_, std::move(stream_), std::string());
    } else if (alpn == "http/1.1") {
      StartHttp1Session(ctx_, std::move(stream_), std::string());
    } else {
      std::make_shared<Detector<TlsStream>>(ctx_, std::move(stream_))->Start();
    }
  }

  ServerContext* ctx_;
  std::shared_ptr<asio::ssl::context> tls_;  // outlives stream_'s construction
  TlsStream stream_;
};

// Server-side ALPN: h2 if the client offers it, else http/1.1, else no protocol (the client
// then gets sniffed like a plain connection).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  const unsigned char* http11 = nullptr;
  for (unsigned int i = 0; i < inlen;) {
    const unsigned int n = in[i];
    if (i + 1 + n > inlen) break;
    const std::string_view p(reinterpret_cast<const char*>(in + i + 1), n);
    if (p == "h2") {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(n);
      return SSL_TLSEXT_ERR_OK;
    }
    if (p == "http/1.1") http11 = in + i;
    i += 1 + n;
  }
  if (http11) {
    *out = http11 + 1;
    *outlen = http11[0];
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::string OpensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown error" : out;
}

Result<std::shared_ptr<asio::ssl::context>> MakeTlsContext(const ServerOptions& o) {
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return InvalidArgument("TLS needs both a certificate file and a key file");
  }
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* h = ctx->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  SSL_CTX_set_options(h, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                             SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_SINGLE_DH_USE);
  // TLS 1.2: forward-secret AEAD suites only (also what HTTP/2 requires); TLS 1.3 suites are
  // OpenSSL's defaults, all of them modern.
  if (SSL_CTX_set_cipher_list(h,
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
    return Internal("cannot set TLS ciphers: " + OpensslErrors());
  }
  if (SSL_CTX_use_certificate_chain_file(h, o.tls_cert_file.c_str()) != 1) {
    return InvalidArgument("cannot load TLS certificate chain " + o.tls_cert_file + ": " +
                           OpensslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(h, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgument("cannot load TLS private key " + o.tls_key_file + ": " +
                           OpensslErrors());
  }
  if (SSL_CTX_check_private_key(h) != 1) {
    return InvalidArgument("the TLS private key " + o.tls_key_file +
                           " does not match the certificate " + o.tls_cert_file);
  }
  SSL_CTX_set_alpn_select_cb(h, &SelectAlpn, nullptr);
  return ctx;
}

}  // namespace

class ServerImpl {
 public:
  ServerImpl(ServerOptions options, service::Handler* handler) {
    // Create spdlog's registry here, before any I/O thread logs (its lazy creation is not
    // visible to TSan, which then reports the first concurrent log calls as a race).
    (void)spdlog::default_logger_raw();
    ctx_.options = std::move(options);
    ctx_.handler = handler;
    iocs_ = MakeIoContexts(ctx_.options.io_threads);
    work_ = MakeGuards(iocs_);
  }

  Status Start() {
    const auto& o = ctx_.options;
    if (o.tls || !o.tls_host.empty()) KVC_RETURN_IF_ERROR(ReloadTls());
    KVC_RETURN_IF_ERROR(Listen(o.host, o.port, o.tls));
    if (!o.tls_host.empty()) KVC_RETURN_IF_ERROR(Listen(o.tls_host, o.tls_port, true));
    for (auto& l : listeners_) Accept(l.get());
    for (auto& ioc : iocs_) {
      threads_.emplace_back([ioc = ioc.get()] {
        NameThisThread("kvc-io");
        ioc->run();
      });
    }
    return Status::Ok();
  }

  Status ReloadTls() {
    KVC_ASSIGN_OR_RETURN(auto tls, MakeTlsContext(ctx_.options));
    MutexLock lock(ctx_.tls_mu);
    ctx_.tls = std::move(tls);
    return Status::Ok();
  }

  bool Stop(std::chrono::milliseconds grace) {
    if (stopped_) return true;
    stopped_ = true;
    ctx_.stopping = true;
    for (auto& l : listeners_) {
      Listener* lp = l.get();
      asio::post(lp->acceptor.get_executor(), [lp] {
        boost::system::error_code ec;
        lp->acceptor.close(ec);
        lp->backoff.cancel();
      });
    }
    ctx_.registry.ShutdownAll();
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (ctx_.registry.size() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const bool drained = ctx_.registry.size() == 0;
    if (!drained) {
      spdlog::warn("{} connections still open after the shutdown grace period; closing them",
                   ctx_.registry.size());
    }
    work_.clear();
    for (auto& ioc : iocs_) ioc->stop();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    return drained;
  }

  uint16_t port() const { return listeners_.empty() ? 0 : listeners_[0]->port; }
  uint16_t tls_port() const { return listeners_.size() > 1 ? listeners_[1]->port : 0; }
  size_t connections() const { return ctx_.registry.size(); }
  ServerStats stats() const {
    ServerStats st;
    st.connections_open = ctx_.registry.size();
    st.connections_total = ctx_.registry.total();
    st.h2_streams_open = ctx_.h2_streams_open.load();
    st.h2_streams_total = ctx_.h2_streams_total.load();
    return st;
  }

 private:
  struct Listener {
    explicit Listener(asio::io_context& ioc)
        : acceptor(asio::make_strand(ioc)), backoff(acceptor.get_executor()) {}
    tcp::acceptor acceptor;
    asio::steady_timer backoff;
    bool tls = false;
    uint16_t port = 0;
    uint64_t accept_errors = 0;  // acceptor strand only
  };

  Status Listen(const std::string& host, uint16_t port, bool tls) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) return Unavailable("invalid listen address '" + host + "'");
    auto l = std::make_unique<Listener>(*iocs_[0]);
    l->tls = tls;
    tcp::endpoint ep(addr, port);
    l->acceptor.open(ep.protocol(), ec);
    if (!ec) l->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) l->acceptor.bind(ep, ec);
    if (!ec) l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                         ec.message());
    }
    l->port = l->acceptor.local_endpoint().port();
    listeners_.push_back(std::move(l));
    return Status::Ok();
  }

  // Runs on the acceptor's strand, like Stop()'s close, so the acceptor is never used
  // concurrently. Connections go round-robin to the I/O threads; each connection stays on its
  // thread's io_context, which runs on that thread alone, so its handlers never run
  // concurrently and need no strand.
  void Accept(Listener* l) {
    asio::io_context& ioc = *iocs_[next_ioc_++ % iocs_.size()];
    l->acceptor.async_accept(ioc.get_executor(),
                             [this, l](boost::system::error_code ec, tcp::socket socket) {
                               OnAccept(l, ec, std::move(socket));
                             });
  }

  void OnAccept(Listener* l, boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || ctx_.stopping) return;
      // Out of descriptors or memory: the pending connection stays in the backlog, so
      // retrying at once would spin. Back off briefly and log sparingly.
      if (++l->accept_errors % 100 == 1) {
        spdlog::warn("accept failed ({} times so far): {}", l->accept_errors, ec.message());
      }
      l->backoff.expires_after(std::chrono::milliseconds(100));
      l->backoff.async_wait([this, l](boost::system::error_code wait_ec) {
        if (!wait_ec && !ctx_.stopping) Accept(l);
      });
      return;
    }
    boost::system::error_code ignored;
    if (ctx_.registry.size() + ctx_.detecting >= ctx_.options.max_connections) {
      socket.close(ignored);  // over the connection limit
    } else {
      socket.set_option(tcp::no_delay(true), ignored);
      if (l->tls) {
        std::make_shared<TlsHandshake>(&ctx_, std::move(socket), ctx_.TlsContext())->Start();
      } else {
        std::make_shared<Detector<tcp::socket>>(&ctx_, std::move(socket))->Start();
      }
    }
    if (!ctx_.stopping) Accept(l);
  }

  // One io_context per I/O thread (concurrency hint 1: run by one thread only).
  static std::vector<std::unique_ptr<asio::io_context>> MakeIoContexts(int threads) {
    std::vector<std::unique_ptr<asio::io_context>> v;
    for (int i = 0; i < std::max(1, threads); ++i)
      v.push_back(std::make_unique<asio::io_context>(1));
    return v;
  }
  static std::vector<asio::executor_work_guard<asio::io_context::executor_type>> MakeGuards(
      const std::vector<std::unique_ptr<asio::io_context>>& iocs) {
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> v;
    v.reserve(iocs.size());
    for (const auto& ioc : iocs) v.push_back(asio::make_work_guard(*ioc));
    return v;
  }

  ServerContext ctx_;
  std::vector<std::unique_ptr<asio::io_context>> iocs_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  size_t next_ioc_ = 0;  // acceptor strands only
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

Server::Server(ServerOptions options, service::Handler* handler)
    : impl_(std::make_unique<ServerImpl>(std::move(options), handler)) {}
Server::~Server() { (void)Stop(std::chrono::milliseconds(0)); }
Status Server::Start() { return impl_->Start(); }
uint16_t Server::bound_port() const { return impl_->port(); }
uint16_t Server::bound_tls_port() const { return impl_->tls_port(); }
Status Server::ReloadTls() { return impl_->ReloadTls(); }
bool Server::Stop(std::chrono::milliseconds grace) { return impl_->Stop(grace); }
size_t Server::connection_count() const { return impl_->connections(); }
ServerStats Server::stats() const { return impl_->stats(); }

}  // namespace kvc::net
