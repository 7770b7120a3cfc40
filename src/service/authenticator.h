// Authenticator: the one place that decides whether a credential is valid and what it may do.
// - Access tokens (metadata exchange): the bootstrap token of `serve` (admin on every database
//   and over the server) or a catalog token (one database, several, or all of them; one scope,
//   optional expiry, revocable, own rate). A catalog token never manages the server: an admin
//   token of several or all databases is a database admin on each of them, nothing more.
// - Data-path tokens: self-contained, signed (auth::TokenSigner), bound to one database and to
//   the access token they were issued for, which must still be valid in the directory snapshot;
//   for the bootstrap token, by its fingerprint in the claims, so replacing the bootstrap token
//   (a restart with another --access-token) revokes every data-path token it minted.
// - Rate limits: a token bucket per access token (its own rate, or the server's default) for
//   the data path, the queue API and the admin API. The metadata exchange has a bucket of its
//   own per token (AdmitMetadata), never smaller than the token's data bucket: Deno gives up on
//   `openKv` when its single metadata POST is answered with anything but 200 (503 included), so
//   a throttled token must still be able to open; only its data calls wait (503, Retry-After).
// Every refusal carries the exact client text, and is reported to the AuthObserver by reason
// (fixed words, never token ids) for metrics.
//
// Ownership: does not own the directory or the observer (they must outlive it).
// Thread-safety: all methods are thread-safe; SetObserver before use.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/tokens.h"
#include "service/directory.h"
#include "service/http_types.h"
#include "service/rate_limiter.h"

namespace kvc::service {

struct AuthOptions {
  std::string bootstrap_token;  // >= 12 characters; empty: none
  double rate_limit_rps = 10000;
  double rate_limit_burst = 20000;
  double bootstrap_rate_limit_rps = 0;
  // The metadata exchange's own bucket per access token: at least this rate and size, and never
  // smaller than the token's data bucket; unlimited when either is. Deno makes one exchange per
  // `openKv` and one per open database about every minute after, so the defaults leave room
  // for a thousand processes opening at once and thousands of open databases per token.
  // 0: unlimited.
  double metadata_rate_limit_rps = 100;
  double metadata_rate_limit_burst = 1000;
  // The layout of the data-path tokens the metadata exchange hands out (auth/tokens.h). kText
  // only while nodes older than kPacked share this server's secret (a rolling upgrade).
  auth::TokenFormat data_path_token_format = auth::TokenFormat::kPacked;
};

// Receives refusals by reason, e.g. for metrics. Called on the request's thread; quick.
class AuthObserver {
 public:
  virtual ~AuthObserver() = default;
  virtual void CountAuthFailure(std::string_view reason) = 0;
  virtual void CountRateLimited(std::string_view reason) = 0;
};

// Who an access token is.
struct Principal {
  std::string token_id;  // "bootstrap" for the bootstrap token
  // The bootstrap token: it alone manages the server (databases, tokens, /metrics).
  bool server_wide = false;
  // Every database, present and future (the bootstrap token, or an all-databases token)...
  bool all_databases = false;
  // ...or these, by id.
  std::vector<std::string> database_ids;
  auth::Scope scope = auth::Scope::kRead;
  int64_t expires_ms = 0;  // 0: never
  double rate = -1;        // requests per second; < 0: the server's default; 0: unlimited
};

class Authenticator {
 public:
  static constexpr const char* kBootstrapTokenId = "bootstrap";

  // REQUIRES: secret.size() >= 32; directory outlives the authenticator.
  Authenticator(AuthOptions options, std::string secret, Directory* directory);
  void SetObserver(AuthObserver* observer) { observer_ = observer; }

