#include "service/admin_api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backup/operations.h"
#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "codec/v8_json.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "engine/commit_listener.h"
#include "service/dump.h"
#include "service/http_status.h"
#include "service/metrics.h"
#include "service/query.h"
#include "service/queue_api.h"
#include "service/range_walker.h"
#include "service/watch_stream.h"

namespace kvc::service {
namespace {

using codec::AppendJsonQuoted;
using codec::JsonQuote;

std::string Time(int64_t ms) { return ms == 0 ? "null" : JsonQuote(FormatRfc3339Utc(ms)); }

std::string NumberJson(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.headers.emplace_back("cache-control", "no-store");
  r.body = std::move(body);
  return r;
}

// The error code name: StatusCodeName in lower case, except that storage failures are
// "internal" (their detail stays in the log, as for every client).
std::string CodeName(StatusCode code) {
  if (code == StatusCode::kCorruption || code == StatusCode::kIoError) code = StatusCode::kInternal;
  std::string name = StatusCodeName(code);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// Splits "/a/b/c" into {"a", "b", "c"}.
std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    const size_t j = path.find('/', i);
    out.push_back(path.substr(i, j == std::string::npos ? std::string::npos : j - i));
    i = j == std::string::npos ? path.size() : j;
  }
  return out;
}

std::string VersionstampJson(int64_t version) {
  return JsonQuote(codec::VersionstampToHex(codec::VersionToVersionstamp(version)));
}

// One Server-Sent Event named `entries` with `items` (JSON objects) as its data.
std::string SseEvent(const std::vector<std::string>& items) {
  std::string out = "event: entries\ndata: {\"entries\":[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += items[i];
  }
  out += "]}\n\n";
  return out;
}

// The SSE frames of a watch on keys (WatchStream's encoder). An entry without a JSON view (only
// a damaged KvU64: every key and every value a client can write has one) is left out, and logged.
std::string KeysEvent(const std::vector<std::string>& keys,
                      const std::vector<std::optional<Entry>>& entries) {
  std::vector<std::string> items;
  items.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto item = codec::AdminWatchItemJson(keys[i], entries[i] ? &*entries[i] : nullptr);
    if (!item.ok()) {
      spdlog::warn("admin watch: {}", item.status().message());
      continue;
    }
    items.push_back(std::move(*item));
  }
  return SseEvent(items);
}

// A watch on every key under a prefix: a commit listener that sends one event per commit group
// with the keys under the prefix it changed (their last state in that group).
class PrefixWatch : public StreamSource,
                    public engine::CommitListener,
                    public std::enable_shared_from_this<PrefixWatch> {
 public:
  PrefixWatch(std::shared_ptr<engine::Engine> engine, std::string prefix)
      : engine_(std::move(engine)), prefix_(std::move(prefix)) {}

  void Start(std::shared_ptr<StreamSink> sink) override {
    {
      MutexLock lock(mu_);
      if (cancelled_) return;
      sink_ = std::move(sink);
      // A comment first, so the client sees the stream is open before any change.
      sink_->Send(": watching\n\n");
    }
    engine_->AddListener(shared_from_this());
  }

  void Cancel() override {
    {
      MutexLock lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      sink_.reset();
    }
    engine_->RemoveListener(this);
  }

  void OnCommit(const storage::CommitGroup& group) override {
    // The last change of each key under the prefix, in first-change order.
    std::vector<std::string> keys;
    std::vector<Entry> entries;
    std::vector<bool> present;
    for (const storage::CommitRecord& rec : group.records) {
      for (const storage::KeyChange& ch : rec.changes) {
        if (ch.key.size() <= prefix_.size() || ch.key.compare(0, prefix_.size(), prefix_) != 0) {
          continue;
        }
        size_t i = 0;
        while (i < keys.size() && keys[i] != ch.key) ++i;
        if (i == keys.size()) {
          keys.push_back(ch.key);
          entries.emplace_back();
          present.push_back(false);
        }
        present[i] = ch.row.has_value();
        if (ch.row) {
          entries[i] =
              Entry{ch.key, ch.row->value, ch.row->encoding, ch.row->version, ch.row->expire_at_ms};
        }
      }
    }
    if (keys.empty()) return;
    std::vector<std::string> items;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto item = codec::AdminWatchItemJson(keys[i], present[i] ? &entries[i] : nullptr);
      if (item.ok()) items.push_back(std::move(*item));
    }
    MutexLock lock(mu_);
    if (sink_) sink_->Send(SseEvent(items));
  }

  void OnRetire() override {
    MutexLock lock(mu_);
    if (sink_) sink_->Close();
    sink_.reset();
  }

 private:
  const std::shared_ptr<engine::Engine> engine_;
  const std::string prefix_;
  Mutex mu_;
  std::shared_ptr<StreamSink> sink_ KVC_GUARDED_BY(mu_);
  bool cancelled_ KVC_GUARDED_BY(mu_) = false;
};

}  // namespace

