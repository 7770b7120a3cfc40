// KvService: the KV Connect endpoints. POST / (the database named "default") and the shapes
// MetadataTarget() lists (/databases/<name-or-id>[/connect], /v2/databases/<name-or-id>[/connect])
// are the metadata exchange; POST /v2/{snapshot_read,atomic_write,watch} is the data path (for
// protocol versions 1, 2 and 3), routed by the database id inside the signed data-path token.
// It authenticates, rate-limits, decodes (codec/), runs the engine and encodes the answer;
// every error is a Status mapped to HTTP by service/http_status.cc. Each of those is one router
// endpoint (AddRoutes): "metadata" (/), "connect" (every other metadata shape, and what else is
// under /databases/ and /v2/databases/), "snapshot_read", "atomic_write", "watch", and
// "datapath" for the rest of the data path; other methods get 405 ("KV Connect uses POST").
//
// Metadata answers carry absolute endpoint URLs (every client resolves those the same way):
// ServiceOptions::public_url when set, else the request's scheme and authority.
//
// Access tokens: the bootstrap token of `serve` (admin on every database) and the catalog's
// tokens (one database, one scope, optional expiry, revocable). Data-path tokens carry the
// access token's id; a revoked or expired access token's data-path tokens stop working as soon
// as the directory snapshot shows it (within the catalog poll interval).
//
// The metadata exchange (body parsing and schema validation included) runs on a body pool, so a
// large or hostile body never holds an I/O thread; the data path decodes inline. Opening must
// not fail for load (Deno's `openKv` gives up on the first non-200 answer to its one metadata
// POST): when the pool refuses (queue full), a body of at most metadata_inline_max_bytes (Deno
// sends about 30) is handled on the calling thread instead of answering 503, and the exchange
// has its own rate budget (Authenticator::AdmitMetadata). Throttling and overload answer 503
// with Retry-After on the data path only.
//
// Ownership: borrows the directory and body pool; they must outlive the service.
// Thread-safety: Handle() may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "auth/tokens.h"
#include "codec/json_depth.h"
#include "engine/engine.h"
#include "service/authenticator.h"
#include "service/directory.h"
#include "service/http_types.h"
#include "service/kvconnect/portable_values.h"
#include "service/router.h"
#include "service/work_pool.h"

