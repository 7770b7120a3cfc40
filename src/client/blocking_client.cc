#include "client/blocking_client.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <future>
#include <thread>
#include <utility>

namespace kvc::client {

namespace asio = boost::asio;

struct BlockingClient::Impl {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread;
  std::shared_ptr<asio::ssl::context> tls;
  std::shared_ptr<Connection> conn;
};

BlockingClient::BlockingClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BlockingClient::~BlockingClient() {
  Impl& i = *impl_;
  if (i.conn) asio::post(i.io, [conn = i.conn] { conn->Close(); });
  asio::post(i.io, [&i] { i.io.stop(); });  // after the close; what it leaves pending is dropped
  if (i.thread.joinable()) i.thread.join();
}

Result<std::unique_ptr<BlockingClient>> BlockingClient::Connect(
    const BlockingClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  if (options.origin.tls()) {
    KVC_ASSIGN_OR_RETURN(impl->tls,
                         MakeTlsContext(options.version, options.insecure, options.ca_file));
  }
  KVC_ASSIGN_OR_RETURN(auto addresses, ResolveHost(options.origin.host, options.origin.port));
  const ConnectionOptions co{.version = options.version,
                             .origin = options.origin,
                             .connect_timeout = options.connect_timeout,
                             .max_response_bytes = options.max_response_bytes,
                             .keep_headers = options.keep_headers};
  impl->conn = MakeConnection(impl->io, co, addresses, impl->tls.get());
  impl->thread = std::thread([io = &impl->io] { io->run(); });
  std::unique_ptr<BlockingClient> client(new BlockingClient(std::move(impl)));
  auto done = std::make_shared<std::promise<Status>>();
  auto future = done->get_future();
  asio::post(client->impl_->io, [conn = client->impl_->conn, done] {
    conn->Connect([done](Status s) { done->set_value(std::move(s)); });
  });
  // The connection's own connect timeout fires first; this only guards against a stuck thread.
  if (future.wait_for(options.connect_timeout * 2) != std::future_status::ready) {
    return Unavailable("connecting to " + options.origin.Authority() + " timed out");
  }
  KVC_RETURN_IF_ERROR(future.get());
  return client;
}

Result<Response> BlockingClient::Call(Request request, std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<Result<Response>>>();
  auto future = done->get_future();
  auto id = std::make_shared<std::promise<RequestId>>();
  auto id_future = id->get_future();
  asio::post(impl_->io, [conn = impl_->conn, done, id, request = std::move(request)]() mutable {
    id->set_value(conn->Send(std::move(request),
                             [done](Result<Response> r) { done->set_value(std::move(r)); }));
  });
  if (future.wait_for(timeout) != std::future_status::ready) {
    asio::post(impl_->io, [conn = impl_->conn, sent = id_future.get()] { conn->Cancel(sent); });
    future.wait();  // Cancel delivers kUnavailable "cancelled by the client"
    return Unavailable("no answer within " + std::to_string(timeout.count()) + " ms");
  }
  return future.get();
}

Status BlockingClient::CallStreaming(Request request, StreamHandlers handlers) {
  auto done = std::make_shared<std::promise<Status>>();
  auto future = done->get_future();
  handlers.on_end = [done, on_end = std::move(handlers.on_end)](Status s) {
    if (on_end) on_end(s);
    done->set_value(std::move(s));
  };
  asio::post(impl_->io, [conn = impl_->conn, request = std::move(request),
                         handlers = std::move(handlers)]() mutable {
    conn->SendStreaming(std::move(request), std::move(handlers));
  });
  return future.get();
}

}  // namespace kvc::client
