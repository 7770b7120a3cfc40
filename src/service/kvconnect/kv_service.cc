#include "service/kvconnect/kv_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string_view>

#include "codec/datapath_codec.h"
#include "codec/metadata_json.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "queue/queue.h"
#include "service/guarded.h"
#include "service/http_status.h"
#include "service/kvconnect/watch_stream.h"

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

// Wraps a responder so exceptions thrown while building a response become a 500 instead of
// escaping into an engine thread.
template <typename F>
void Guarded(const Responder& respond, F&& f) {
  RunGuarded("handler", f, [&](const Status& s) { respond(ErrorResponse(s)); });
}

// The first steps of every data-path request: the token names a database this request may use
// (`write`: to write), and the body decodes. On failure answers the error and returns false.
template <typename T>
bool Admit(Authenticator& auth, const HttpRequest& req, bool write,
           Result<T> (*decode)(std::string_view), const Responder& respond,
           std::shared_ptr<engine::Engine>* engine, T* body) {
  auto db = auth.AuthorizeDataPath(req, write, NowUnixMs());
  if (!db.ok()) {
    respond(ErrorResponse(db.status()));
    return false;
  }
  auto decoded = decode(req.body);
  if (!decoded.ok()) {
    respond(ErrorResponse(decoded.status()));
    return false;
  }
  *engine = std::move(*db);
  *body = std::move(*decoded);
  return true;
}

// RFC 3986 authority characters without userinfo: unreserved, sub-delims, ':', '[', ']' and
// percent-encoding. Anything else would change the meaning of the URL built from it.
bool IsAuthorityChar(unsigned char c) {
  if (std::isalnum(c)) return true;
  return std::string_view("-._~!$&'()*+,;=:[]%").find(static_cast<char>(c)) !=
         std::string_view::npos;
}

bool IsValidAuthority(std::string_view authority) {
  if (authority.empty()) return false;
  for (unsigned char c : authority) {
    if (!IsAuthorityChar(c)) return false;
  }
  return true;
}

}  // namespace

Result<std::string> NormalizePublicUrl(std::string_view url) {
  const Status bad = InvalidArgument(
      "the public URL must look like https://host[:port][/path], without a query or fragment");
  std::string out;
  for (const char* scheme : {"http://", "https://"}) {
    const std::string_view prefix(scheme);
    if (url.size() < prefix.size()) continue;
    bool match = true;
    for (size_t i = 0; i < prefix.size(); ++i) {
      match = match && std::tolower(static_cast<unsigned char>(url[i])) == prefix[i];
    }
    if (match) {
      out = std::string(prefix);
      url.remove_prefix(prefix.size());
      break;
    }
  }
  if (out.empty()) return bad;
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  const std::string_view authority = url.substr(0, url.find('/'));
  if (!IsValidAuthority(authority)) return bad;
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#') return bad;
  }
  out += url;
  return out;
}

KvService::KvService(ServiceOptions options, std::string server_secret, Directory* directory,
                     WorkPool* body_pool)
    : options_(std::move(options)),
      directory_(directory),
      owned_auth_(
          std::make_unique<Authenticator>(options_.auth, std::move(server_secret), directory)),
      auth_(owned_auth_.get()),
      body_pool_(body_pool) {
  AddRoutes(&routes_);
}

KvService::KvService(ServiceOptions options, Authenticator* authenticator, Directory* directory,
                     WorkPool* body_pool)
    : options_(std::move(options)),
      directory_(directory),
      auth_(authenticator),
      body_pool_(body_pool) {
  AddRoutes(&routes_);
}

