// Internals shared by the HTTP/1.1 and HTTP/2 client connections: the socket types (plain TCP or
// TLS over TCP), opening one (TCP connect, TLS handshake with SNI, host-name verification and an
// ALPN check), the header rules of Request, the delivery of outcomes (Receiver), and the base
// class with the connect timeout and the first failure (ConnectionBase).
//
// Thread-safety: as Connection (one io_context, one thread).
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/connection.h"
#include "common/status.h"

namespace kvc::client::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;  // NOLINT(readability-identifier-naming): Asio's own name
using PlainSocket = tcp::socket;
using TlsSocket = asio::ssl::stream<tcp::socket>;

template <class Socket>
inline constexpr bool kIsTls = std::is_same_v<Socket, TlsSocket>;

// Whether header name `name` is `lower` (a lowercase name), ignoring ASCII case.
inline bool NameIs(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// Calls f(name, value) for the request's shared headers, then for its own.
template <class F>
void ForEachHeader(const Request& request, F&& f) {
  if (request.headers) {
    for (const auto& [name, value] : *request.headers) f(name, value);
  }
  for (const auto& [name, value] : request.extra_headers) f(name, value);
}

// Whether header `name` frames the request body itself, so the client adds no content-length:
// content-length, and over HTTP/1.1 transfer-encoding.
inline bool FramesBody(std::string_view name, bool http1) {
  return NameIs(name, "content-length") || (http1 && NameIs(name, "transfer-encoding"));
}

// Whether a request whose headers do not frame its body gets content-length: for a non-empty
// body or a method other than GET and HEAD.
inline bool BodyNeedsLength(const Request& request) {
  return !request.body.empty() || (request.method != "GET" && request.method != "HEAD");
}

template <class Socket>
std::unique_ptr<Socket> NewSocket(asio::io_context& io, asio::ssl::context* tls) {
  if constexpr (kIsTls<Socket>) {
    return std::make_unique<Socket>(io, *tls);
  } else {
    (void)tls;
    return std::make_unique<Socket>(io);
  }
}

// Numeric addresses -> endpoints; unparsable entries are skipped.
inline std::vector<tcp::endpoint> ToEndpoints(const std::vector<std::string>& addresses,
                                              uint16_t port) {
  std::vector<tcp::endpoint> out;
  for (const std::string& a : addresses) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(a, ec);
    if (!ec) out.emplace_back(address, port);
  }
  return out;
}

// Connects `socket` to the first reachable endpoint, sets TCP_NODELAY, and for TLS does the
// handshake (SNI for host names; certificate host or IP verification when the context verifies)
// and checks the server chose `alpn` or nothing. Calls done(Status) on the io_context.
template <class Socket, class Handler>
void OpenSocket(Socket& socket, const std::vector<tcp::endpoint>& endpoints, const Url& origin,
                std::string_view alpn, Handler done) {
  if (endpoints.empty()) {
    done(Unavailable("no address to connect to for " + origin.host));
    return;
  }
  asio::async_connect(
      socket.lowest_layer(), endpoints,
      [&socket, origin, alpn, done = std::move(done)](const boost::system::error_code& ec,
                                                      const tcp::endpoint&) mutable {
        if (ec) {
          done(Unavailable("connect to " + origin.Authority() + ": " + ec.message()));
          return;
        }
        boost::system::error_code ignored;
        socket.lowest_layer().set_option(tcp::no_delay(true), ignored);
        if constexpr (kIsTls<Socket>) {
          SSL* ssl = socket.native_handle();
          boost::system::error_code not_ip;
          asio::ip::make_address(origin.host, not_ip);
          if (not_ip) {
            SSL_set_tlsext_host_name(ssl, origin.host.c_str());
            SSL_set1_host(ssl, origin.host.c_str());
          } else {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), origin.host.c_str());
          }
          socket.async_handshake(
              asio::ssl::stream_base::client, [&socket, origin, alpn, done = std::move(done)](
                                                  const boost::system::error_code& hec) mutable {
                if (hec) {
                  done(Unavailable("TLS handshake with " + origin.Authority() + ": " +
                                   hec.message()));
                  return;
                }
                const unsigned char* proto = nullptr;
                unsigned int len = 0;
                SSL_get0_alpn_selected(socket.native_handle(), &proto, &len);
                const std::string_view chosen(reinterpret_cast<const char*>(proto),
                                              proto ? len : 0);
                if (!chosen.empty() && chosen != alpn) {
                  done(Unavailable("the server chose ALPN protocol '" + std::string(chosen) +
                                   "', not '" + std::string(alpn) + "'"));
                  return;
                }
                done(Status::Ok());
              });
        } else {
          (void)alpn;
          done(Status::Ok());
        }
      });
}

// Who gets the outcome of a request: a ResponseHandler, or StreamHandlers for a streamed body
// (behind a pointer, so the common case moves one handler, not four).
struct Receiver {
  ResponseHandler done;                    // !stream
  std::unique_ptr<StreamHandlers> stream;  // a streamed response
};

