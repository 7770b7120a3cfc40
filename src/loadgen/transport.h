// Internals shared by the HTTP/1.1 and HTTP/2 client connections: the socket types (plain TCP or
// TLS over TCP), and opening one (TCP connect, TLS handshake with SNI, host-name verification
// and an ALPN check).
//
// Thread-safety: as Connection (one io_context, one thread).
#pragma once

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"
#include "loadgen/connection.h"

namespace kvc::loadgen::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;  // NOLINT(readability-identifier-naming): Asio's own name
using PlainSocket = tcp::socket;
using TlsSocket = asio::ssl::stream<tcp::socket>;

template <class Socket>
inline constexpr bool kIsTls = std::is_same_v<Socket, TlsSocket>;

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

}  // namespace kvc::loadgen::internal