HttpResponse AdminErrorResponse(const Status& status) {
  HttpResponse r = ErrorResponse(status);  // the status table, and storage details kept out
  std::string body = "{\"error\":";
  AppendJsonQuoted(r.body, &body);
  body += ",\"code\":\"";
  body += CodeName(status.code());
  body += "\"}";
  r.body = std::move(body);
  r.content_type = "application/json";
  return r;
}

std::string TokenJson(const TokenInfo& info) {
  const storage::AccessTokenRecord& t = info.record;
  // "database" and "database_id" name its first database, for clients of one-database tokens.
  const bool some = !t.database_ids.empty() && !info.database_names.empty();
  auto list = [](const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendJsonQuoted(items[i], &out);
    }
    out.push_back(']');
    return out;
  };
  std::string out =
      "{\"id\":" + JsonQuote(t.id) + ",\"name\":" + JsonQuote(t.name) +
      ",\"database\":" + JsonQuote(some ? info.database_names[0] : "") +
      ",\"database_id\":" + JsonQuote(some ? t.database_ids[0] : "") +
      ",\"databases\":" + list(info.database_names) + ",\"database_ids\":" + list(t.database_ids) +
      ",\"all_databases\":" + (t.all_databases ? "true" : "false") +
      ",\"scope\":" + JsonQuote(auth::ScopeName(info.scope)) +
      ",\"created_at\":" + Time(t.created_ms) + ",\"expires_at\":" + Time(t.expires_ms) +
      ",\"revoked_at\":" + Time(t.revoked_ms) +
      ",\"rate_limit\":" + (t.rate_limit < 0 ? "null" : NumberJson(t.rate_limit)) +
      ",\"status\":" + JsonQuote(TokenStatusName(info.status)) + "}";
  return out;
}

struct AdminApi::Call {
  HttpRequest req;
  Responder respond;
  std::string token;
  Principal who;

  void Fail(const Status& s) const { respond(AdminErrorResponse(s)); }
  void Ok(std::string body, int status = 200) const {
    respond(JsonResponse(status, std::move(body)));
  }
};

AdminApi::AdminApi(AdminApiOptions options, Directory* directory, Authenticator* auth,
                   AdminOps* ops, const Metrics* metrics)
    : options_(options), directory_(directory), auth_(auth), ops_(ops), metrics_(metrics) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

AdminApi::~AdminApi() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  worker_.join();
  MutexLock lock(backup_mu_);
  if (backup_thread_.joinable()) backup_thread_.join();
}

