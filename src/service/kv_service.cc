#include "service/kv_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "codec/datapath_codec.h"
#include "codec/metadata_json.h"
#include "common/clock.h"
#include "service/http_status.h"
#include "service/watch_stream.h"

namespace kvc::service {
namespace {

constexpr char kProtobuf[] = "application/x-protobuf";

HttpResponse ProtobufResponse(std::string body) {
  HttpResponse r;
  r.status = 200;
  r.content_type = kProtobuf;
  r.body = std::move(body);
  return r;
}

// Collapses repeated slashes so `//v2/x` (from a bare-origin endpoint) routes like `/v2/x`.
std::string NormalizePath(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out.empty()) out = "/";
  return out;
}

// Wraps a responder so exceptions thrown while building a response become a 500 instead of
// escaping into an engine thread.
template <typename F>
void Guarded(Responder& respond, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("handler failed: {}", e.what());
    respond(ErrorResponse(Internal("An internal server error occurred.")));
  }
}

}  // namespace

KvService::KvService(ServiceOptions options, std::string server_secret, Directory* directory)
    : options_(std::move(options)), signer_(std::move(server_secret)), directory_(directory) {}

namespace {
// "/databases/<name-or-id>/connect" -> the name or id; otherwise empty.
std::string ConnectTarget(const std::string& path) {
  constexpr std::string_view kPrefix = "/databases/";
  constexpr std::string_view kSuffix = "/connect";
  if (path.size() <= kPrefix.size() + kSuffix.size()) return {};
  if (path.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  if (path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return {};
  std::string name = path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size());
  if (name.find('/') != std::string::npos) return {};
  return name;
}
}  // namespace

void KvService::Handle(HttpRequest req, Responder respond) {
  try {
    const std::string path = NormalizePath(req.path);
    const std::string prefix = options_.endpoint_path + "/";
    std::string database;
    if (path == "/") {
      database = kDefaultDatabase;
    } else {
      database = ConnectTarget(path);
    }
    const bool is_metadata = !database.empty();
    const bool is_data = !is_metadata && path.compare(0, prefix.size(), prefix) == 0;
    if (!is_metadata && !is_data) {
      respond(ErrorResponse(NotFound("Resource not found.")));
      return;
    }
    if (req.method != "POST") {
      respond(ErrorResponse(
          Status(StatusCode::kMethodNotAllowed, "Method not allowed; KV Connect uses POST.")));
      return;
    }
    if (is_metadata) {
      HandleMetadata(std::move(req), std::move(database), std::move(respond));
    } else {
      HandleDataPath(req, path.substr(prefix.size()), respond);
    }
  } catch (const std::exception& e) {
    spdlog::error("handler failed: {}", e.what());
    respond(ErrorResponse(Internal("An internal server error occurred.")));
  }
}

double KvService::RateFor(const std::string& token_id, double token_rate) const {
  if (token_id == kBootstrapTokenId) return options_.bootstrap_rate_limit_rps;
  return token_rate >= 0 ? token_rate : options_.rate_limit_rps;
}

Status KvService::CheckRate(const std::string& token_id, double rate) {
  if (rate <= 0) return Status::Ok();
  const double burst = std::max(options_.rate_limit_burst, rate);
  if (limiter_.Allow(token_id, rate, burst, RateLimiter::Clock::now())) return Status::Ok();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", rate);
  return ResourceExhausted("Rate limit exceeded for this access token (" + std::string(buf) +
                           " requests per second); slow down and retry.");
}

void KvService::HandleMetadata(HttpRequest req, std::string database, Responder respond) {
  // Version negotiation first (as the reference does), then authentication.
  auto parsed = codec::ParseMetadataRequest(req.body);
  if (!parsed.ok()) {
    respond(ErrorResponse(parsed.status()));
    return;
  }
  int version = 0;
  for (int64_t v : parsed->supported_versions) {
    if (v >= 1 && v <= 3 && v > version) version = static_cast<int>(v);
  }
  if (version == 0) {
    respond(ErrorResponse(InvalidArgument(
        "The server could not negotiate a protocol version. The server supports protocol "
        "versions 1, 2 and 3.")));
    return;
  }
  auto token = auth::ParseBearer(req.Header("authorization"));
  if (!token.ok()) {
    respond(ErrorResponse(token.status()));
    return;
  }
  auto call = std::make_shared<MetadataCall>();
  call->req = std::move(req);
  call->database = std::move(database);
  call->version = version;
  call->token = std::move(*token);
  AnswerMetadata(std::move(call), directory_->snapshot(), /*may_refresh=*/true, std::move(respond));
}

void KvService::AnswerMetadata(std::shared_ptr<MetadataCall> call,
                               const std::shared_ptr<const Directory::Snapshot>& snap,
                               bool may_refresh, Responder respond) {
  const int64_t now = NowUnixMs();
  const Status invalid = Unauthenticated("Invalid access token.");
  // Who is asking.
  Principal who;
  if (!options_.access_token.empty() &&
      auth::ConstantTimeEquals(call->token, options_.access_token)) {
    who.token_id = kBootstrapTokenId;
    who.scope = auth::Scope::kAdmin;
  } else {
    const std::string id = auth::AccessTokenId(call->token);
    if (id.empty()) {
      respond(ErrorResponse(invalid));
      return;
    }
    const storage::AccessTokenRecord* rec = snap->Token(id);
    if (!rec && may_refresh) {  // perhaps created since the last poll
      directory_->RefreshThen([this, call, respond](auto fresh) mutable {
        AnswerMetadata(std::move(call), std::move(fresh), false, std::move(respond));
      });
      return;
    }
    if (!rec || !auth::ConstantTimeEquals(auth::HashAccessToken(call->token), rec->hash)) {
      respond(ErrorResponse(invalid));
      return;
    }
    if (rec->revoked_ms != 0) {
      respond(ErrorResponse(Unauthenticated("Invalid access token: it has been revoked.")));
      return;
    }
    if (rec->expires_ms != 0 && now >= rec->expires_ms) {
      respond(ErrorResponse(Unauthenticated("Invalid access token: it has expired.")));
      return;
    }
    who.token_id = rec->id;
    who.database_id = rec->database_id;
    who.scope = static_cast<auth::Scope>(rec->scope);
    who.expires_ms = rec->expires_ms;
    who.rate = rec->rate_limit;
  }
  // Which database.
  const Directory::Database* db = snap->Find(call->database);
  if (!db && may_refresh) {  // perhaps created since the last poll
    directory_->RefreshThen([this, call, respond](auto fresh) mutable {
      AnswerMetadata(std::move(call), std::move(fresh), false, std::move(respond));
    });
    return;
  }
  if (!db) {
    respond(ErrorResponse(NotFound("Database '" + call->database + "' not found.")));
    return;
  }
  if (!who.database_id.empty() && who.database_id != db->record.id) {
    respond(ErrorResponse(
        PermissionDenied("This access token is not valid for database '" + call->database + "'.")));
    return;
  }
  if (Status s = CheckRate(who.token_id, RateFor(who.token_id, who.rate)); !s.ok()) {
    respond(ErrorResponse(s));
    return;
  }

  const int64_t expires_at = now + options_.metadata_ttl_ms;
  auth::TokenClaims claims;
  claims.database_id = db->record.id;
  claims.scope = who.scope;
  claims.access_token_id = who.token_id;
  claims.expires_at_ms = expires_at + options_.token_grace_ms;
  if (who.expires_ms != 0) claims.expires_at_ms = std::min(claims.expires_at_ms, who.expires_ms);

  codec::MetadataResponse m;
  m.version = call->version;
  m.database_id = db->record.id;
  if (call->version == 1) {
    if (call->req.authority.empty()) {
      respond(ErrorResponse(InvalidArgument(
          "Protocol version 1 needs a Host header to build the absolute endpoint URL.")));
      return;
    }
    m.endpoints.push_back(
        {call->req.scheme + "://" + call->req.authority + options_.endpoint_path, "strong"});
  } else {
    m.endpoints.push_back({options_.endpoint_path, "strong"});
  }
  m.token = signer_.Issue(claims);
  m.expires_at = FormatRfc3339Utc(expires_at);
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = codec::EncodeMetadataResponse(m);
  respond(std::move(r));
}

Result<std::shared_ptr<engine::Engine>> KvService::AuthorizeDataPath(const HttpRequest& req,
                                                                     bool write) {
  const std::string_view version = req.Header("x-denokv-version");
  std::string_view db_header;
  if (version.empty()) {
    db_header = req.Header("x-transaction-domain-id");  // protocol version 1
  } else if (version == "2" || version == "3") {
    db_header = req.Header("x-denokv-database-id");
  } else {
    return InvalidArgument("Expected protocol version 2 or 3 in the x-denokv-version header.");
  }
  KVC_ASSIGN_OR_RETURN(std::string token, auth::ParseBearer(req.Header("authorization")));
  const int64_t now = NowUnixMs();
  KVC_ASSIGN_OR_RETURN(auth::TokenClaims claims, signer_.Verify(token, now));
  if (db_header.empty()) return InvalidArgument("Invalid database id.");
  if (db_header != claims.database_id) {
    return Unauthenticated(
        "The authorization token was issued for another database; repeat the metadata "
        "exchange for this one.");
  }
  auto snap = directory_->snapshot();
  double token_rate = -1;
  if (claims.access_token_id != kBootstrapTokenId) {
    const storage::AccessTokenRecord* rec = snap->Token(claims.access_token_id);
    if (!rec || rec->revoked_ms != 0) {
      return Unauthenticated(
          "The authorization token is no longer valid: its access token has been revoked.");
    }
    if (rec->expires_ms != 0 && now >= rec->expires_ms) {
      return Unauthenticated(
          "The authorization token is no longer valid: its access token has expired.");
    }
    token_rate = rec->rate_limit;
  }
  if (write && claims.scope == auth::Scope::kRead) {
    return PermissionDenied("This access token is read-only; writes are not permitted.");
  }
  const Directory::Database* db = snap->Find(claims.database_id);
  if (!db) return NotFound("The database no longer exists.");
  KVC_RETURN_IF_ERROR(
      CheckRate(claims.access_token_id, RateFor(claims.access_token_id, token_rate)));
  return db->engine;
}

void KvService::HandleDataPath(const HttpRequest& req, const std::string& method,
                               Responder& respond) {
  const bool is_read = method == "snapshot_read";
  const bool is_write = method == "atomic_write";
  const bool is_watch = method == "watch";
  if (!is_read && !is_write && !is_watch) {
    respond(ErrorResponse(NotFound("Resource not found.")));
    return;
  }
  auto db = AuthorizeDataPath(req, is_write);
  if (!db.ok()) {
    respond(ErrorResponse(db.status()));
    return;
  }
  std::shared_ptr<engine::Engine> engine = std::move(*db);
  if (is_read) {
    auto ranges = codec::DecodeSnapshotRead(req.body);
    if (!ranges.ok()) {
      respond(ErrorResponse(ranges.status()));
      return;
    }
    engine->SnapshotRead(std::move(*ranges), [respond](Result<engine::ReadResult> r) mutable {
      Guarded(respond, [&] {
        if (!r.ok()) {
          respond(ErrorResponse(r.status()));
          return;
        }
        respond(ProtobufResponse(codec::EncodeSnapshotReadOutput(r->ranges)));
      });
    });
    return;
  }
  if (is_write) {
    auto write = codec::DecodeAtomicWrite(req.body);
    if (!write.ok()) {
      respond(ErrorResponse(write.status()));
      return;
    }
    engine->Write(std::move(*write), [respond](Result<CommitResult> r) mutable {
      Guarded(respond, [&] {
        if (!r.ok()) {
          respond(ErrorResponse(r.status()));
          return;
        }
        respond(ProtobufResponse(codec::EncodeAtomicWriteOutput(*r)));
      });
    });
    return;
  }
  auto keys = codec::DecodeWatch(req.body);
  if (!keys.ok()) {
    respond(ErrorResponse(keys.status()));
    return;
  }
  Status s = engine::ValidateWatch(*keys, engine->limits());
  if (!s.ok()) {
    respond(ErrorResponse(s));
    return;
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/octet-stream";
  r.stream = std::make_shared<WatchStream>(std::move(engine), std::move(*keys));
  r.heartbeat = std::string(4, '\0');
  r.heartbeat_interval = options_.watch_keepalive;
  respond(std::move(r));
}

}  // namespace kvc::service