  // Checks an access token against `snap`. nullopt (only when `may_refresh`): the token looks
  // like a catalog token whose id `snap` does not know, and a reread of the catalog may find
  // it. Errors: Unauthenticated with the client text (invalid, revoked, expired).
  Result<std::optional<Principal>> AuthenticateAccessToken(std::string_view token,
                                                           const Directory::Snapshot& snap,
                                                           int64_t now_ms, bool may_refresh);
  // AuthenticateAccessToken against the directory's snapshot, rereading the catalog once when
  // the token may be newer than the snapshot; `done` gets the principal (or the refusal) and
  // the snapshot it was checked against, inline or on the directory thread. For the JSON APIs.
  using AuthenticatedCallback =
      std::function<void(Result<Principal>, const std::shared_ptr<const Directory::Snapshot>&)>;
  void AuthenticateThen(std::string token, AuthenticatedCallback done);

  // May `who` open database `db` (named `requested` in the URL) now? Errors: PermissionDenied
  // (another database), Throttled (rate limit).
  Status AdmitToDatabase(const Principal& who, const Directory::Database& db,
                         const std::string& requested);
  // AdmitToDatabase for the metadata exchange: the token's metadata bucket, not its data bucket
  // (see AuthOptions::metadata_rate_limit_rps). Errors: PermissionDenied, Throttled (only past
  // that generous budget).
  Status AdmitMetadata(const Principal& who, const Directory::Database& db,
                       const std::string& requested);
  // AdmitToDatabase without the rate limit (for a request already counted).
  Status CheckDatabase(const Principal& who, const Directory::Database& db,
                       const std::string& requested);
  // May `who` use the admin API at all? Errors: PermissionDenied (not an admin token),
  // Throttled (rate limit, counted here once per admin request).
  Status AdmitAdmin(const Principal& who);
  // May `who` manage the server (databases, tokens)? Only the bootstrap token may; a catalog
  // token may not, whatever databases it opens. Errors: PermissionDenied.
  Status AdmitServerWide(const Principal& who);
  // A data-path token for `who` on `database_id`, valid until `valid_until_ms` (capped at the
  // access token's own expiry).
  std::string IssueDataPathToken(const Principal& who, const std::string& database_id,
                                 int64_t valid_until_ms) const;
  // Authenticates a data-path request (headers of protocol versions 1 to 3) and returns the
  // engine it addresses. Errors: InvalidArgument, Unauthenticated, PermissionDenied (a write
  // with a read-only token), NotFound (database gone), Throttled.
  Result<std::shared_ptr<engine::Engine>> AuthorizeDataPath(const HttpRequest& req, bool write,
                                                            int64_t now_ms);

  // Does `who` open the database with id `database_id`?
  static bool Opens(const Principal& who, const std::string& database_id);

  // The `Authorization: Bearer` token of a request. Errors: Unauthenticated.
  Result<std::string> BearerToken(const HttpRequest& req);

 private:
  struct RateLimit {
    double rate;
    double burst;
  };
  RateLimit LimitFor(const std::string& token_id, double token_rate) const;
  Status CheckRate(const std::string& token_id, double token_rate);
  // The metadata bucket of a token whose data limit is `data`.
  RateLimit MetadataLimit(const RateLimit& data) const;
  // Takes one request from `limiter`'s bucket `token_id` under `limit`; Throttled (with the
  // wait, reported as `reason`) when it is empty.
  Status Take(RateLimiter& limiter, const std::string& token_id, const RateLimit& limit,
              std::string_view reason);
  // Reports `reason` and returns `s` (for `return Fail(...)`).
  Status Fail(std::string_view reason, Status s);

  const AuthOptions options_;
  const auth::TokenSigner signer_;
  // signer_.Fingerprint of the bootstrap token (empty: none), the issuer of its data-path tokens.
  const std::string bootstrap_fingerprint_;
  Directory* const directory_;
  RateLimiter limiter_;           // data path, queue API, admin API
  RateLimiter metadata_limiter_;  // the metadata exchange
  AuthObserver* observer_ = nullptr;
};

}  // namespace kvc::service
