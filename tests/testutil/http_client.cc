#include "testutil/http_client.h"

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <string_view>

#include "client/url.h"

namespace kvc::testutil {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;  // NOLINT(readability-identifier-naming): Asio's own name
using Clock = std::chrono::steady_clock;

// Responses are buffered whole; this only guards against a runaway server.
constexpr size_t kMaxResponseBody = size_t{1} << 30;
// HTTP/2 receive windows: large enough for throughput, small enough that tests with
// multi-megabyte bodies still exercise WINDOW_UPDATE.
constexpr int32_t kHttp2StreamWindow = 1 << 20;
constexpr int32_t kHttp2ConnectionWindow = 4 << 20;
// Upper bound on the graceful close of a connection, so destructors stay fast.
constexpr std::chrono::milliseconds kMaxShutdownWait{1000};

const char* VersionName(client::HttpVersion version) {
  return version == client::HttpVersion::kHttp2 ? "HTTP/2" : "HTTP/1.1";
}

void AddHeader(std::map<std::string, std::string>& headers, std::string_view name,
               std::string_view value) {
  auto [it, inserted] = headers.try_emplace(client::AsciiLower(name), value);
  if (!inserted) {
    it->second.append(", ");
    it->second.append(value);
  }
}

std::map<std::string, std::string> HeaderMap(const client::Response& r) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : r.headers) AddHeader(out, name, value);
  for (const auto& [name, value] : r.trailers) AddHeader(out, name, value);
  return out;
}

Result<HttpResponse> ToHttpResponse(Result<client::Response> r) {
  if (!r.ok()) return r.status();
  HttpResponse out;
  out.status = r->status;
  out.headers = HeaderMap(*r);
  out.body = std::move(r->body);
  return out;
}

// What a streamed response delivered so far; shared with the connection's callbacks, which may
// outlive the reader's interest in them.
struct StreamState {
  bool head = false;
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string data;  // received, not yet returned by Read()
  bool ended = false;
  Status end;
};

}  // namespace

namespace internal {

// A client::Connection with a private io_context that the calling thread runs while it waits.
// Callbacks land in shared slots, so a call that gives up (timeout) leaves nothing dangling.
class BlockingConnection {
 public:
  using Slot = std::shared_ptr<std::optional<Result<client::Response>>>;

  // Connects to host:port (HTTP/2: also waits for the server's SETTINGS) within `timeout`.
  static Result<std::unique_ptr<BlockingConnection>> Open(client::HttpVersion version,
                                                          const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
    KVC_ASSIGN_OR_RETURN(std::vector<std::string> addresses, client::ResolveHost(host, port));
    client::ConnectionOptions options;
    options.version = version;
    options.origin = client::Url{"http", host, port, "/"};
    options.connect_timeout = timeout;
    options.max_response_bytes = kMaxResponseBody;
    options.h2_stream_window = kHttp2StreamWindow;
    options.h2_connection_window = kHttp2ConnectionWindow;
    options.keep_headers = true;
    options.close_linger = std::min(timeout, kMaxShutdownWait);
    std::unique_ptr<BlockingConnection> c(new BlockingConnection(version, host, port, timeout));
    c->conn_ = client::MakeConnection(c->io_, options, addresses, nullptr);
    std::optional<Status> connected;
    c->conn_->Connect([&connected](Status s) { connected = std::move(s); });
    // The connection's own connect timeout ends the wait; the margin only guards against a bug.
    if (!c->RunUntil([&] { return connected.has_value(); }, Clock::now() + timeout * 2)) {
      return Unavailable(std::string(VersionName(version)) + ": connecting timed out");
    }
    if (!connected->ok()) return *connected;
    return c;
  }

  // Closes the connection (HTTP/2: GOAWAY, then waits a little for the server to close).
  ~BlockingConnection() {
    conn_->Close();
    if (io_.stopped()) io_.restart();
    try {
      io_.run_for(std::min(timeout_, kMaxShutdownWait));
    } catch (...) {  // a throwing handler is a bug elsewhere; a destructor must not throw
    }
  }

