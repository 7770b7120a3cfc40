// A blocking HTTP client for command-line tools that talk to a server (`kvconnect export` and
// `import --url`): one Connection (connection.h) run by an I/O thread of its own, with calls
// that wait for their answer.
//
// Ownership: owns its connection and thread; destruction closes the connection and joins.
// Thread-safety: Post/PostStreaming from one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "client/connection.h"
#include "client/url.h"
#include "common/status.h"

namespace kvc::client {

struct BlockingClientOptions {
  Url origin;  // scheme, host, port
  HttpVersion version = HttpVersion::kHttp1;
  std::string ca_file;    // https: a CA to trust besides the system's
  bool insecure = false;  // https: do not verify the server's certificate
  std::chrono::milliseconds connect_timeout{10000};
  bool keep_headers = true;  // fill Response::headers (ConnectionOptions::keep_headers)
  size_t max_response_bytes = 64u << 20;  // ConnectionOptions::max_response_bytes
};

class BlockingClient {
 public:
  // Resolves, connects (TLS for https) and returns the client. Errors: kUnavailable (cannot
  // reach the server), kInvalidArgument (a CA file that cannot be loaded).
  static Result<std::unique_ptr<BlockingClient>> Connect(const BlockingClientOptions& options);
  ~BlockingClient();
  BlockingClient(const BlockingClient&) = delete;
  BlockingClient& operator=(const BlockingClient&) = delete;

  // Sends `request` and waits up to `timeout` for the whole answer. Errors: as
  // Connection::Send, or kUnavailable on the timeout (the request is cancelled then).
  Result<Response> Call(Request request, std::chrono::milliseconds timeout);

  // Sends `request`, whose answer body is delivered piece by piece, and waits until it ended.
  // `handlers` run on the client's I/O thread; on_end's status is also returned.
  Status CallStreaming(Request request, StreamHandlers handlers);

 private:
  struct Impl;
  explicit BlockingClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvc::client
