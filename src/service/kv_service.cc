#include "service/kv_service.h"

#include <spdlog/spdlog.h>

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

KvService::KvService(ServiceOptions options, std::string server_secret, engine::Engine* default_db)
    : options_(std::move(options)), signer_(std::move(server_secret)), default_db_(default_db) {
  by_id_[default_db_->database_id()] = default_db_;
}

void KvService::Handle(HttpRequest req, Responder respond) {
  try {
    const std::string path = NormalizePath(req.path);
    const std::string prefix = options_.endpoint_path + "/";
    const bool is_metadata = path == "/";
    const bool is_data = path.compare(0, prefix.size(), prefix) == 0;
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
      HandleMetadata(req, respond);
    } else {
      HandleDataPath(req, path.substr(prefix.size()), respond);
    }
  } catch (const std::exception& e) {
    spdlog::error("handler failed: {}", e.what());
    respond(ErrorResponse(Internal("An internal server error occurred.")));
  }
}

void KvService::HandleMetadata(const HttpRequest& req, Responder& respond) {
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
  if (!auth::ConstantTimeEquals(*token, options_.access_token)) {
    respond(ErrorResponse(Unauthenticated("Invalid access token.")));
    return;
  }
  const int64_t now = NowUnixMs();
  const int64_t expires_at = now + options_.metadata_ttl_ms;
  auth::TokenClaims claims;
  claims.database_id = default_db_->database_id();
  claims.scope = auth::Scope::kAdmin;
  claims.access_token_id = "bootstrap";
  claims.expires_at_ms = expires_at + options_.token_grace_ms;

  codec::MetadataResponse m;
  m.version = version;
  m.database_id = default_db_->database_id();
  if (version == 1) {
    if (req.authority.empty()) {
      respond(ErrorResponse(InvalidArgument(
          "Protocol version 1 needs a Host header to build the absolute endpoint URL.")));
      return;
    }
    m.endpoints.push_back({req.scheme + "://" + req.authority + options_.endpoint_path, "strong"});
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

Result<engine::Engine*> KvService::AuthorizeDataPath(const HttpRequest& req, bool write) {
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
  KVC_ASSIGN_OR_RETURN(auth::TokenClaims claims, signer_.Verify(token, NowUnixMs()));
  if (db_header.empty() || db_header != claims.database_id) {
    return InvalidArgument("Invalid database id.");
  }
  if (write && claims.scope == auth::Scope::kRead) {
    return PermissionDenied("This access token is read-only; writes are not permitted.");
  }
  auto it = by_id_.find(claims.database_id);
  if (it == by_id_.end()) return NotFound("The database no longer exists.");
  return it->second;
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
  engine::Engine* engine = *db;
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
  r.stream = std::make_shared<WatchStream>(engine, std::move(*keys));
  r.heartbeat = std::string(4, '\0');
  r.heartbeat_interval = options_.watch_keepalive;
  respond(std::move(r));
}

}  // namespace kvc::service