  BlockingConnection(const BlockingConnection&) = delete;
  BlockingConnection& operator=(const BlockingConnection&) = delete;

  client::Connection& conn() { return *conn_; }

  // Runs the io_context until done() holds or `deadline` passes. Returns done().
  bool RunUntil(const std::function<bool()>& done, Clock::time_point deadline) {
    while (!done()) {
      if (io_.stopped()) io_.restart();
      if (io_.run_one_until(deadline) == 0) break;  // deadline, or nothing left to run
    }
    return done();
  }

  // Submits a request whose response lands in the returned slot.
  std::pair<client::RequestId, Slot> Submit(const std::string& method, const std::string& path,
                                            const Headers& headers, const std::string& body) {
    auto slot = std::make_shared<std::optional<Result<client::Response>>>();
    const client::RequestId id = conn_->Send(
        client::Request{
            .method = method, .path = path, .extra_headers = OnWire(headers), .body = body},
        [slot](Result<client::Response> r) { *slot = std::move(r); });
    return {id, slot};
  }

  // One request, waited for; on timeout the request is cancelled (HTTP/2: RST_STREAM; HTTP/1.1:
  // the connection closes).
  Result<HttpResponse> Call(const std::string& method, const std::string& path,
                            const Headers& headers, const std::string& body) {
    auto [id, slot] = Submit(method, path, headers, body);
    if (!RunUntil([&slot = slot] { return slot->has_value(); }, Clock::now() + timeout_)) {
      conn_->Cancel(id);
      return Unavailable(std::string(VersionName(version_)) +
                         ": timed out waiting for the response to " + path);
    }
    return ToHttpResponse(std::move(**slot));
  }

  // POSTs on a new connection of the same kind and returns a reader once the response head
  // arrived.
  Result<std::unique_ptr<StreamReader>> OpenStream(const std::string& path, const Headers& headers,
                                                   const std::string& body) const;

  // Closes this connection, then exchanges raw bytes on a new TCP connection (see SendRaw).
  Result<std::string> SendRaw(const std::string& bytes, std::chrono::milliseconds timeout);

  client::HttpVersion version() const { return version_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  // `headers` as sent: HTTP/2 wants lowercase names (the client stack sends names as given).
  Headers OnWire(const Headers& headers) const {
    if (version_ != client::HttpVersion::kHttp2) return headers;
    Headers out;
    out.reserve(headers.size());
    for (const auto& [name, value] : headers) out.emplace_back(client::AsciiLower(name), value);
    return out;
  }

  BlockingConnection(client::HttpVersion version, std::string host, uint16_t port,
                     std::chrono::milliseconds timeout)
      : version_(version), host_(std::move(host)), port_(port), timeout_(timeout) {}

  const client::HttpVersion version_;
  const std::string host_;
  const uint16_t port_;
  std::chrono::milliseconds timeout_;
  asio::io_context io_{1};
  std::shared_ptr<client::Connection> conn_;  // after io_: destroyed first
};

}  // namespace internal

namespace {

using internal::BlockingConnection;

// Reads one streamed response from a connection of its own.
class ConnectionStreamReader : public StreamReader {
 public:
  ConnectionStreamReader(std::unique_ptr<BlockingConnection> conn, client::RequestId id,
                         std::shared_ptr<StreamState> state)
      : conn_(std::move(conn)), id_(id), state_(std::move(state)) {}

  // Cancels the stream (HTTP/2: RST_STREAM(CANCEL)); the connection then closes.
  ~ConnectionStreamReader() override { conn_->conn().Cancel(id_); }

  int status() const override { return state_->status; }
  const std::map<std::string, std::string>& headers() const override { return state_->headers; }
  bool finished() const override { return finished_; }