// Posts `status` (not OK) to the receiver, moving its handler out.
inline void PostFailure(asio::io_context& io, Receiver& r, Status status) {
  if (r.stream) {
    asio::post(io, [h = std::move(r.stream->on_end), s = std::move(status)] { h(s); });
  } else {
    asio::post(io, [h = std::move(r.done), s = std::move(status)]() mutable {
      h(Result<Response>(std::move(s)));
    });
  }
}

// Posts a complete response to the receiver, moving its handler and `response` out (a streamed
// response gets only its on_end(OK): the head and body went to on_head and on_data).
inline void PostSuccess(asio::io_context& io, Receiver& r, Response& response) {
  if (r.stream) {
    asio::post(io, [h = std::move(r.stream->on_end)] { h(Status::Ok()); });
  } else {
    asio::post(io, [h = std::move(r.done), response = std::move(response)]() mutable {
      h(Result<Response>(std::move(response)));
    });
  }
}

// What both connection kinds share: the socket, the connect timeout, the Connect() callback and
// the first failure. Thread-safety: as Connection (one io_context, one thread).
template <class Socket>
class ConnectionBase : public Connection {
 public:
  ConnectionBase(asio::io_context& io, ConnectionOptions options,
                 const std::vector<std::string>& addresses, asio::ssl::context* tls)
      : io_(io),
        options_(std::move(options)),
        authority_(options_.origin.Authority()),
        endpoints_(ToEndpoints(addresses, options_.origin.port)),
        socket_(NewSocket<Socket>(io, tls)),
        timer_(io) {}

  RequestId Send(Request request, ResponseHandler done) final {
    Receiver r;
    r.done = std::move(done);
    if (request.method.empty()) return Refuse(r);
    return Submit(request, r);
  }

  RequestId SendStreaming(Request request, StreamHandlers handlers) final {
    Receiver r;
    r.stream = std::make_unique<StreamHandlers>(std::move(handlers));
    if (request.method.empty()) return Refuse(r);
    return Submit(request, r);
  }

 protected:
  // Send() and SendStreaming() of a request with a method: moves from `request` and `receiver`
  // (references spare the hot path two moves of each); returns the request's id, or 0 after
  // posting its failure.
  virtual RequestId Submit(Request& request, Receiver& receiver) = 0;

  // Keeps `done` for ConnectDone(), starts the connect timeout and opens the socket offering
  // `alpn`; then calls opened() unless the connection failed meanwhile.
  void Open(std::function<void(Status)> done, std::string_view alpn, std::function<void()> opened) {
    auto self = shared_from_this();
    connect_done_ = std::move(done);
    timer_.expires_after(options_.connect_timeout);
    timer_.async_wait([this, self](const boost::system::error_code& ec) {
      if (!ec && connect_done_) {
        Fail(Unavailable("connecting to " + authority_ + " timed out"));
      }
    });
    OpenSocket(*socket_, endpoints_, options_.origin, alpn,
               [this, self, opened = std::move(opened)](Status s) {
                 if (!broken_.ok()) return;  // timed out or closed meanwhile
                 if (!s.ok()) {
                   Fail(std::move(s));
                   return;
                 }
                 opened();
               });
  }

  // Posts the Connect() callback with OK and stops the connect timeout. No-op once delivered.
  void ConnectDone() {
    if (!connect_done_) return;
    timer_.cancel();
    asio::post(io_, [done = std::move(connect_done_)] { done(Status::Ok()); });
    connect_done_ = nullptr;
  }

  // Marks the connection failed with `status`: closes the socket, fails a pending Connect() and
  // every request (FailRequests). Idempotent: the first failure wins.
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
    FailRequests(broken_);
  }

  // A request without a method: posts its failure, returns 0.
  RequestId Refuse(Receiver& receiver) {
    PostFailure(io_, receiver, InvalidArgument("empty HTTP method"));
    return 0;
  }

  // Fails every request not yet answered with `status` (handlers posted).
  virtual void FailRequests(const Status& status) = 0;

  asio::io_context& io_;
  const ConnectionOptions options_;
  const std::string authority_;                 // host:port, sent as :authority or Host
  const std::vector<tcp::endpoint> endpoints_;  // referenced by the pending connect
  std::unique_ptr<Socket> socket_;
  asio::steady_timer timer_;  // connect timeout (HTTP/2: also the close linger)
  std::function<void(Status)> connect_done_;
  Status broken_;  // first failure; the connection is unusable after it
};

// Makes a C<TlsSocket> for an https origin, else a C<PlainSocket>.
template <template <class> class C>
std::shared_ptr<Connection> MakeOverSocket(asio::io_context& io, const ConnectionOptions& options,
                                           const std::vector<std::string>& addresses,
                                           asio::ssl::context* tls) {
  if (options.origin.tls()) return std::make_shared<C<TlsSocket>>(io, options, addresses, tls);
  return std::make_shared<C<PlainSocket>>(io, options, addresses, tls);
}

}  // namespace kvc::client::internal
