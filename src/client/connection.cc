#include "client/connection.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "client/transport.h"

namespace kvc::client {
namespace internal {
std::shared_ptr<Connection> MakeHttp1Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls);
std::shared_ptr<Connection> MakeHttp2Connection(asio::io_context& io,
                                                const ConnectionOptions& options,
                                                const std::vector<std::string>& addresses,
                                                asio::ssl::context* tls);
}  // namespace internal

namespace asio = boost::asio;

std::shared_ptr<Connection> MakeConnection(asio::io_context& io, const ConnectionOptions& options,
                                           const std::vector<std::string>& addresses,
                                           asio::ssl::context* tls) {
  if (options.version == HttpVersion::kHttp2) {
    return internal::MakeHttp2Connection(io, options, addresses, tls);
  }
  return internal::MakeHttp1Connection(io, options, addresses, tls);
}

Result<std::shared_ptr<asio::ssl::context>> MakeTlsContext(HttpVersion version, bool insecure,
                                                           const std::string& ca_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1,
                   ec);
  if (insecure) {
    ctx->set_verify_mode(asio::ssl::verify_none, ec);
  } else {
    ctx->set_verify_mode(asio::ssl::verify_peer, ec);
    ctx->set_default_verify_paths(ec);
    if (!ca_file.empty()) {
      ctx->load_verify_file(ca_file, ec);
      if (ec) {
        return InvalidArgument("cannot load the CA file '" + ca_file + "': " + ec.message());
      }
    }
  }
  // ALPN wire format: a length byte, then the protocol name.
  static constexpr unsigned char kH2[] = {2, 'h', '2'};
  static constexpr unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  const bool h2 = version == HttpVersion::kHttp2;
  if (SSL_CTX_set_alpn_protos(ctx->native_handle(), h2 ? kH2 : kHttp11,
                              h2 ? sizeof(kH2) : sizeof(kHttp11)) != 0) {
    return Internal("cannot set the TLS ALPN protocols");
  }
  return ctx;
}

Result<std::vector<std::string>> ResolveHost(const std::string& host, uint16_t port) {
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return Unavailable("cannot resolve '" + host + "': " + ec.message());
  std::vector<std::string> out;
  for (const auto& r : results) out.push_back(r.endpoint().address().to_string());
  if (out.empty()) return Unavailable("'" + host + "' has no addresses");
  return out;
}

}  // namespace kvc::client