  Result<std::string> Read(std::chrono::milliseconds timeout) override {
    conn_->RunUntil([this] { return !state_->data.empty() || state_->ended; },
                    Clock::now() + timeout);
    if (!state_->data.empty()) return std::exchange(state_->data, std::string());
    if (!state_->ended) return std::string();
    if (!state_->end.ok()) return state_->end;
    finished_ = true;
    return Unavailable("end of stream");
  }

 private:
  std::unique_ptr<BlockingConnection> conn_;
  client::RequestId id_;
  std::shared_ptr<StreamState> state_;
  bool finished_ = false;
};

}  // namespace

namespace internal {

Result<std::unique_ptr<StreamReader>> BlockingConnection::OpenStream(
    const std::string& path, const Headers& headers, const std::string& body) const {
  const auto deadline = Clock::now() + timeout_;
  KVC_ASSIGN_OR_RETURN(auto conn, Open(version_, host_, port_, timeout_));
  auto state = std::make_shared<StreamState>();
  client::StreamHandlers handlers;
  handlers.on_head = [state](const client::Response& head) {
    state->head = true;
    state->status = head.status;
    state->headers = HeaderMap(head);
  };
  handlers.on_data = [state](std::string_view data) { state->data.append(data); };
  handlers.on_end = [state](Status s) {
    state->ended = true;
    state->end = std::move(s);
  };
  const client::RequestId id = conn->conn().SendStreaming(
      client::Request{.path = path, .extra_headers = OnWire(headers), .body = body},
      std::move(handlers));
  if (!conn->RunUntil([&] { return state->head || state->ended; }, deadline)) {
    return Unavailable(std::string(VersionName(version_)) +
                       ": timed out waiting for the response head of " + path);
  }
  if (!state->head) {
    return state->end.ok() ? Internal("the response ended without a head") : state->end;
  }
  return std::unique_ptr<StreamReader>(
      std::make_unique<ConnectionStreamReader>(std::move(conn), id, std::move(state)));
}

Result<std::string> BlockingConnection::SendRaw(const std::string& bytes,
                                                std::chrono::milliseconds timeout) {
  conn_->Close();
  KVC_ASSIGN_OR_RETURN(std::vector<std::string> addresses, client::ResolveHost(host_, port_));
  std::vector<tcp::endpoint> endpoints;
  endpoints.reserve(addresses.size());
  for (const std::string& a : addresses) endpoints.emplace_back(asio::ip::make_address(a), port_);
  tcp::socket socket(io_);
  asio::steady_timer timer(io_);
  std::array<char, 4096> buf;
  std::string out;
  Status failure;
  bool done = false;
  // The timer bounds the connect by the client's timeout, then the exchange by `timeout`; when
  // it fires it closes the socket, which ends the pending operation.
  auto arm = [&](std::chrono::milliseconds after) {
    timer.expires_after(after);
    timer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) socket.close();
    });
  };
  std::function<void()> read = [&] {
    socket.async_read_some(asio::buffer(buf), [&](const boost::system::error_code& ec, size_t n) {
      out.append(buf.data(), n);
      if (ec) {
        done = true;
        timer.cancel();
        return;
      }
      read();
    });
  };
  arm(timeout_);
  asio::async_connect(socket, endpoints,
                      [&](const boost::system::error_code& ec, const tcp::endpoint&) {
                        if (ec) {
                          failure = Unavailable("connect to " + host_ + ": " + ec.message());
                          done = true;
                          timer.cancel();
                          return;
                        }
                        arm(timeout);
                        // A write error is not fatal: the server may reject the request
                        // before reading all of it.
                        asio::async_write(socket, asio::buffer(bytes),
                                          [&](const boost::system::error_code&, size_t) {});
                        read();
                      });
  if (io_.stopped()) io_.restart();
  while (!done && io_.run_one() > 0) {
  }
  // Let the write's and the timer's handlers finish before their captures go away.
  socket.close();
  timer.cancel();
  io_.restart();
  io_.poll();
  if (!failure.ok()) return failure;
  return out;
}

}  // namespace internal

