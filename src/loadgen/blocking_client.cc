#include "loadgen/blocking_client.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <future>
#include <utility>

#include "loadgen/setup.h"

namespace kvc::loadgen {

struct BlockingClient::Impl {
  IoPool pool{1};
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::shared_ptr<Connection> conn;

  boost::asio::io_context& io() { return pool.context(0); }
};

BlockingClient::BlockingClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BlockingClient::~BlockingClient() {
  if (impl_->conn) {
    boost::asio::post(impl_->io(), [conn = impl_->conn] { conn->Close(); });
  }
  impl_->pool.Stop();
}

Result<std::unique_ptr<BlockingClient>> BlockingClient::Connect(
    const BlockingClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  if (options.origin.tls()) {
    KVC_ASSIGN_OR_RETURN(impl->tls, MakeTlsContext(options.version, false, options.ca_file));
  }
  KVC_ASSIGN_OR_RETURN(auto addresses, ResolveHost(options.origin.host, options.origin.port));
  ConnectionOptions co;
  co.version = options.version;
  co.origin = options.origin;
  co.connect_timeout = options.connect_timeout;
  impl->conn = MakeConnection(impl->io(), co, addresses, impl->tls.get());
  KVC_RETURN_IF_ERROR(ConnectBlocking(impl->io(), impl->conn, options.connect_timeout));
  return std::unique_ptr<BlockingClient>(new BlockingClient(std::move(impl)));
}

Result<Response> BlockingClient::Post(Request request, std::chrono::milliseconds timeout) {
  return CallBlocking(impl_->io(), impl_->conn, std::move(request), timeout);
}

Status BlockingClient::PostStreaming(Request request, StreamHandlers handlers) {
  auto done = std::make_shared<std::promise<Status>>();
  auto future = done->get_future();
  handlers.on_end = [done, on_end = std::move(handlers.on_end)](Status s) {
    if (on_end) on_end(s);
    done->set_value(std::move(s));
  };
  boost::asio::post(impl_->io(), [conn = impl_->conn, request = std::move(request),
                                  handlers = std::move(handlers)]() mutable {
    conn->SendStreaming(std::move(request), std::move(handlers));
  });
  return future.get();
}

}  // namespace kvc::loadgen