namespace kvc::service {

struct ServiceOptions {
  // The bootstrap access token (auth.bootstrap_token, >= 12 characters) and the rate limits:
  // requests per second per access token (token bucket), unless the token sets its own rate
  // (then its bucket holds max(rate, 1) requests); 0: unlimited. The bootstrap token has its
  // own setting (default unlimited). Over the limit: kThrottled (503 with Retry-After). The
  // metadata exchange has its own per-token budget (AuthOptions::metadata_rate_limit_rps).
  AuthOptions auth;
  // expiresAt in the metadata answer = now + this. Deno refreshes every 60 s regardless.
  int64_t metadata_ttl_ms = 60LL * 60 * 1000;
  // A data-path token stays valid this long past expiresAt: Deno <= 2.9 stops refreshing after
  // a watch is dropped and keeps using its last token.
  int64_t token_grace_ms = 7LL * 24 * 60 * 60 * 1000;
  std::chrono::milliseconds watch_keepalive{5000};
  std::string endpoint_path = "/v2";  // no trailing slash
  // The server's URL as clients see it (e.g. behind a proxy), as NormalizePublicUrl returns
  // it; endpoints are this + endpoint_path. Empty: the request's scheme and Host/:authority.
  std::string public_url;
  // Without public_url: the Host/:authority values metadata answers may build endpoint URLs
  // from (--allowed-host; see HostAllowed). Another Host gets 400. Empty: any Host.
  std::vector<std::string> allowed_hosts;
  // Store and serve V8 values in the form both Deno and Node read
  // (service/kvconnect/portable_values.h, codec/v8/v8_portable.h), each conversion only when
  // provably exact. false: values are stored and served exactly as clients sent them.
  bool portable_v8_values = true;
  // Several nodes on one storage (PostgreSQL): the other live nodes' base URLs (as each
  // advertises itself, no trailing slash) and their consistency ("strong" or "eventual"). The
  // metadata answer lists this node's own endpoint first, then the others' strong ones, then the
  // eventual ones. Unset or empty: this node's endpoint only.
  std::function<std::vector<std::pair<std::string, std::string>>()> peer_endpoints;
  // This node's own consistency in that list ("eventual" for a node reading from a standby).
  std::string self_consistency = "strong";
  // The pool that parses request bodies off the I/O threads (`serve` makes one for the
  // metadata exchange and the queue API). Queue full: 503.
  WorkPoolOptions body_pool;
  // A metadata body up to this size is handled on the I/O thread when the body pool refuses it
  // (queue full), rather than answered 503; parsing a few hundred bytes (nesting capped) costs
  // microseconds. 0: always 503 then.
  size_t metadata_inline_max_bytes = 4096;
  // Nesting cap of JSON request bodies; `serve` applies it process-wide (codec/json_depth.h).
  size_t max_json_depth = codec::kDefaultMaxJsonDepth;
};

// The database a metadata exchange at `path` (normalized as Router::NormalizePath does) names,
// or empty if `path` is no metadata endpoint:
//   /                                  -> "default"
//   /databases/<name-or-id>            (Deno with DENO_KV_PATH_PREFIX=https://host/databases/)
//   /databases/<name-or-id>/connect    (our documented URL)
//   /v2/databases/<name-or-id>         (Deno with DENO_KV_PATH_PREFIX=https://host/v2/databases/)
//   /v2/databases/<name-or-id>/connect (Deno Deploy's URL, so only the host changes)
// <name-or-id> is one non-empty path segment, taken verbatim (no percent-decoding).
std::string MetadataTarget(std::string_view path);

// Checks a --public-url value: http or https, a host, no userinfo, query or fragment. Returns it
// with a lowercase scheme and without trailing slashes; kInvalidArgument says what is wrong.
Result<std::string> NormalizePublicUrl(std::string_view url);

// Is `authority` (host[:port] of a request) one of `allowed`? An entry without a port matches
// that host on any port, one with a port only that pair; names compare case-insensitively,
// and an IPv6 entry is written in brackets ("[::1]").
bool HostAllowed(std::string_view authority, const std::vector<std::string>& allowed);

class KvService : public Handler {
 public:
  // REQUIRES: server_secret.size() >= 32; directory outlives the service. Metadata exchanges
  // are handled on `body_pool` (which must outlive the service); null: on the calling thread.
  KvService(ServiceOptions options, std::string server_secret, Directory* directory,
            WorkPool* body_pool = nullptr);
  // With `authenticator` (the application's, shared with the admin and queue APIs) instead of
  // one of its own. REQUIRES: authenticator, directory and body_pool outlive the service.
  KvService(ServiceOptions options, Authenticator* authenticator, Directory* directory,
            WorkPool* body_pool = nullptr);
  // Refusals by reason go to `observer` (metrics). REQUIRES: before the first request.
  void SetAuthObserver(AuthObserver* observer) { auth_->SetObserver(observer); }
  // Conversions of V8 values go to `observer` (metrics). REQUIRES: before the first request.
  void SetPortableValueObserver(PortableValueObserver* observer) {
    portable_.SetObserver(observer);
  }
  // The authenticator (shared with the admin API, so one rate limit covers both).
  Authenticator* authenticator() { return auth_; }

  // Answers through the service's own routes (AddRoutes without a root handler).
  void Handle(HttpRequest request, Responder respond) override;
  // Registers every KV Connect endpoint with `router`; `root` (e.g. a RootHandler around this
  // service) answers at `/` instead of the metadata exchange when set. REQUIRES: this outlives
  // `router`'s use.
  void AddRoutes(Router* router, Handler* root = nullptr);

 private:
  struct MetadataCall {
    HttpRequest req;
    std::string database;  // name or id from the URL
    int version = 0;
    std::string token;
  };

  // Runs HandleMetadata on the body pool, or here when there is none or it refuses a small body.
  void PostMetadata(HttpRequest req, std::string database, Responder respond);
  void HandleMetadata(HttpRequest req, std::string database, Responder respond);
  // Answers from `snap`; if the token or database is not in it and `may_refresh`, rereads the
  // catalog first (off this thread) and tries once more.
  void AnswerMetadata(std::shared_ptr<MetadataCall> call,
                      const std::shared_ptr<const Directory::Snapshot>& snap, bool may_refresh,
                      Responder respond);
  // The data path, one endpoint each.
  // `respond` is moved into the engine's callback (one copy fewer per request).
  void SnapshotRead(const HttpRequest& req, Responder respond);
  void AtomicWrite(const HttpRequest& req, Responder respond);
  void Watch(const HttpRequest& req, const Responder& respond);
  // A path under /databases/, /v2/databases/ or the data path that no endpoint takes: 405 for
  // another method under the data path, else 404 (as the service always answered).
  void Unrouted(const HttpRequest& req, const Responder& respond) const;
  // The endpoint URL of a metadata answer to `req`, or kInvalidArgument if it cannot be built.
  Result<std::string> EndpointUrl(const HttpRequest& req) const;

  const ServiceOptions options_;
  Directory* const directory_;
  std::unique_ptr<Authenticator> owned_auth_;  // null when the application's is used
  Authenticator* const auth_;
  PortableValues portable_;  // used only with options_.portable_v8_values
  WorkPool* const body_pool_;
  Router routes_;  // for Handle()
};

}  // namespace kvc::service
