// Internals shared by the listener and the HTTP/1.1 and HTTP/2 sessions.
//
// Thread-safety: SessionRegistry is thread-safe. Each session runs on its I/O thread's
// io_context (one thread per context), so its handlers never run concurrently.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "common/mutex.h"
#include "net/server.h"
#include "service/http_types.h"

namespace kvc::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;  // NOLINT(readability-identifier-naming): Asio's own name
// A TLS connection (the handshake is done before a session gets it).
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// True for a session over TLS.
template <class Stream>
inline constexpr bool kIsTls = std::is_same_v<Stream, TlsStream>;

inline tcp::socket& LowestSocket(tcp::socket& s) { return s; }
inline tcp::socket& LowestSocket(beast::tcp_stream& s) { return s.socket(); }
inline tcp::socket& LowestSocket(TlsStream& s) { return beast::get_lowest_layer(s).socket(); }

// Asks the kernel to acknowledge received data at once (and any ACK it is holding back)
// instead of delaying it. Linux leaves quick-ACK mode again on its own, so callers set it
// each time they want it.
inline void QuickAck(tcp::socket& s) {
  int one = 1;
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

// The Strict-Transport-Security value of answers over TLS, or empty (no header).
inline std::string HstsValue(const ServerOptions& o) {
  return o.hsts_max_age_s > 0 ? "max-age=" + std::to_string(o.hsts_max_age_s) : std::string();
}

class Session {
 public:
  virtual ~Session() = default;
  // Graceful shutdown: finish in-flight requests, end streams, then close. Thread-safe (posts
  // to the session's io_context).
  virtual void Shutdown() = 0;
};

class SessionRegistry {
 public:
  void Add(Session* s, std::weak_ptr<Session> w) {
    MutexLock lock(mu_);
    sessions_[s] = std::move(w);
    ++total_;
  }
  uint64_t total() const {
    MutexLock lock(mu_);
    return total_;
  }
  void Remove(Session* s) {
    MutexLock lock(mu_);
    sessions_.erase(s);
  }
  size_t size() const {
    MutexLock lock(mu_);
    return sessions_.size();
  }
  void ShutdownAll() {
    std::vector<std::shared_ptr<Session>> live;
    {
      MutexLock lock(mu_);
      for (auto& [_, w] : sessions_) {
        if (auto s = w.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) s->Shutdown();
  }

 private:
  mutable Mutex mu_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_ KVC_GUARDED_BY(mu_);
  uint64_t total_ KVC_GUARDED_BY(mu_) = 0;  // sessions ever added
};

struct ServerContext {
  ServerOptions options;
  // The TLS context for new connections; replaced on reload (open connections keep theirs).
  std::shared_ptr<asio::ssl::context> TlsContext() const {
    MutexLock lock(tls_mu);
    return tls;
  }
  mutable Mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls KVC_GUARDED_BY(tls_mu);
  service::Handler* handler = nullptr;
  SessionRegistry registry;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> detecting{0};           // connections still being sniffed
  std::atomic<size_t> pending_body_bytes{0};  // undispatched HTTP/2 request bodies
  std::atomic<int64_t> h2_streams_open{0};    // HTTP/2 streams accepted and not closed
  std::atomic<uint64_t> h2_streams_total{0};
};

// Starts a session for an accepted socket whose first bytes (already read) are `initial`.
void StartHttp1Session(ServerContext* ctx, tcp::socket socket, std::string initial);
void StartHttp1Session(ServerContext* ctx, TlsStream stream, std::string initial);
void StartHttp2Session(ServerContext* ctx, tcp::socket socket, std::string initial);
void StartHttp2Session(ServerContext* ctx, TlsStream stream, std::string initial);

// The HTTP/2 client connection preface.
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace kvc::net