// Deno (2.9.6, ext/kv) resolves the URL it POSTs the metadata exchange to by plain string
// concatenation: DENO_KV_PATH_PREFIX + (the argument of Deno.openKv, or DENO_KV_DEFAULT_PATH when
// there is none). It appends nothing, so a prefix of https://host/databases/ and openKv("sales")
// POST to /databases/sales, and https://host/v2/databases/ to /v2/databases/sales; our own
// /databases/NAME/connect and Deploy's /v2/databases/ID/connect come from a full URL in code.
std::string MetadataTarget(std::string_view path) {
  if (path == "/") return storage::kDefaultDatabase;
  for (std::string_view prefix :
       {std::string_view("/databases/"), std::string_view("/v2/databases/")}) {
    if (path.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = path.substr(prefix.size());
    constexpr std::string_view kConnect = "/connect";
    if (rest.size() > kConnect.size() && rest.substr(rest.size() - kConnect.size()) == kConnect) {
      rest.remove_suffix(kConnect.size());
    }
    if (rest.empty() || rest.find('/') != std::string_view::npos) return {};
    return std::string(rest);
  }
  return {};
}

void KvService::Handle(HttpRequest req, Responder respond) {
  routes_.Handle(std::move(req), std::move(respond));
}

namespace {
constexpr char kUsePost[] = "Method not allowed; KV Connect uses POST.";
}  // namespace

void KvService::AddRoutes(Router* router, Handler* root) {
  // POST at `pattern`, named `name`; other methods get 405.
  auto post = [&](const char* name, std::string pattern, HandlerFn handle) {
    router->Add(Endpoint{name, {"POST"}, std::move(pattern), std::move(handle), nullptr, kUsePost});
  };
  auto metadata = [this](HttpRequest req, Responder respond) {
    std::string database(req.Param("db"));
    if (database.empty()) database = storage::kDefaultDatabase;
    PostMetadata(std::move(req), std::move(database), std::move(respond));
  };
  auto unrouted = [this](const HttpRequest& req, const Responder& respond) {
    Unrouted(req, respond);
  };
  if (root != nullptr) {
    router->Add(Endpoint{"metadata", {}, "/", [root](HttpRequest req, Responder respond) {
                           root->Handle(std::move(req), std::move(respond));
                         }});
  } else {
    post("metadata", "/", metadata);
  }
  // The shapes of MetadataTarget; the queue API's /databases/{db}/queue/v1/... is more specific.
  for (const char* base : {"/databases/{db}", "/v2/databases/{db}"}) {
    post("connect", base, metadata);
    post("connect", std::string(base) + "/connect", metadata);
  }
  router->Add(Endpoint{"connect", {}, "/databases/{path...}", unrouted});
  router->Add(Endpoint{"connect", {}, "/v2/databases/{path...}", unrouted});
  const std::string data = options_.endpoint_path;
  post("snapshot_read", data + "/snapshot_read", [this](const HttpRequest& req, Responder respond) {
    SnapshotRead(req, std::move(respond));
  });
  post("atomic_write", data + "/atomic_write",
       [this](const HttpRequest& req, Responder respond) { AtomicWrite(req, std::move(respond)); });
  post("watch", data + "/watch",
       [this](const HttpRequest& req, const Responder& respond) { Watch(req, respond); });
  router->Add(Endpoint{"datapath", {}, data + "/{path...}", unrouted});
}

void KvService::Unrouted(const HttpRequest& req, const Responder& respond) const {
  const std::string prefix = options_.endpoint_path + "/";
  if (req.method != "POST" && req.path.compare(0, prefix.size(), prefix) == 0) {
    respond(ErrorResponse(Status(StatusCode::kMethodNotAllowed, kUsePost)));
    return;
  }
  respond(ErrorResponse(NotFound("Resource not found.")));
}

void KvService::PostMetadata(HttpRequest req, std::string database, Responder respond) {
  struct Pending {
    HttpRequest req;
    std::string database;
    Responder respond;
  };
  auto pending =
      std::make_shared<Pending>(Pending{std::move(req), std::move(database), std::move(respond)});
  auto run = [this](Pending& p) {
    try {
      HandleMetadata(std::move(p.req), std::move(p.database), p.respond);
    } catch (const std::exception& e) {
      spdlog::error("handler failed: {}", e.what());
      p.respond(ErrorResponse(Internal("An internal server error occurred.")));
    }
  };
  if (body_pool_ == nullptr) {
    run(*pending);
    return;
  }
  // Parsing and validating the body is CPU work: a pool thread does it, not this I/O thread.
  Status posted = body_pool_->Post([run, pending] { run(*pending); });
  if (posted.ok()) return;
  if (pending->req.body.size() > options_.metadata_inline_max_bytes) {
    pending->respond(ErrorResponse(posted));
    return;
  }
  // The pool refused (queue full): a small body is cheap to handle here, and a 503 would end
  // Deno's openKv.
  run(*pending);
}

namespace {
// Splits "host[:port]" ("[v6]:port" too) into its host and port (empty when none).
std::pair<std::string_view, std::string_view> SplitAuthority(std::string_view authority) {
  const size_t close = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos || (close != std::string_view::npos && colon < close)) {
    return {authority, {}};
  }
  return {authority.substr(0, colon), authority.substr(colon + 1)};
}

}  // namespace

bool HostAllowed(std::string_view authority, const std::vector<std::string>& allowed) {
  const auto [host, port] = SplitAuthority(authority);
  for (const std::string& entry : allowed) {
    const auto [allowed_host, allowed_port] = SplitAuthority(entry);
    if (!EqualsIgnoringAsciiCase(host, allowed_host)) continue;
    if (allowed_port.empty() || allowed_port == port) return true;
  }
  return false;
}

