#include "service/authenticator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/clock.h"

namespace kvc::service {

Authenticator::Authenticator(AuthOptions options, std::string secret, Directory* directory)
    : options_(std::move(options)),
      signer_(std::move(secret)),
      bootstrap_fingerprint_(options_.bootstrap_token.empty()
                                 ? std::string()
                                 : signer_.Fingerprint(options_.bootstrap_token)),
      directory_(directory) {}

Status Authenticator::Fail(std::string_view reason, Status s) {
  if (observer_) {
    if (s.code() == StatusCode::kThrottled) {
      observer_->CountRateLimited(reason);
    } else {
      observer_->CountAuthFailure(reason);
    }
  }
  return s;
}

Result<std::string> Authenticator::BearerToken(const HttpRequest& req) {
  auto token = auth::ParseBearer(req.Header("authorization"));
  if (!token.ok()) return Fail("malformed_authorization", token.status());
  return std::string(*token);
}

Result<std::optional<Principal>> Authenticator::AuthenticateAccessToken(
    std::string_view token, const Directory::Snapshot& snap, int64_t now_ms, bool may_refresh) {
  Principal who;
  if (!options_.bootstrap_token.empty() &&
      auth::ConstantTimeEquals(token, options_.bootstrap_token)) {
    who.token_id = kBootstrapTokenId;
    who.server_wide = true;
    who.all_databases = true;
    who.scope = auth::Scope::kAdmin;
    return std::optional<Principal>(std::move(who));
  }
  const Status invalid = Unauthenticated("Invalid access token.");
  const std::string id = auth::AccessTokenId(token);
  if (id.empty()) return Fail("invalid_token", invalid);
  const storage::AccessTokenRecord* rec = snap.Token(id);
  if (!rec && may_refresh) return std::optional<Principal>();  // created since the last poll?
  if (!rec || !auth::ConstantTimeEquals(auth::HashAccessToken(token), rec->hash)) {
    return Fail("invalid_token", invalid);
  }
  if (rec->revoked_ms != 0) {
    return Fail("revoked", Unauthenticated("Invalid access token: it has been revoked."));
  }
  if (rec->expires_ms != 0 && now_ms >= rec->expires_ms) {
    return Fail("expired", Unauthenticated("Invalid access token: it has expired."));
  }
  who.token_id = rec->id;
  who.all_databases = rec->all_databases;
  who.database_ids = rec->database_ids;
  who.scope = static_cast<auth::Scope>(rec->scope);
  who.expires_ms = rec->expires_ms;
  who.rate = rec->rate_limit;
  return std::optional<Principal>(std::move(who));
}

bool Authenticator::Opens(const Principal& who, const std::string& database_id) {
  return who.all_databases || std::find(who.database_ids.begin(), who.database_ids.end(),
                                        database_id) != who.database_ids.end();
}

Status Authenticator::CheckDatabase(const Principal& who, const Directory::Database& db,
                                    const std::string& requested) {
  if (!Opens(who, db.record.id)) {
    return Fail("wrong_database", PermissionDenied("This access token is not valid for database '" +
                                                   requested + "'."));
  }
  return Status::Ok();
}

void Authenticator::AuthenticateThen(std::string token, AuthenticatedCallback done) {
  auto attempt = [this](const std::string& t,
                        const std::shared_ptr<const Directory::Snapshot>& snap, bool may_refresh,
                        const AuthenticatedCallback& cb) -> bool {
    auto who = AuthenticateAccessToken(t, *snap, NowUnixMs(), may_refresh);
    if (!who.ok()) {
      cb(who.status(), snap);
    } else if (who->has_value()) {
      cb(**who, snap);
    } else {
      return false;  // perhaps created since the last catalog poll
    }
    return true;
  };
  if (attempt(token, directory_->snapshot(), /*may_refresh=*/true, done)) return;
  directory_->RefreshThen([attempt, token = std::move(token), done = std::move(done)](
                              const std::shared_ptr<const Directory::Snapshot>& fresh) {
    (void)attempt(token, fresh, /*may_refresh=*/false, done);
  });
}

Status Authenticator::AdmitToDatabase(const Principal& who, const Directory::Database& db,
                                      const std::string& requested) {
  KVC_RETURN_IF_ERROR(CheckDatabase(who, db, requested));
  return CheckRate(who.token_id, who.rate);
}

Status Authenticator::AdmitAdmin(const Principal& who) {
  if (who.scope != auth::Scope::kAdmin) {
    return Fail("not_admin",
                PermissionDenied("This access token is not an admin token; the admin API needs "
                                 "one (kvconnect token create --scope admin)."));
  }
  return CheckRate(who.token_id, who.rate);
}

Status Authenticator::AdmitServerWide(const Principal& who) {
  if (who.server_wide) return Status::Ok();
  const char* bound = who.all_databases              ? "is for every database, not for the server"
                      : who.database_ids.size() == 1 ? "is bound to one database"
                                                     : "is bound to its databases";
  return Fail("not_server_admin",
              PermissionDenied(std::string("This admin token ") + bound +
                               "; managing databases and tokens needs the server's bootstrap "
                               "token."));
}

std::string Authenticator::IssueDataPathToken(const Principal& who, const std::string& database_id,
                                              int64_t valid_until_ms) const {
  auth::TokenClaims claims;
  claims.database_id = database_id;
  claims.scope = who.scope;
  claims.access_token_id = who.token_id;
  claims.expires_at_ms = valid_until_ms;
  if (who.token_id == kBootstrapTokenId) claims.issuer = bootstrap_fingerprint_;
  if (who.expires_ms != 0) claims.expires_at_ms = std::min(claims.expires_at_ms, who.expires_ms);
  return signer_.Issue(claims, options_.data_path_token_format);
}

Result<std::shared_ptr<engine::Engine>> Authenticator::AuthorizeDataPath(const HttpRequest& req,
                                                                         bool write,
                                                                         int64_t now_ms) {
  const std::string_view version = req.Header("x-denokv-version");
  std::string_view db_header;
  if (version.empty()) {
    db_header = req.Header("x-transaction-domain-id");  // protocol version 1
  } else if (version == "2" || version == "3") {
    db_header = req.Header("x-denokv-database-id");
  } else {
    return InvalidArgument("Expected protocol version 2 or 3 in the x-denokv-version header.");
  }
  auto token = auth::ParseBearer(req.Header("authorization"));
  if (!token.ok()) return Fail("malformed_authorization", token.status());
  auto verified = signer_.VerifyInPlace(*token, now_ms);
  if (!verified.ok()) return Fail("invalid_data_path_token", verified.status());
  const auth::TokenClaims& claims = **verified;  // valid until this thread's next Verify*
  if (db_header.empty()) return InvalidArgument("Invalid database id.");
  if (db_header != claims.database_id) {
    return Fail("wrong_database",
                Unauthenticated("The authorization token was issued for another database; "
                                "repeat the metadata exchange for this one."));
  }
  auto snap = directory_->snapshot();
  double token_rate = -1;
  if (claims.access_token_id == kBootstrapTokenId) {
    // Minted through a bootstrap token: valid only while the server still has that one. A
    // token of claims format 1 (no issuer) is refused too: it cannot show which one it was.
    if (bootstrap_fingerprint_.empty() || claims.issuer.empty() ||
        !auth::ConstantTimeEquals(claims.issuer, bootstrap_fingerprint_)) {
      return Fail("bootstrap_rotated",
                  Unauthenticated("The authorization token is no longer valid: the server's "
                                  "bootstrap access token it was issued for has been replaced. "
                                  "Repeat the metadata exchange with the current access token."));
    }
  } else {
    const storage::AccessTokenRecord* rec = snap->Token(claims.access_token_id);
    if (!rec || rec->revoked_ms != 0) {
      return Fail("revoked", Unauthenticated("The authorization token is no longer valid: its "
                                             "access token has been revoked."));
    }
    if (rec->expires_ms != 0 && now_ms >= rec->expires_ms) {
      return Fail("expired", Unauthenticated("The authorization token is no longer valid: its "
                                             "access token has expired."));
    }
    // A token of several databases may have lost this one (RemoveDatabase) since.
    if (!storage::TokenOpensDatabase(*rec, claims.database_id)) {
      return Fail("wrong_database",
                  Unauthenticated("The authorization token is no longer valid: its access token "
                                  "no longer opens this database."));
    }
    token_rate = rec->rate_limit;
  }
  if (claims.scope == auth::Scope::kQueue) {
    return Fail("queue_only", PermissionDenied("This access token is for the queue API only; "
                                               "KV reads and writes are not permitted."));
  }
  if (write && claims.scope == auth::Scope::kRead) {
    return Fail("read_only",
                PermissionDenied("This access token is read-only; writes are not permitted."));
  }
  const Directory::Database* db = snap->Find(claims.database_id);
  if (!db) return NotFound("The database no longer exists.");
  KVC_RETURN_IF_ERROR(CheckRate(claims.access_token_id, token_rate));
  return db->engine;
}

Authenticator::RateLimit Authenticator::LimitFor(const std::string& token_id,
                                                 double token_rate) const {
  if (token_id == kBootstrapTokenId) {
    const double rate = options_.bootstrap_rate_limit_rps;
    return {rate, std::max(options_.rate_limit_burst, rate)};
  }
  // A token's own rate bounds its bursts too; the server-wide burst is for the default rate.
  if (token_rate >= 0) return {token_rate, std::max(token_rate, 1.0)};
  return {options_.rate_limit_rps, std::max(options_.rate_limit_burst, options_.rate_limit_rps)};
}

Status Authenticator::CheckRate(const std::string& token_id, double token_rate) {
  const char* reason = token_id == kBootstrapTokenId ? "bootstrap_rate"
                       : token_rate >= 0             ? "token_rate"
                                                     : "default_rate";
  return Take(limiter_, token_id, LimitFor(token_id, token_rate), reason);
}

Authenticator::RateLimit Authenticator::MetadataLimit(const RateLimit& data) const {
  if (data.rate <= 0 || options_.metadata_rate_limit_rps <= 0) return {0, 0};
  return {std::max(data.rate, options_.metadata_rate_limit_rps),
          std::max({data.burst, options_.metadata_rate_limit_burst, 1.0})};
}

Status Authenticator::AdmitMetadata(const Principal& who, const Directory::Database& db,
                                    const std::string& requested) {
  KVC_RETURN_IF_ERROR(CheckDatabase(who, db, requested));
  return Take(metadata_limiter_, who.token_id, MetadataLimit(LimitFor(who.token_id, who.rate)),
              "metadata_rate");
}

Status Authenticator::Take(RateLimiter& limiter, const std::string& token_id,
                           const RateLimit& limit, std::string_view reason) {
  if (limit.rate <= 0) return Status::Ok();
  RateLimiter::Clock::duration wait{};
  if (limiter.Allow(token_id, limit.rate, limit.burst, RateLimiter::Clock::now(), &wait)) {
    return Status::Ok();
  }
  const int64_t wait_ms =
      std::max<int64_t>(1, std::chrono::ceil<std::chrono::milliseconds>(wait).count());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", limit.rate);
  return Fail(reason, Throttled("Rate limit exceeded for this access token (" + std::string(buf) +
                                    " requests per second); slow down and retry.",
                                wait_ms));
}

}  // namespace kvc::service
