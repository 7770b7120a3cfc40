#include "net/server.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <thread>
#include <vector>

#include "net/session.h"

namespace kvc::net {

// Reads the first bytes of a connection to tell HTTP/2 prior knowledge from HTTP/1.1.
class Detector : public std::enable_shared_from_this<Detector> {
 public:
  Detector(ServerContext* ctx, tcp::socket socket)
      : ctx_(ctx), socket_(std::move(socket)), timer_(socket_.get_executor()) {
    ++ctx_->detecting;
  }
  ~Detector() { --ctx_->detecting; }

  void Start() {
    timer_.expires_after(ctx_->options.detect_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
    Read();
  }

 private:
  void Read() {
    socket_.async_read_some(asio::buffer(buf_.data() + len_, buf_.size() - len_),
                            [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                              self->OnRead(ec, n);
                            });
  }

  void OnRead(boost::system::error_code ec, size_t n) {
    if (ec || ctx_->stopping) {
      timer_.cancel();
      socket_.close(ec);
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
      StartHttp2Session(ctx_, std::move(socket_), std::move(initial));
    } else {
      StartHttp1Session(ctx_, std::move(socket_), std::move(initial));
    }
  }

  ServerContext* ctx_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::array<char, 24> buf_{};
  size_t len_ = 0;
};

class ServerImpl {
 public:
  ServerImpl(ServerOptions options, service::Handler* handler) {
    ctx_.options = std::move(options);
    ctx_.handler = handler;
  }

  Status Start() {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(ctx_.options.host, ec);
    if (ec) return Unavailable("invalid listen address '" + ctx_.options.host + "'");
    tcp::endpoint ep(addr, ctx_.options.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + ctx_.options.host + ":" +
                         std::to_string(ctx_.options.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    const int n = std::max(1, ctx_.options.io_threads);
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return Status::Ok();
  }

  bool Stop(std::chrono::milliseconds grace) {
    if (stopped_) return true;
    stopped_ = true;
    ctx_.stopping = true;
    asio::post(acceptor_.get_executor(), [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      backoff_.cancel();
    });
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
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    return drained;
  }

  uint16_t port() const { return port_; }
  size_t connections() const { return ctx_.registry.size(); }

 private:
  // Runs on the acceptor's strand, like Stop()'s close, so the acceptor is never used
  // concurrently.
  void Accept() {
    acceptor_.async_accept(asio::make_strand(ioc_),
                           [this](boost::system::error_code ec, tcp::socket socket) {
                             OnAccept(ec, std::move(socket));
                           });
  }

  void OnAccept(boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || ctx_.stopping) return;
      // Out of descriptors or memory: the pending connection stays in the backlog, so
      // retrying at once would spin. Back off briefly and log sparingly.
      if (++accept_errors_ % 100 == 1) {
        spdlog::warn("accept failed ({} times so far): {}", accept_errors_, ec.message());
      }
      backoff_.expires_after(std::chrono::milliseconds(100));
      backoff_.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec && !ctx_.stopping) Accept();
      });
      return;
    }
    boost::system::error_code ignored;
    if (ctx_.registry.size() + ctx_.detecting >= ctx_.options.max_connections) {
      socket.close(ignored);  // over the connection limit
    } else {
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Detector>(&ctx_, std::move(socket))->Start();
    }
    if (!ctx_.stopping) Accept();
  }

  ServerContext ctx_;
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(ioc_)};
  tcp::acceptor acceptor_{asio::make_strand(ioc_)};
  asio::steady_timer backoff_{acceptor_.get_executor()};
  uint64_t accept_errors_ = 0;  // acceptor strand only
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

Server::Server(ServerOptions options, service::Handler* handler)
    : impl_(std::make_unique<ServerImpl>(std::move(options), handler)) {}
Server::~Server() { (void)Stop(std::chrono::milliseconds(0)); }
Status Server::Start() { return impl_->Start(); }
uint16_t Server::bound_port() const { return impl_->port(); }
bool Server::Stop(std::chrono::milliseconds grace) { return impl_->Stop(grace); }
size_t Server::connection_count() const { return impl_->connections(); }

}  // namespace kvc::net