Result<std::string> KvService::EndpointUrl(const HttpRequest& req) const {
  if (!options_.public_url.empty()) return options_.public_url + options_.endpoint_path;
  if (req.authority.empty()) {
    return InvalidArgument(
        "The metadata answer needs a Host header (or :authority) to build the absolute endpoint "
        "URL.");
  }
  if (!IsValidAuthority(req.authority)) {
    return InvalidArgument(
        "The Host header (or :authority) is not a valid host[:port]; the metadata answer "
        "builds the absolute endpoint URL from it.");
  }
  if (!options_.allowed_hosts.empty() && !HostAllowed(req.authority, options_.allowed_hosts)) {
    return InvalidArgument("The Host header (or :authority) '" + req.authority +
                           "' is not a name this server answers for (--allowed-host); the "
                           "metadata answer builds the endpoint URL from it.");
  }
  const char* scheme = req.scheme == "https" ? "https://" : "http://";
  return scheme + req.authority + options_.endpoint_path;
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
  auto token = auth_->BearerToken(req);
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
  // Who is asking.
  auto who = auth_->AuthenticateAccessToken(call->token, *snap, now, may_refresh);
  if (!who.ok()) {
    respond(ErrorResponse(who.status()));
    return;
  }
  if (!who->has_value()) {  // perhaps created since the last poll
    directory_->RefreshThen([this, call, respond](auto fresh) mutable {
      AnswerMetadata(std::move(call), std::move(fresh), false, std::move(respond));
    });
    return;
  }
  const Principal& principal = **who;
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
  if (Status s = auth_->AdmitMetadata(principal, *db, call->database); !s.ok()) {
    respond(ErrorResponse(s));
    return;
  }

  const int64_t expires_at = now + options_.metadata_ttl_ms;
  codec::MetadataResponse m;
  m.version = call->version;
  m.database_id = db->record.id;
  auto endpoint = EndpointUrl(call->req);
  if (!endpoint.ok()) {
    respond(ErrorResponse(endpoint.status()));
    return;
  }
  const std::string self = *endpoint;
  m.endpoints.push_back({std::move(*endpoint), options_.self_consistency});
  if (options_.peer_endpoints) {
    auto peers = options_.peer_endpoints();
    for (const char* kind : {"strong", "eventual"}) {
      for (const auto& [base, consistency] : peers) {
        const std::string url = base + options_.endpoint_path;
        if (consistency == kind && url != self) m.endpoints.push_back({url, consistency});
      }
    }
  }
  m.token =
      auth_->IssueDataPathToken(principal, db->record.id, expires_at + options_.token_grace_ms);
  m.expires_at = FormatRfc3339Utc(expires_at);
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/json";
  r.body = codec::EncodeMetadataResponse(m);
  respond(std::move(r));
}

void KvService::SnapshotRead(const HttpRequest& req, Responder respond) {
  std::shared_ptr<engine::Engine> engine;
  std::vector<ReadRange> ranges;
  if (!Admit(*auth_, req, /*write=*/false, codec::DecodeSnapshotRead, respond, &engine, &ranges)) {
    return;
  }
  const PortableValues* portable = options_.portable_v8_values ? &portable_ : nullptr;
  auto answer = [respond = std::move(respond), portable](Result<engine::ReadResult> r) mutable {
    Guarded(respond, [&] {
      if (!r.ok()) return respond(ErrorResponse(r.status()));
      if (portable != nullptr) portable->OnRead(&r->ranges);
      respond(ProtobufResponse(codec::EncodeSnapshotReadOutput(r->ranges, r->strong)));
    });
  };
  engine->SnapshotRead(std::move(ranges), std::move(answer));
}

void KvService::AtomicWrite(const HttpRequest& req, Responder respond) {
  std::shared_ptr<engine::Engine> engine;
  kvc::AtomicWrite write;  // the type, not this member function
  if (!Admit(*auth_, req, /*write=*/true, codec::DecodeAtomicWrite, respond, &engine, &write)) {
    return;
  }
  if (!write.enqueues.empty()) {
    // The queue's cap on undelivered messages (429), as for the queue API's enqueue.
    if (auto queue = queue::Queue::QueueFor(*engine)) {
      if (Status s = queue->AdmitEnqueue(write.enqueues.size()); !s.ok()) {
        return respond(ErrorResponse(s));
      }
    }
  }
  if (options_.portable_v8_values) portable_.OnWrite(&write, engine->limits(), engine->now_ms());
  engine->Write(std::move(write), [respond = std::move(respond)](Result<CommitResult> r) mutable {
    Guarded(respond, [&] {
      if (!r.ok()) return respond(ErrorResponse(r.status()));
      respond(ProtobufResponse(codec::EncodeAtomicWriteOutput(*r)));
    });
  });
}

void KvService::Watch(const HttpRequest& req, const Responder& respond) {
  std::shared_ptr<engine::Engine> engine;
  std::vector<std::string> keys;
  if (!Admit(*auth_, req, /*write=*/false, codec::DecodeWatch, respond, &engine, &keys)) return;
  if (Status s = engine::ValidateWatch(keys, engine->limits()); !s.ok()) {
    return respond(ErrorResponse(s));
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/octet-stream";
  r.stream = std::make_shared<WatchStream>(
      std::move(engine), std::move(keys),
      options_.portable_v8_values ? portable_.WatchFrameEncoder() : nullptr);
  r.heartbeat = std::string(4, '\0');
  r.heartbeat_interval = options_.watch_keepalive;
  respond(std::move(r));
}

}  // namespace kvc::service
