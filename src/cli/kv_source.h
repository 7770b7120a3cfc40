// A database read over KV Connect as a client reads it (`kvconnect migrate --from URL`): the URL
// one gives Deno.openKv (a kvconnect server, Deno Deploy's
// https://api.deno.com/v2/databases/<id>/connect, any KV Connect server), the metadata exchange
// (loadgen/metadata.h, shared with `kvconnect bench`), then snapshot_read calls on the first
// strong endpoint over the project's one client stack (client/blocking_client.h).
//
// Transport: HTTP/2 by default, as Deno speaks it (https: TLS with ALPN h2; http: h2c with prior
// knowledge); HTTP/1.1 on request (a server or proxy without h2c).
// Failures, as Deno's client handles them (reference §1.6, §1.8): 5xx answers (and 429) and
// transport failures are retried with exponential backoff (reconnecting) for up to `retry_for`; a
// data-path token past the answer's expiresAt is renewed before a call; a data call answered
// 401/403 (or 400 naming authorization: an expired data-path token) re-does the metadata exchange
// once and is sent again. Anything else is an error that says what the server
// answered: a URL that is no KV Connect metadata endpoint (404, HTML), a refused token (with the
// server's text), an answer that is not the protocol's (garbage protobuf, keys out of order).
//
// Ownership: owns its connections (one per origin). Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/blocking_client.h"
#include "client/connection.h"
#include "client/url.h"
#include "common/status.h"
#include "loadgen/metadata.h"
#include "storage/kv_types.h"

namespace kvc::cli {

// The most entries one snapshot_read range may ask for (reference §3.8: MAX_READ_ENTRIES).
inline constexpr int32_t kMaxReadEntries = 1000;

// Whether `spec` is a URL (http:// or https://) rather than a storage spec.
bool IsHttpUrl(std::string_view spec);

// The metadata URL for `text`, a URL as given to Deno.openKv: `http(s)://host[:port]` (path
// "/"), `.../databases/NAME/connect`, `.../databases/NAME`, Deploy's
// `https://api.deno.com/v2/databases/<id>/connect`; the path is kept as given (Deno POSTs to
// exactly that URL); a query or fragment is dropped. Errors: InvalidArgument naming what is
// wrong (not http or https, no host, a bad port, user info).
Result<client::Url> ParseKvConnectUrl(std::string_view text);

// The path to try when `path` answers 404 and is the short form `/databases/NAME` or
// `/v2/databases/NAME` (Deno's DENO_KV_PATH_PREFIX shape, which older servers serve only with
// `/connect`): `path + "/connect"`; otherwise nullopt.
std::optional<std::string> ConnectPathFallback(std::string_view path);

struct KvSourceOptions {
  client::Url url;  // ParseKvConnectUrl
  std::string token;
  client::HttpVersion http = client::HttpVersion::kHttp2;
  std::string ca_file;  // https: a CA to trust besides the system's
  bool insecure = false;
  std::chrono::milliseconds connect_timeout{10000};  // TCP and TLS to the source
  std::chrono::milliseconds call_timeout{60000};     // one metadata or data call
  std::chrono::milliseconds retry_for{120000};       // 5xx and transport failures: give up after
  std::chrono::milliseconds retry_first{200};        // first backoff, doubled per attempt...
  std::chrono::milliseconds retry_max{10000};        // ...up to this
  size_t max_response_bytes = size_t{96} << 20;      // > 1000 entries of 64 KiB values and keys
  std::string user_agent = "kvconnect-migrate/0.1";
};

class KvSource {
 public:
  // Connects and does the metadata exchange. `log` (borrowed) gets a line per retry. Errors:
  // InvalidArgument (not a KV Connect server, a bad answer), NotFound (404),
  // kUnauthenticated/kPermissionDenied (the token was refused, with the server's text),
  // Unavailable (unreachable, or 5xx for longer than retry_for).
  static Result<std::unique_ptr<KvSource>> Open(KvSourceOptions options, std::ostream* log);
  ~KvSource();
  KvSource(const KvSource&) = delete;
  KvSource& operator=(const KvSource&) = delete;

  // Up to `limit` (1..kMaxReadEntries) entries of [start, end) in ascending key order, read in
  // one snapshot_read (a smaller page when the answer would exceed max_response_bytes). Errors:
  // as Open; Internal "the source's answer ..." when the answer is not a valid, successful
  // SnapshotReadOutput of one range with keys ascending within [start, end) and no more than
  // asked for.
  Result<std::vector<Entry>> Read(const std::string& start, const std::string& end, int32_t limit);

  const loadgen::DataPath& data_path() const { return path_; }
  const client::Url& url() const { return options_.url; }
  int64_t retries() const { return retries_; }
  int64_t metadata_exchanges() const { return exchanges_; }

 private:
  KvSource(KvSourceOptions options, std::ostream* log);

  // The metadata exchange. The first one (`initial`) does not wait for a server it cannot reach
  // at all (a wrong host or port is reported at once); later ones retry that too.
  Status ExchangeMetadata(bool initial);
  // One metadata POST to `path`; OK with path_ filled, or why not. *retry: worth retrying.
  Status TryMetadata(const std::string& path, bool initial, bool* retry);
  // One snapshot_read; *retry: worth retrying; *refresh: the data-path token was refused.
  Result<std::vector<Entry>> TryRead(const std::string& body, const std::string& start,
                                     const std::string& end, int32_t limit, bool* retry,
                                     bool* refresh);
  // The client for `origin`, connecting if there is none (or the last one failed).
  Result<client::BlockingClient*> ClientFor(const client::Url& origin);
  void DropClient(const client::Url& origin);
  // Sleeps the next backoff after `why`, or returns `why` as Unavailable once retry_for is spent
  // since `first_failure`.
  Status Backoff(const Status& why, std::chrono::steady_clock::time_point first_failure,
                 int attempt);

  KvSourceOptions options_;
  std::ostream* log_;
  loadgen::DataPath path_;
  std::unique_ptr<client::BlockingClient> metadata_client_;
  std::unique_ptr<client::BlockingClient> data_client_;  // when the endpoint has another origin
  int64_t retries_ = 0;
  int64_t exchanges_ = 0;
};

}  // namespace kvc::cli
