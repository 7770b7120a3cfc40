// A blocking client of a server's admin API (README "Admin API"): one connection (HTTP/1.1,
// plain or TLS; client/blocking_client.h) and calls under /admin/v1, with an admin token. Used by
// `kvconnect export/import --url`, `kvconnect queue`, the scratch database of `kvconnect bench`
// and `kvconnect migrate --to URL`.
//
// Ownership: owns its connection. Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "client/blocking_client.h"
#include "common/status.h"

namespace kvc::cli {

// The error an admin API answer with HTTP `status` stands for, with the server's text (the
// `error` member of its JSON body) when it sent one.
Status AdminHttpError(int status, const std::string& body);

class AdminClient {
 public:
  struct Options {
    std::string url;    // http(s)://HOST[:PORT][/PREFIX]
    std::string token;  // an admin token (required)
    std::string db;     // the database of Post/PostStreaming, by name or id
    std::string ca_file;
    bool insecure = false;  // https: do not verify the server's certificate
    std::chrono::milliseconds connect_timeout{10000};
    std::chrono::milliseconds request_timeout{600000};
  };

  // Connects. Errors: InvalidArgument (a bad URL, no token, a CA file), Unavailable.
  static Result<std::unique_ptr<AdminClient>> Connect(const Options& o);

  // POSTs to <prefix>/admin/v1/databases/<db>/<what>; the answer, whatever its status.
  Result<client::Response> Post(const std::string& what, std::string body,
                                const std::string& content_type);

  // POSTs to <prefix>/admin/v1/<path>; the answer, whatever its status.
  Result<client::Response> PostAdmin(const std::string& path, std::string body,
                                     const std::string& content_type);

  // Sends `method` (GET, POST, DELETE...) to <prefix>/admin/v1/<path>; a POST body is JSON. The
  // answer, whatever its status.
  Result<client::Response> Send(const std::string& method, const std::string& path,
                                std::string body);

  // POSTs to <database>/<what> and hands each piece of a 200 answer's body to `on_data` (on
  // the client's thread); `*versionstamp` gets the answer's x-kvc-versionstamp. OK only if the
  // answer was 200 and its body ended cleanly.
  Status PostStreaming(const std::string& what, std::string body,
                       std::function<void(std::string_view)> on_data, std::string* versionstamp);

 private:
  AdminClient() = default;

  client::Request MakeRequest(const std::string& path, std::string body,
                              const std::string& content_type) const;

  std::unique_ptr<client::BlockingClient> http_;
  std::shared_ptr<const client::Headers> headers_;
  std::string admin_;  // the URL's path + /admin/v1
  std::string base_;   // admin_ + /databases/<db>
  std::chrono::milliseconds request_timeout_{0};
};

}  // namespace kvc::cli