// ---------------------------------------------------------------------------------------------
// FrameReader

Result<std::optional<std::string>> FrameReader::Next(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    Result<std::optional<std::string_view>> frame = frames_.Next();
    if (!frame.ok()) return Internal(frame.status().message());
    if (frame->has_value()) return std::optional<std::string>(std::string(**frame));
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    Result<std::string> chunk = reader_->Read(left);
    if (!chunk.ok()) {
      if (reader_->finished() && frames_.partial()) {
        return Internal("stream ended inside a watch frame");
      }
      return chunk.status();
    }
    if (chunk->empty()) {
      if (Clock::now() >= deadline) return std::optional<std::string>();
      continue;
    }
    frames_.Append(*chunk);
  }
}

// ---------------------------------------------------------------------------------------------
// The clients

namespace internal {

HttpClientBase::HttpClientBase(std::unique_ptr<BlockingConnection> conn) : conn_(std::move(conn)) {}

HttpClientBase::~HttpClientBase() = default;

Result<std::unique_ptr<BlockingConnection>> HttpClientBase::Open(
    client::HttpVersion version, const std::string& host, uint16_t port,
    std::chrono::milliseconds timeout) {
  return BlockingConnection::Open(version, host, port, timeout);
}

Result<HttpResponse> HttpClientBase::Request(const std::string& method, const std::string& target,
                                             const Headers& headers, const std::string& body) {
  return conn_->Call(method, target, headers, body);
}

Result<std::unique_ptr<StreamReader>> HttpClientBase::OpenStream(const std::string& target,
                                                                 const Headers& headers,
                                                                 const std::string& body) {
  return conn_->OpenStream(target, headers, body);
}

void HttpClientBase::set_timeout(std::chrono::milliseconds timeout) { conn_->set_timeout(timeout); }

}  // namespace internal

Result<std::unique_ptr<Http1Client>> Http1Client::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  KVC_ASSIGN_OR_RETURN(auto conn, Open(client::HttpVersion::kHttp1, host, port, timeout));
  return std::unique_ptr<Http1Client>(new Http1Client(std::move(conn)));
}

Result<std::string> Http1Client::SendRaw(const std::string& bytes,
                                         std::chrono::milliseconds timeout) {
  return conn_->SendRaw(bytes, timeout);
}

Result<std::unique_ptr<Http2Client>> Http2Client::Connect(const std::string& host, uint16_t port,
                                                          std::chrono::milliseconds timeout) {
  KVC_ASSIGN_OR_RETURN(auto conn, Open(client::HttpVersion::kHttp2, host, port, timeout));
  return std::unique_ptr<Http2Client>(new Http2Client(std::move(conn)));
}

Result<std::vector<HttpResponse>> Http2Client::PostMany(
    const std::vector<std::tuple<std::string, Headers, std::string>>& reqs) {
  const auto deadline = Clock::now() + conn_->timeout();
  std::vector<std::pair<client::RequestId, BlockingConnection::Slot>> pending;
  pending.reserve(reqs.size());
  for (const auto& [path, headers, body] : reqs) {
    pending.push_back(conn_->Submit("POST", path, headers, body));
  }
  const bool all = conn_->RunUntil(
      [&] {
        return std::all_of(pending.begin(), pending.end(),
                           [](const auto& p) { return p.second->has_value(); });
      },
      deadline);
  if (!all) {
    for (const auto& [id, slot] : pending) {
      if (!slot->has_value()) conn_->conn().Cancel(id);
    }
    return Unavailable("HTTP/2: timed out waiting for " + std::to_string(reqs.size()) +
                       " responses");
  }
  std::vector<HttpResponse> out;
  out.reserve(pending.size());
  for (auto& [id, slot] : pending) {
    KVC_ASSIGN_OR_RETURN(HttpResponse r, ToHttpResponse(std::move(**slot)));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kvc::testutil