void AdminApi::Backup(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto requested = codec::ParseAdminBackupRequest(call->req.body);
  if (!requested.ok()) return call->Fail(requested.status());
  // Resolving the destination reads the file system (symlinks): on the worker.
  Status s = Post([this, call, rec = db.record, requested = std::move(*requested)] {
    StartBackup(call, rec, requested);
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::StartBackup(const std::shared_ptr<Call>& call, const storage::DatabaseRecord& rec,
                           const std::string& requested) {
  // Only where the operator allowed; a token bound to this database only to the default.
  auto to = backup_destinations_.Resolve(requested, call->who.server_wide);
  if (!to.ok()) return call->Fail(to.status());
  if (storage_ == nullptr) return call->Fail(Internal("this server cannot take backups"));
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::milliseconds min_interval(options_.backup_min_interval_ms);
  {
    MutexLock lock(backup_mu_);
    auto last = last_backup_.find(rec.id);
    if (last != last_backup_.end() && now - last->second < min_interval) {
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(last->second + min_interval - now);
      return call->Fail(
          Throttled("Database '" + rec.name + "' was backed up less than " +
                        std::to_string(options_.backup_min_interval_ms) +
                        " ms ago; on-demand backups are limited to one per database in that time "
                        "(--backup-min-interval-ms). Retry after the time Retry-After gives.",
                    std::max<int64_t>(1, wait.count())));
    }
  }
  bool idle = false;
  if (!backup_busy_.compare_exchange_strong(idle, true)) {
    return call->Fail(Unavailable("Another backup is running; try again when it has finished."));
  }
  MutexLock lock(backup_mu_);
  if (min_interval.count() > 0) last_backup_[rec.id] = now;
  if (backup_thread_.joinable()) backup_thread_.join();  // finished: it cleared backup_busy_
  backup_thread_ = std::thread([this, call, rec, to = *to] {
    auto finish = [this](const std::shared_ptr<Call>& c, Result<std::string> r) {
      backup_busy_.store(false);
      if (r.ok()) {
        c->Ok(std::move(*r));
      } else {
        c->Fail(r.status());
      }
    };
    auto target = backup::OpenTarget(to, backup::TargetOptions{});
    if (!target.ok()) return finish(call, target.status());
    auto out = backup::SnapshotDatabase(*storage_, rec, **target);
    if (!out.ok()) return finish(call, out.status());
    const codec::SnapshotManifest& m = out->manifest;
    std::string json =
        "{\"database\":" + JsonQuote(rec.name) + ",\"target\":" +
        // Where the server's backups live is the operator's business, not a tenant's.
        JsonQuote(call->who.server_wide ? (*target)->Describe() : std::string()) +
        ",\"object\":" + JsonQuote(out->data_object) +
        ",\"versionstamp\":" + VersionstampJson(m.version) + ",\"time\":" + Time(m.time_ms) +
        ",\"keys\":" + std::to_string(m.key_count) + ",\"bytes\":" + std::to_string(m.bytes) +
        ",\"sha256\":" + JsonQuote(m.sha256) + ",\"copy_ms\":" + std::to_string(out->copy_ms) +
        ",\"upload_ms\":" + std::to_string(out->upload_ms) + "}";
    finish(call, std::move(json));
  });
}

Status AdminApi::Post(Work work, bool bounded) {
  {
    MutexLock lock(mu_);
    if (stopping_) return Unavailable("The server is shutting down.");
    if (bounded && queue_.size() >= options_.max_queued_operations) {
      return Unavailable("Too many admin operations are waiting; try again shortly.");
    }
    queue_.push_back(std::move(work));
  }
  cv_.NotifyOne();
  return Status::Ok();
}

void AdminApi::WorkerLoop() {
  MutexLock lock(mu_);
  for (;;) {
    while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
    if (queue_.empty()) return;  // stopping, and everything queued is done
    Work work = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    try {
      work();
    } catch (const std::exception& e) {
      spdlog::error("admin operation failed: {}", e.what());
    }
    lock.Lock();
  }
}

void AdminApi::Handle(HttpRequest request, Responder respond) {
  auto call = std::make_shared<Call>();
  call->respond = std::move(respond);
  auto token = auth_->BearerToken(request);
  if (!token.ok()) {
    call->Fail(token.status());
    return;
  }
  call->token = std::move(*token);
  call->req = std::move(request);
  Authenticate(call);
}

void AdminApi::Authenticate(const std::shared_ptr<Call>& call) {
  std::string token = call->token;
  auth_->AuthenticateThen(std::move(token), [this, call](Result<Principal> who, const auto& snap) {
    if (!who.ok()) {
      call->Fail(who.status());
      return;
    }
    call->who = std::move(*who);
    if (Status s = auth_->AdmitAdmin(call->who); !s.ok()) {
      call->Fail(s);
      return;
    }
    // Routing parses and validates the body: CPU work for the worker, not an I/O thread.
    Status posted = Post([this, call, snap] {
      try {
        Route(call, *snap);
      } catch (const std::exception& e) {
        spdlog::error("admin handler failed: {}", e.what());
        call->Fail(Internal("An internal server error occurred."));
      }
    });
    if (!posted.ok()) call->Fail(posted);
  });
}

void AdminApi::Route(const std::shared_ptr<Call>& call, const Directory::Snapshot& snap) {
  const std::string& path = call->req.path;
  const std::vector<std::string> seg =
      Segments(path.size() > std::string(kPrefix).size() ? path.substr(std::string(kPrefix).size())
                                                         : std::string());
  const std::string& method = call->req.method;
  auto not_allowed = [&](const char* allowed) {
    call->Fail(Status(StatusCode::kMethodNotAllowed,
                      "Method " + method + " is not allowed here; use " + allowed + "."));
  };
  // Server-wide operations need the bootstrap token; no catalog token, whatever it opens.
  auto server_wide = [&]() -> bool {
    Status s = auth_->AdmitServerWide(call->who);
    if (!s.ok()) call->Fail(s);
    return s.ok();
  };
  if (seg.size() == 1 && seg[0] == "databases") {
    if (method == "GET" || method == "HEAD") {
      ListDatabases(call);
    } else if (method == "POST") {
      if (server_wide()) CreateDatabase(call);
    } else {
      not_allowed("GET or POST");
    }
    return;
  }
  if (seg.size() >= 2 && seg[0] == "databases") {
    std::string rest;
    for (size_t i = 2; i < seg.size(); ++i) rest += (i > 2 ? "/" : "") + seg[i];
    if (rest.empty() && method == "PATCH") {
      if (server_wide()) RenameDatabase(call, seg[1]);
      return;
    }
    if (rest.empty() && method == "DELETE") {
      if (server_wide()) DeleteDatabase(call, seg[1]);
      return;
    }
    RouteDatabase(call, snap, seg[1], rest, /*may_refresh=*/true);
    return;
  }
  if (seg.size() == 1 && seg[0] == "tokens") {
    if (method != "GET" && method != "HEAD" && method != "POST") {
      not_allowed("GET or POST");
    } else if (server_wide()) {
      if (method == "POST") {
        CreateToken(call);
      } else {
        ListTokens(call);
      }
    }
    return;
  }
  if (seg.size() == 2 && seg[0] == "tokens") {
    if (method != "DELETE") {
      not_allowed("DELETE");
    } else if (server_wide()) {
      RevokeToken(call, seg[1]);
    }
    return;
  }
  call->Fail(NotFound("No admin API resource at " + path + "."));
}

void AdminApi::RouteDatabase(const std::shared_ptr<Call>& call, const Directory::Snapshot& snap,
                             const std::string& name, const std::string& rest, bool may_refresh) {
  const Directory::Database* db = snap.Find(name);
  if (db == nullptr) {
    // Perhaps created since the last catalog poll: look again once.
    if (may_refresh) {
      directory_->RefreshThen(
          [this, call, name, rest](const std::shared_ptr<const Directory::Snapshot>& fresh) {
            RouteDatabase(call, *fresh, name, rest, /*may_refresh=*/false);
          });
      return;
    }
    call->Fail(NotFound("Database '" + name + "' not found."));
    return;
  }
  if (Status s = auth_->CheckDatabase(call->who, *db, name); !s.ok()) {
    call->Fail(s);
    return;
  }
  const std::string& method = call->req.method;
  if (HandleQueueAdmin(*db, rest, call->req, call->respond)) return;
  if (rest.empty()) {
    if (method != "GET" && method != "HEAD") {
      call->Fail(Status(StatusCode::kMethodNotAllowed,
                        "Method " + method + " is not allowed here; use GET, PATCH or DELETE."));
      return;
    }
    const DatabaseInfo info{db->record, ""};
    call->Ok(DatabaseJson(info, snap));
    return;
  }
  if (method != "POST") {
    call->Fail(Status(StatusCode::kMethodNotAllowed,
                      "Method " + method + " is not allowed here; use POST with a JSON body."));
    return;
  }
  if (rest == "entries/list") {
    ListEntries(call, *db);
  } else if (rest == "entries/children") {
    ListChildren(call, *db);
  } else if (rest == "entries/get") {
    GetEntry(call, *db);
  } else if (rest == "entries/set") {
    SetEntry(call, *db, /*remove=*/false);
  } else if (rest == "entries/delete") {
    SetEntry(call, *db, /*remove=*/true);
  } else if (rest == "entries/delete-range") {
    DeleteRange(call, *db);
  } else if (rest == "entries/count") {
    Count(call, *db);
  } else if (rest == "watch") {
    Watch(call, *db);
  } else if (rest == "export") {
    Export(call, *db);
  } else if (rest == "import") {
    Import(call, *db);
  } else if (rest == "backup") {
    Backup(call, *db);
  } else {
    call->Fail(NotFound("No admin API resource at " + call->req.path + "."));
  }
}

std::string AdminApi::DatabaseJson(const DatabaseInfo& info,
                                   const Directory::Snapshot& snap) const {
  const storage::DatabaseRecord& rec = info.record;
  const Directory::Database* db = snap.Find(rec.id);
  const bool serving = db != nullptr && db->engine != nullptr;
  std::string out = "{\"name\":" + JsonQuote(rec.name) + ",\"id\":" + JsonQuote(rec.id) +
                    ",\"location\":" + JsonQuote(info.location) +
                    ",\"created_at\":" + Time(rec.created_ms) +
                    ",\"serving\":" + (serving ? "true" : "false");
  std::optional<Metrics::DatabaseSize> size;
  if (metrics_ != nullptr) size = metrics_->DatabaseSizeOf(rec.id);
  out += ",\"keys\":" + (size && size->keys >= 0 ? std::to_string(size->keys) : "null");
  out += ",\"bytes\":" + (size && size->bytes >= 0 ? std::to_string(size->bytes) : "null");
  if (serving) {
    const int64_t v = db->engine->committed_version();
    out += ",\"versionstamp\":" + (v > 0 ? VersionstampJson(v) : "null");
    out += ",\"watchers\":" + std::to_string(db->engine->watch_count());
  } else {
    out += ",\"versionstamp\":null,\"watchers\":null";
  }
  out.push_back('}');
  return out;
}

// --- Server-wide operations -------------------------------------------------------------------

void AdminApi::ListDatabases(const std::shared_ptr<Call>& call) {
  Status s = Post([this, call, snapshot = directory_->snapshot()] {
    auto dbs = ops_->ListDatabases();
    if (!dbs.ok()) return call->Fail(dbs.status());
    std::string out = "{\"databases\":[";
    bool first = true;
    for (const DatabaseInfo& info : *dbs) {
      // A catalog token sees only the databases it opens, and not where the server keeps them.
      const bool scoped = !call->who.server_wide;
      if (!Authenticator::Opens(call->who, info.record.id)) continue;
      if (!first) out.push_back(',');
      first = false;
      out += DatabaseJson(scoped ? DatabaseInfo{info.record, ""} : info, *snapshot);
    }
    out += "]}";
    call->Ok(std::move(out));
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::CreateDatabase(const std::shared_ptr<Call>& call) {
  auto body = codec::ParseAdminDatabaseRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  Status s = Post([this, call, name = body->name] {
    auto info = ops_->CreateDatabase(name);
    if (!info.ok()) return call->Fail(info.status());
    // Serve it at once rather than at the next catalog poll.
    directory_->RefreshThen(
        [this, call, info = *info](const auto& snap) { call->Ok(DatabaseJson(info, *snap), 201); });
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::RenameDatabase(const std::shared_ptr<Call>& call, const std::string& name) {
  auto body = codec::ParseAdminDatabaseRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  Status s = Post([this, call, name, new_name = body->name] {
    auto renamed = ops_->RenameDatabase(name, new_name);
    if (!renamed.ok()) return call->Fail(renamed.status());
    directory_->RefreshThen([this, call, rec = renamed->record](const auto& snap) {
      call->Ok(DatabaseJson(DatabaseInfo{rec, ""}, *snap));
    });
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::DeleteDatabase(const std::shared_ptr<Call>& call, const std::string& name) {
  Status s = Post([this, call, name] {
    auto rec = ops_->DeleteDatabase(name);
    if (!rec.ok()) return call->Fail(rec.status());
    directory_->RefreshThen([this, call, rec = *rec](const auto& snap) {
      call->Ok(DatabaseJson(DatabaseInfo{rec, ""}, *snap));
    });
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::ListTokens(const std::shared_ptr<Call>& call) {
  Status s = Post([this, call] {
    auto tokens = ops_->ListTokens("");
    if (!tokens.ok()) return call->Fail(tokens.status());
    std::string out = "{\"tokens\":[";
    for (size_t i = 0; i < tokens->size(); ++i) {
      if (i > 0) out.push_back(',');
      out += TokenJson((*tokens)[i]);
    }
    out += "]}";
    call->Ok(std::move(out));
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::CreateToken(const std::shared_ptr<Call>& call) {
  auto body = codec::ParseAdminTokenRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  TokenRequest req;
  req.databases = body->databases;
  req.all_databases = body->all_databases;
  req.scope = body->scope;
  req.expires = body->expires;
  req.name = body->name;
  req.rate_limit = body->rate_limit;
  Status s = Post([this, call, req] {
    auto t = ops_->CreateToken(req);
    if (!t.ok()) return call->Fail(t.status());
    TokenInfo info{t->record, t->scope, t->database_names, TokenStatus::kActive};
    call->Ok("{\"token\":" + JsonQuote(t->token) + ",\"info\":" + TokenJson(info) + "}", 201);
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::RevokeToken(const std::shared_ptr<Call>& call, const std::string& id) {
  Status s = Post([this, call, id] {
    auto revoked = ops_->RevokeToken(id);
    if (!revoked.ok()) return call->Fail(revoked.status());
    // Refuse it at once rather than at the next catalog poll: once this answer says revoked
    // (and the console shows it), no new request with the token gets through.
    directory_->RefreshThen(
        [call, id = *revoked](const auto&) { call->Ok("{\"id\":" + JsonQuote(id) + "}"); });
  });
  if (!s.ok()) call->Fail(s);
}

// --- Entries ----------------------------------------------------------------------------------

void AdminApi::ListEntries(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminListRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  const int32_t limit = req->limit;
  const bool raw = req->raw;
  if (req->range.start >= req->range.end) {
    auto empty = codec::AdminEntryListJson({}, false, raw);
    return empty.ok() ? call->Ok(std::move(*empty)) : call->Fail(empty.status());
  }
  // One more than asked tells whether there is a next page; at the engine's largest read a
  // full page is assumed to have one (the next page may then be empty).
  const auto max_read = static_cast<int32_t>(db.engine->limits().max_read_entries);
  const int32_t read = std::min(limit + 1, max_read);
  ReadRange range{req->range.start, req->range.end, read, req->reverse};
  db.engine->SnapshotRead(
      {std::move(range)}, [call, limit, read, raw](Result<engine::ReadResult> r) {
        if (!r.ok()) return call->Fail(r.status());
        std::vector<Entry>& entries = r->ranges[0];
        const bool more = entries.size() > static_cast<size_t>(limit) ||
                          (read == limit && entries.size() == static_cast<size_t>(limit));
        if (more) entries.resize(limit);
        auto json = codec::AdminEntryListJson(entries, more, raw);
        if (!json.ok()) return call->Fail(json.status());
        call->Ok(std::move(*json));
      });
}

void AdminApi::ListChildren(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminChildrenRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  ListKeyChildren(db.engine, std::move(req->prefix), std::move(req->range.start),
                  std::move(req->range.end), req->limit, options_.children,
                  [call](Result<KeyChildrenResult> r) {
                    if (!r.ok()) return call->Fail(r.status());
                    std::string out = "{\"children\":[";
                    for (size_t i = 0; i < r->children.size(); ++i) {
                      const KeyChild& c = r->children[i];
                      if (i > 0) out.push_back(',');
                      // The view of the part alone is a key of one part: "[{...}]" (a raw part for
                      // bytes that are no Deno key part).
                      const std::string key = codec::KeyToJson(c.part);
                      out += "{\"part\":";
                      out.append(key, 1, key.size() - 2);
                      out += ",\"count\":" + std::to_string(c.count) +
                             ",\"count_capped\":" + (c.capped ? "true" : "false") +
                             ",\"has_value\":" + (c.entry ? "true" : "false");
                      if (c.entry) {
                        auto entry = codec::AdminEntryJson(*c.entry, /*raw=*/false);
                        if (!entry.ok()) return call->Fail(entry.status());
                        out += ",\"entry\":" + *entry;
                      }
                      out.push_back('}');
                    }
                    out += "],\"cursor\":";
                    if (r->next_start.empty()) {
                      out += "null";
                    } else {
                      AppendJsonQuoted(codec::AdminCursor(r->next_start), &out);
                    }
                    out.push_back('}');
                    call->Ok(std::move(out));
                  });
}

void AdminApi::GetEntry(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminGetRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  std::string end = req->key;
  end.push_back('\0');
  const bool raw = req->raw;
  db.engine->SnapshotRead({ReadRange{req->key, std::move(end), 1, false}},
                          [call, raw](Result<engine::ReadResult> r) {
                            if (!r.ok()) return call->Fail(r.status());
                            if (r->ranges[0].empty()) return call->Ok("{\"entry\":null}");
                            auto json = codec::AdminEntryJson(r->ranges[0][0], raw);
                            if (!json.ok()) return call->Fail(json.status());
                            call->Ok("{\"entry\":" + *json + "}");
                          });
}

void AdminApi::SetEntry(const std::shared_ptr<Call>& call, const Directory::Database& db,
                        bool remove) {
  AtomicWrite write;
  Mutation m;
  codec::AdminCheck check;
  if (remove) {
    auto req = codec::ParseAdminDeleteRequest(call->req.body);
    if (!req.ok()) return call->Fail(req.status());
    m.key = std::move(req->key);
    m.type = MutationType::kDelete;
    check = std::move(req->check);
  } else {
    auto req = codec::ParseAdminSetRequest(call->req.body, options_.v8_write_format);
    if (!req.ok()) return call->Fail(req.status());
    m.key = std::move(req->key);
    m.type = MutationType::kSet;
    m.value = std::move(req->value);
    const int64_t now = db.engine->now_ms();
    if (req->expire_in_ms > 0) m.expire_at_ms = now + req->expire_in_ms;
    if (req->expire_at_ms) {
      // An entry written already expired would be invisible at once: say so instead.
      if (*req->expire_at_ms <= now) {
        return call->Fail(
            InvalidArgument("'expires_at': " + codec::ExpiryToJsonTime(*req->expire_at_ms) +
                            " is not in the future (the server's time is " +
                            codec::ExpiryToJsonTime(now) + "); to remove the entry, delete it."));
      }
      m.expire_at_ms = *req->expire_at_ms;
    }
    check = std::move(req->check);
  }
  const bool checked = check.has_value();
  if (checked) write.checks.push_back(Check{m.key, std::move(*check)});
  write.mutations.push_back(std::move(m));
  db.engine->Write(std::move(write), [call, checked](Result<CommitResult> r) {
    if (!r.ok()) return call->Fail(r.status());
    if (!r->ok) {
      return call->Fail(Status(StatusCode::kConflict,
                               checked ? "The entry has changed since the versionstamp you gave "
                                         "(someone else wrote it); nothing was written. Read it "
                                         "again and retry."
                                       : "The write was refused; nothing was written."));
    }
    call->Ok("{\"ok\":true,\"versionstamp\":" + VersionstampJson(r->version) + "}");
  });
}

void AdminApi::DeleteRange(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminRangeRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  DeleteRangeInBatches(db.engine, std::move(req->range.start), std::move(req->range.end),
                       req->batch, [call](const Result<DeleteRangeResult>& r) {
                         if (!r.ok()) return call->Fail(r.status());
                         call->Ok("{\"deleted\":" + std::to_string(r->deleted) +
                                  ",\"batches\":" + std::to_string(r->batches) + "}");
                       });
}

void AdminApi::Count(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminRangeRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  struct Totals {
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> bytes{0};
  };
  auto totals = std::make_shared<Totals>();
  auto w = std::make_shared<RangeWalker>();
  w->engine = db.engine;
  w->start = req->range.start;
  w->end = req->range.end;
  w->page = static_cast<int32_t>(db.engine->limits().max_read_entries);
  w->on_page = [totals](const std::vector<Entry>& entries, const RangeWalker::Next& next) {
    for (const Entry& e : entries) {
      ++totals->count;
      totals->bytes += static_cast<int64_t>(e.key.size() + e.value.size());
    }
    next(Status::Ok());
  };
  w->done = [call, totals](const Status& s) {
    if (!s.ok()) return call->Fail(s);
    call->Ok("{\"count\":" + std::to_string(totals->count.load()) +
             ",\"bytes\":" + std::to_string(totals->bytes.load()) + "}");
  };
  w->Run();
}

void AdminApi::Watch(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto req = codec::ParseAdminWatchRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("cache-control", "no-store");
  r.heartbeat = ": keepalive\n\n";
  r.heartbeat_interval = std::chrono::milliseconds(options_.watch_keepalive_ms);
  if (req->prefix) {
    r.stream = std::make_shared<PrefixWatch>(db.engine, std::move(*req->prefix));
  } else {
    if (Status s = engine::ValidateWatch(req->keys, db.engine->limits()); !s.ok()) {
      return call->Fail(s);
    }
    std::vector<std::string> keys = req->keys;
    r.stream = std::make_shared<WatchStream>(
        db.engine, std::move(req->keys), [keys](const std::vector<std::optional<Entry>>& entries) {
          return KeysEvent(keys, entries);
        });
  }
  call->respond(std::move(r));
}

namespace {

std::string ImportStatsMembers(const ImportStats& st) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", st.seconds);
  return "\"entries\":" + std::to_string(st.entries) + ",\"bytes\":" + std::to_string(st.bytes) +
         ",\"batches\":" + std::to_string(st.batches) +
         ",\"deleted\":" + std::to_string(st.deleted) +
         ",\"last_line\":" + std::to_string(st.last_line) +
         ",\"skipped\":" + std::to_string(st.skipped) + ",\"seconds\":" + seconds;
}

// The ImportError answer: the error body plus the line at fault and what was written.
HttpResponse ImportErrorResponse(const ImportOutcome& out) {
  HttpResponse r = AdminErrorResponse(out.status);
  r.body.pop_back();  // the closing brace
  r.body += ",\"line\":" + (out.bad_line > 0 ? std::to_string(out.bad_line) : "null") + "," +
            ImportStatsMembers(out.stats) + "}";
  return r;
}

}  // namespace

void AdminApi::Export(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto range = codec::ParseAdminExportRequest(call->req.body);
  if (!range.ok()) return call->Fail(range.status());
  StartExport(db.engine, std::move(range->start), std::move(range->end), options_.export_options,
              [call](Result<HttpResponse> r) {
                if (!r.ok()) return call->Fail(r.status());
                call->respond(std::move(*r));
              });
}

void AdminApi::Import(const std::shared_ptr<Call>& call, const Directory::Database& db) {
  auto params = ParseQuery(call->req.query);
  if (!params.ok()) return call->Fail(params.status());
  ImportOptions o;
  o.batch.max_entries = options_.import_batch_entries;
  o.batch.max_bytes = options_.import_batch_bytes;
  o.batch.v8_format = options_.v8_write_format;
  o.delete_batch = options_.import_delete_batch;
  for (const auto& [name, value] : *params) {
    if (name == "mode") {
      if (value == "replace") {
        o.mode = ImportMode::kReplace;
      } else if (value != "merge") {
        return call->Fail(InvalidArgument("'mode' must be merge or replace, not '" + value + "'."));
      }
    } else if (name == "prefix") {
      auto range = codec::AdminPrefixRange(value, &o.batch.prefix);
      if (!range.ok()) return call->Fail(range.status());
      o.replace_start = std::move(range->start);
      o.replace_end = std::move(range->end);
    } else if (name == "batch") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1000) {
        return call->Fail(InvalidArgument("'batch' must be a number of entries from 1 to 1000."));
      }
      o.batch.max_entries = static_cast<size_t>(n);
    } else if (name == "first_line") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1) {
        return call->Fail(InvalidArgument("'first_line' must be a line number (1 or more)."));
      }
      o.first_line = n;
    } else {
      return call->Fail(InvalidArgument("Unknown query parameter '" + name +
                                        "'; an import takes mode, prefix, batch and first_line."));
    }
  }
  Status s = Post([this, call, engine = db.engine, o, body = std::move(call->req.body)]() mutable {
    BulkImport::Start(
        std::move(engine), std::move(o), StringDumpReader(std::move(body)),
        [this](std::function<void()> step) { return Post(std::move(step), /*bounded=*/false); },
        nullptr,
        [call](const ImportOutcome& out) {
          if (!out.status.ok()) return call->respond(ImportErrorResponse(out));
          call->Ok("{" + ImportStatsMembers(out.stats) + "}");
        });
  });
  if (!s.ok()) call->Fail(s);
}

}  // namespace kvc::service
