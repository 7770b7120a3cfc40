#include "service/admin/admin_api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backup/operations.h"
#include "codec/admin_json.h"
#include "codec/json_text.h"
#include "codec/v8/v8_json.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/thread_name.h"
#include "engine/commit_listener.h"
#include "service/admin/dump.h"
#include "service/http_status.h"
#include "service/kvconnect/watch_stream.h"
#include "service/ops/metrics.h"
#include "service/query.h"
#include "service/queue/queue_api.h"
#include "service/range_walker.h"

namespace kvc::service {
namespace {

using codec::AppendJsonArray;
using codec::AppendJsonQuoted;
using codec::JsonQuote;

std::string Time(int64_t ms) { return ms == 0 ? "null" : JsonQuote(FormatRfc3339Utc(ms)); }

std::string NumberJson(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string VersionstampJson(int64_t version) { return JsonQuote(codec::VersionToHex(version)); }

// One Server-Sent Event named `entries` with `items` (JSON objects) as its data.
std::string SseEvent(const std::vector<std::string>& items) {
  std::string out = "event: entries\ndata: {\"entries\":";
  AppendJsonArray(
      items, [](const std::string& item, std::string* o) { *o += item; }, &out);
  out += "}\n\n";
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

std::string TokenJson(const TokenInfo& info) {
  const storage::AccessTokenRecord& t = info.record;
  // "database" and "database_id" name its first database, for clients of one-database tokens.
  const bool some = !t.database_ids.empty() && !info.database_names.empty();
  auto list = [](const std::vector<std::string>& items) {
    std::string out;
    AppendJsonArray(items, AppendJsonQuoted, &out);
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

namespace {

JsonApiPolicy AdminPolicy(Authenticator* auth, Directory* directory,
                          std::function<Status(std::function<void()>)> post) {
  JsonApiPolicy p;
  p.auth = auth;
  p.directory = directory;
  p.admit = [auth](const Principal& who) { return auth->AdmitAdmin(who); };
  p.post = std::move(post);
  p.admit_database = [auth](const Principal& who, const Directory::Database& db,
                            const std::string& name) { return auth->CheckDatabase(who, db, name); };
  p.log_name = "admin API";
  return p;
}

}  // namespace

AdminApi::AdminApi(AdminApiOptions options, Directory* directory, Authenticator* auth,
                   AdminOps* ops, const Metrics* metrics)
    : env_{options, directory, ops, metrics,
           [this](Work work, bool bounded) { return Post(std::move(work), bounded); }},
      json_(AdminPolicy(auth, directory, [this](Work work) { return Post(std::move(work)); })) {
  worker_ = std::make_unique<WorkPool>(
      WorkPoolOptions{.threads = 1,
                      .max_queued = options.max_queued_operations,
                      .full_text = "Too many admin operations are waiting; try again shortly."},
      "admin operation failed");
  AddServerRoutes(&routes_);
  AddEntryRoutes(&routes_);
  AddQueueAdminRoutes(json_, &routes_, kDatabasePattern);
  AddFallbackRoutes(&routes_);
}

AdminApi::~AdminApi() {
  worker_.reset();
  MutexLock lock(backup_mu_);
  if (backup_thread_.joinable()) backup_thread_.join();
}

void AdminApi::Handle(HttpRequest request, Responder respond) {
  routes_.Handle(std::move(request), std::move(respond));
}

void AdminApi::Backup(const JsonCallPtr& call) {
  auto requested = codec::ParseAdminBackupRequest(call->req.body);
  if (!requested.ok()) return call->Fail(requested.status());
  // Resolving the destination reads the file system (symlinks): on the worker.
  Status s = Post([this, call, rec = call->db->record, requested = std::move(*requested)] {
    StartBackup(call, rec, requested);
  });
  if (!s.ok()) call->Fail(s);
}

void AdminApi::StartBackup(const JsonCallPtr& call, const storage::DatabaseRecord& rec,
                           const std::string& requested) {
  // Only where the operator allowed; a token bound to this database only to the default.
  auto to = backup_destinations_.Resolve(requested, call->who.server_wide);
  if (!to.ok()) return call->Fail(to.status());
  if (storage_ == nullptr) return call->Fail(Internal("this server cannot take backups"));
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::milliseconds min_interval(env_.options.backup_min_interval_ms);
  {
    MutexLock lock(backup_mu_);
    auto last = last_backup_.find(rec.id);
    if (last != last_backup_.end() && now - last->second < min_interval) {
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(last->second + min_interval - now);
      return call->Fail(
          Throttled("Database '" + rec.name + "' was backed up less than " +
                        std::to_string(env_.options.backup_min_interval_ms) +
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
    NameThisThread("kvc-backup-job");
    auto finish = [this](const JsonCallPtr& c, Result<std::string> r) {
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

Status AdminApi::Post(Work work, bool bounded) { return worker_->Post(std::move(work), bounded); }

// --- Server-wide operations -------------------------------------------------------------------

std::string DatabaseJson(const AdminApi::Env& env, const DatabaseInfo& info,
                         const Directory::Snapshot& snap) {
  const storage::DatabaseRecord& rec = info.record;
  const Directory::Database* db = snap.Find(rec.id);
  const bool serving = db != nullptr && db->engine != nullptr;
  std::string out = "{\"name\":" + JsonQuote(rec.name) + ",\"id\":" + JsonQuote(rec.id) +
                    ",\"location\":" + JsonQuote(info.location) +
                    ",\"created_at\":" + Time(rec.created_ms) +
                    ",\"serving\":" + (serving ? "true" : "false");
  std::optional<Metrics::DatabaseSize> size;
  if (env.metrics != nullptr) size = env.metrics->DatabaseSizeOf(rec.id);
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

namespace {

// Runs `work` on the worker; a refusal (queue full, stopping) answers the call.
void OnWorker(const AdminApi::Env& env, const JsonCallPtr& call, std::function<void()> work) {
  if (Status s = env.post(std::move(work), /*bounded=*/true); !s.ok()) call->Fail(s);
}

void ListDatabases(const AdminApi::Env& env, const JsonCallPtr& call) {
  OnWorker(env, call, [&env, call, snapshot = env.directory->snapshot()] {
    auto dbs = env.ops->ListDatabases();
    if (!dbs.ok()) return call->Fail(dbs.status());
    std::string out = "{\"databases\":[";
    bool first = true;
    for (const DatabaseInfo& info : *dbs) {
      // A catalog token sees only the databases it opens, and not where the server keeps them.
      const bool scoped = !call->who.server_wide;
      if (!Authenticator::Opens(call->who, info.record.id)) continue;
      if (!first) out.push_back(',');
      first = false;
      out += DatabaseJson(env, scoped ? DatabaseInfo{info.record, ""} : info, *snapshot);
    }
    out += "]}";
    call->Ok(std::move(out));
  });
}

void GetDatabase(const AdminApi::Env& env, const JsonCallPtr& call) {
  call->Ok(DatabaseJson(env, DatabaseInfo{call->db->record, ""}, *call->snap));
}

void CreateDatabase(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto body = codec::ParseAdminDatabaseRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  OnWorker(env, call, [&env, call, name = body->name] {
    auto info = env.ops->CreateDatabase(name);
    if (!info.ok()) return call->Fail(info.status());
    // Serve it at once rather than at the next catalog poll.
    env.directory->RefreshThen([&env, call, info = *info](const auto& snap) {
      call->Ok(DatabaseJson(env, info, *snap), 201);
    });
  });
}

void RenameDatabase(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto body = codec::ParseAdminDatabaseRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  OnWorker(env, call, [&env, call, new_name = body->name] {
    auto renamed = env.ops->RenameDatabase(std::string(call->req.Param("db")), new_name);
    if (!renamed.ok()) return call->Fail(renamed.status());
    env.directory->RefreshThen([&env, call, rec = renamed->record](const auto& snap) {
      call->Ok(DatabaseJson(env, DatabaseInfo{rec, ""}, *snap));
    });
  });
}

void DeleteDatabase(const AdminApi::Env& env, const JsonCallPtr& call) {
  OnWorker(env, call, [&env, call] {
    auto rec = env.ops->DeleteDatabase(std::string(call->req.Param("db")));
    if (!rec.ok()) return call->Fail(rec.status());
    env.directory->RefreshThen([&env, call, rec = *rec](const auto& snap) {
      call->Ok(DatabaseJson(env, DatabaseInfo{rec, ""}, *snap));
    });
  });
}

void ListTokens(const AdminApi::Env& env, const JsonCallPtr& call) {
  OnWorker(env, call, [&env, call] {
    auto tokens = env.ops->ListTokens("");
    if (!tokens.ok()) return call->Fail(tokens.status());
    std::string out = "{\"tokens\":";
    AppendJsonArray(
        *tokens, [](const TokenInfo& t, std::string* o) { *o += TokenJson(t); }, &out);
    out += "}";
    call->Ok(std::move(out));
  });
}

void CreateToken(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto body = codec::ParseAdminTokenRequest(call->req.body);
  if (!body.ok()) return call->Fail(body.status());
  TokenRequest req;
  req.databases = body->databases;
  req.all_databases = body->all_databases;
  req.scope = body->scope;
  req.expires = body->expires;
  req.name = body->name;
  req.rate_limit = body->rate_limit;
  OnWorker(env, call, [&env, call, req] {
    auto t = env.ops->CreateToken(req);
    if (!t.ok()) return call->Fail(t.status());
    TokenInfo info{t->record, t->scope, t->database_names, TokenStatus::kActive};
    call->Ok("{\"token\":" + JsonQuote(t->token) + ",\"info\":" + TokenJson(info) + "}", 201);
  });
}

void RevokeToken(const AdminApi::Env& env, const JsonCallPtr& call) {
  OnWorker(env, call, [&env, call] {
    auto revoked = env.ops->RevokeToken(std::string(call->req.Param("id")));
    if (!revoked.ok()) return call->Fail(revoked.status());
    // Refuse it at once rather than at the next catalog poll: once this answer says revoked
    // (and the console shows it), no new request with the token gets through.
    env.directory->RefreshThen(
        [call, id = *revoked](const auto&) { call->Ok("{\"id\":" + JsonQuote(id) + "}"); });
  });
}

// --- Entries ----------------------------------------------------------------------------------

void ListEntries(const JsonCallPtr& call, const codec::AdminListRequest& req) {
  const Directory::Database& db = *call->db;
  const int32_t limit = req.limit;
  const bool raw = req.raw;
  if (req.range.start >= req.range.end) {
    auto empty = codec::AdminEntryListJson({}, false, raw);
    return empty.ok() ? call->Ok(std::move(*empty)) : call->Fail(empty.status());
  }
  // One more than asked tells whether there is a next page; at the engine's largest read a
  // full page is assumed to have one (the next page may then be empty).
  const auto max_read = static_cast<int32_t>(db.engine->limits().max_read_entries);
  const int32_t read = std::min(limit + 1, max_read);
  ReadRange range{req.range.start, req.range.end, read, req.reverse};
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

// The answer of entries/children.
Result<std::string> ChildrenJson(const KeyChildrenResult& r) {
  std::string out = "{\"children\":[";
  for (size_t i = 0; i < r.children.size(); ++i) {
    const KeyChild& c = r.children[i];
    if (i > 0) out.push_back(',');
    // The view of the part alone is a key of one part: "[{...}]" (a raw part for bytes that
    // are no Deno key part).
    const std::string key = codec::KeyToJson(c.part);
    out += "{\"part\":";
    out.append(key, 1, key.size() - 2);
    out += ",\"count\":" + std::to_string(c.count) +
           ",\"count_capped\":" + (c.capped ? "true" : "false") +
           ",\"has_value\":" + (c.entry ? "true" : "false");
    if (c.entry) {
      KVC_ASSIGN_OR_RETURN(std::string entry, codec::AdminEntryJson(*c.entry, /*raw=*/false));
      out += ",\"entry\":" + entry;
    }
    out.push_back('}');
  }
  out += "],\"cursor\":";
  if (r.next_start.empty()) {
    out += "null";
  } else {
    AppendJsonQuoted(codec::AdminCursor(r.next_start), &out);
  }
  out.push_back('}');
  return out;
}

void ListChildren(const KeyChildrenOptions& options, const JsonCallPtr& call,
                  codec::AdminChildrenRequest req) {
  ListKeyChildren(call->db->engine, std::move(req.prefix), std::move(req.range.start),
                  std::move(req.range.end), req.limit, options,
                  [call](Result<KeyChildrenResult> r) {
                    if (!r.ok()) return call->Fail(r.status());
                    auto json = ChildrenJson(*r);
                    if (!json.ok()) return call->Fail(json.status());
                    call->Ok(std::move(*json));
                  });
}

// The read range of exactly one key.
ReadRange OneKey(std::string key) {
  std::string end = key;
  end.push_back('\0');
  return ReadRange{std::move(key), std::move(end), 1, false};
}

void GetEntry(const JsonCallPtr& call, codec::AdminGetRequest req) {
  const bool raw = req.raw;
  call->db->engine->SnapshotRead({OneKey(std::move(req.key))},
                                 [call, raw](Result<engine::ReadResult> r) {
                                   if (!r.ok()) return call->Fail(r.status());
                                   if (r->ranges[0].empty()) return call->Ok("{\"entry\":null}");
                                   auto json = codec::AdminEntryJson(r->ranges[0][0], raw);
                                   if (!json.ok()) return call->Fail(json.status());
                                   call->Ok("{\"entry\":" + *json + "}");
                                 });
}

// entries/get-many: the keys read at one version (one snapshot read of a range per key), answered
// in the order asked, null where a key has no entry.
void GetManyEntries(const JsonCallPtr& call, codec::AdminGetManyRequest req) {
  const size_t max = call->db->engine->limits().max_read_ranges;
  if (req.keys.size() > max) {
    return call->Fail(InvalidArgument("'keys': at most " + std::to_string(max) +
                                      " keys in one get-many (as many as one snapshot read may "
                                      "name); ask for the rest in another call."));
  }
  std::vector<ReadRange> ranges;
  ranges.reserve(req.keys.size());
  for (std::string& key : req.keys) ranges.push_back(OneKey(std::move(key)));
  call->db->engine->SnapshotRead(std::move(ranges),
                                 [call, raw = req.raw](Result<engine::ReadResult> r) {
                                   if (!r.ok()) return call->Fail(r.status());
                                   std::string out = "{\"entries\":[";
                                   for (size_t i = 0; i < r->ranges.size(); ++i) {
                                     if (i > 0) out.push_back(',');
                                     if (r->ranges[i].empty()) {
                                       out += "null";
                                       continue;
                                     }
                                     auto json = codec::AdminEntryJson(r->ranges[i][0], raw);
                                     if (!json.ok()) return call->Fail(json.status());
                                     out += *json;
                                   }
                                   out += "]}";
                                   call->Ok(std::move(out));
                                 });
}

// Writes one mutation of entries/set or entries/delete, checked against `check` if it has one.
void WriteOne(const JsonCallPtr& call, Mutation m, codec::AdminCheck check) {
  AtomicWrite write;
  const bool checked = check.has_value();
  if (checked) write.checks.push_back(Check{m.key, std::move(*check)});
  write.mutations.push_back(std::move(m));
  call->db->engine->Write(std::move(write), [call, checked](Result<CommitResult> r) {
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

void SetEntry(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto req = codec::ParseAdminSetRequest(call->req.body, env.options.v8_write_format);
  if (!req.ok()) return call->Fail(req.status());
  Mutation m;
  m.key = std::move(req->key);
  m.type = MutationType::kSet;
  m.value = std::move(req->value);
  const int64_t now = call->db->engine->now_ms();
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
  WriteOne(call, std::move(m), std::move(req->check));
}

void DeleteEntry(const JsonCallPtr& call, codec::AdminDeleteRequest req) {
  Mutation m;
  m.key = std::move(req.key);
  m.type = MutationType::kDelete;
  WriteOne(call, std::move(m), std::move(req.check));
}

void DeleteRange(const JsonCallPtr& call, codec::AdminRangeRequest req) {
  DeleteRangeInBatches(call->db->engine, std::move(req.range.start), std::move(req.range.end),
                       req.batch, [call](const Result<DeleteRangeResult>& r) {
                         if (!r.ok()) return call->Fail(r.status());
                         call->Ok("{\"deleted\":" + std::to_string(r->deleted) +
                                  ",\"batches\":" + std::to_string(r->batches) + "}");
                       });
}

void Count(const JsonCallPtr& call, codec::AdminRangeRequest req) {
  struct Totals {
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> bytes{0};
  };
  auto totals = std::make_shared<Totals>();
  auto w = std::make_shared<RangeWalker>();
  w->engine = call->db->engine;
  w->start = std::move(req.range.start);
  w->end = std::move(req.range.end);
  w->page = static_cast<int32_t>(w->engine->limits().max_read_entries);
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

void Watch(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto req = codec::ParseAdminWatchRequest(call->req.body);
  if (!req.ok()) return call->Fail(req.status());
  const std::shared_ptr<engine::Engine>& engine = call->db->engine;
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("cache-control", "no-store");
  r.heartbeat = ": keepalive\n\n";
  r.heartbeat_interval = std::chrono::milliseconds(env.options.watch_keepalive_ms);
  if (req->prefix) {
    r.stream = std::make_shared<PrefixWatch>(engine, std::move(*req->prefix));
  } else {
    if (Status s = engine::ValidateWatch(req->keys, engine->limits()); !s.ok()) {
      return call->Fail(s);
    }
    std::vector<std::string> keys = req->keys;
    r.stream = std::make_shared<WatchStream>(
        engine, std::move(req->keys), [keys](const std::vector<std::optional<Entry>>& entries) {
          return KeysEvent(keys, entries);
        });
  }
  call->respond(std::move(r));
}

// The ImportError answer: the error body plus the line at fault and what was written.
HttpResponse ImportErrorResponse(const ImportOutcome& out) {
  HttpResponse r = JsonErrorResponse(out.status);
  r.body.pop_back();  // the closing brace
  r.body += ",\"line\":" + (out.bad_line > 0 ? std::to_string(out.bad_line) : "null") + "," +
            ImportStatsMembers(out.stats) + "}";
  return r;
}

void Export(const AdminApi::Env& env, const JsonCallPtr& call) {
  auto range = codec::ParseAdminExportRequest(call->req.body);
  if (!range.ok()) return call->Fail(range.status());
  StartExport(call->db->engine, std::move(range->start), std::move(range->end),
              env.options.export_options, [call](Result<HttpResponse> r) {
                if (!r.ok()) return call->Fail(r.status());
                call->respond(std::move(*r));
              });
}

// The query parameters of an import (mode, prefix, batch, first_line) over `o`.
Status ParseImportQuery(const std::string& query, ImportOptions* o) {
  KVC_ASSIGN_OR_RETURN(QueryParams params, ParseQuery(query));
  for (const auto& [name, value] : params) {
    if (name == "mode") {
      if (value == "replace") {
        o->mode = ImportMode::kReplace;
      } else if (value != "merge") {
        return InvalidArgument("'mode' must be merge or replace, not '" + value + "'.");
      }
    } else if (name == "prefix") {
      KVC_ASSIGN_OR_RETURN(codec::AdminRange range,
                           codec::AdminPrefixRange(value, &o->batch.prefix));
      o->replace_start = std::move(range.start);
      o->replace_end = std::move(range.end);
    } else if (name == "batch") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > 1000) {
        return InvalidArgument("'batch' must be a number of entries from 1 to 1000.");
      }
      o->batch.max_entries = static_cast<size_t>(n);
    } else if (name == "first_line") {
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1) {
        return InvalidArgument("'first_line' must be a line number (1 or more).");
      }
      o->first_line = n;
    } else {
      return InvalidArgument("Unknown query parameter '" + name +
                             "'; an import takes mode, prefix, batch and first_line.");
    }
  }
  return Status::Ok();
}

void Import(const AdminApi::Env& env, const JsonCallPtr& call) {
  ImportOptions o;
  o.batch.max_entries = env.options.import_batch_entries;
  o.batch.max_bytes = env.options.import_batch_bytes;
  o.batch.v8_format = env.options.v8_write_format;
  o.delete_batch = env.options.import_delete_batch;
  if (Status s = ParseImportQuery(call->req.query, &o); !s.ok()) return call->Fail(s);
  auto post = env.post;
  OnWorker(
      env, call,
      [post, call, engine = call->db->engine, o, body = std::move(call->req.body)]() mutable {
        BulkImport::Start(
            std::move(engine), std::move(o), StringDumpReader(std::move(body)),
            [post](std::function<void()> step) { return post(std::move(step), /*bounded=*/false); },
            nullptr,
            [call](const ImportOutcome& out) {
              if (!out.status.ok()) return call->respond(ImportErrorResponse(out));
              call->Ok("{" + ImportStatsMembers(out.stats) + "}");
            });
      });
}

}  // namespace

// --- Routes -----------------------------------------------------------------------------------

namespace {

constexpr char kUsePost[] = "POST with a JSON body.";
using EnvHandler = void (*)(const AdminApi::Env&, const JsonCallPtr&);

// No endpoint at this path (under the prefix, or under a database).
void NoResource(const JsonCallPtr& call) {
  call->Fail(NotFound("No admin API resource at " + call->req.path + "."));
}

}  // namespace

void AdminApi::AddServerRoutes(Router* router) {
  using N = JsonNeeds;
  const std::string databases = std::string(kPrefix) + "/databases";
  const std::string tokens = std::string(kPrefix) + "/tokens";
  auto add = [&](const char* name, std::vector<std::string> methods, const std::string& pattern,
                 JsonNeeds needs, const char* use, EnvHandler fn) {
    json_.Add(router, {name,
                       std::move(methods),
                       {pattern},
                       needs,
                       nullptr,
                       [this, fn](const JsonCallPtr& call) { fn(env_, call); },
                       use});
  };
  // At each pattern the first endpoint decides how other methods are refused (json_api.h).
  add("admin_databases_list", {"GET", "HEAD"}, databases, N::kNothing, "GET or POST.",
      &ListDatabases);
  add("admin_databases_create", {"POST"}, databases, N::kServerWide, "GET or POST.",
      &CreateDatabase);
  add("admin_database_get", {"GET", "HEAD"}, kDatabasePattern, N::kDatabase,
      "GET, PATCH or DELETE.", &GetDatabase);
  add("admin_database_rename", {"PATCH"}, kDatabasePattern, N::kServerWide, "GET, PATCH or DELETE.",
      &RenameDatabase);
  add("admin_database_delete", {"DELETE"}, kDatabasePattern, N::kServerWide,
      "GET, PATCH or DELETE.", &DeleteDatabase);
  add("admin_tokens_list", {"GET", "HEAD"}, tokens, N::kServerWide, "GET or POST.", &ListTokens);
  add("admin_tokens_create", {"POST"}, tokens, N::kServerWide, "GET or POST.", &CreateToken);
  add("admin_tokens_revoke", {"DELETE"}, tokens + "/{id}", N::kServerWide, "DELETE.", &RevokeToken);
}

void AdminApi::AddEntryRoutes(Router* router) {
  // POST .../databases/{db}/<path> with a JSON body, on the database's engine.
  auto add = [&](const char* name, const char* path, JsonHandler handle) {
    json_.Add(router, {name,
                       {"POST"},
                       {std::string(kDatabasePattern) + path},
                       JsonNeeds::kDatabase,
                       nullptr,
                       std::move(handle),
                       kUsePost});
  };
  const Env* env = &env_;
  using A = JsonApi;
  add("admin_entries_list", "/entries/list",
      A::WithBody(&codec::ParseAdminListRequest, ListEntries));
  add("admin_entries_children", "/entries/children",
      A::WithBody<codec::AdminChildrenRequest>(
          &codec::ParseAdminChildrenRequest,
          [env](const JsonCallPtr& c, codec::AdminChildrenRequest req) {
            ListChildren(env->options.children, c, std::move(req));
          }));
  add("admin_entries_get", "/entries/get", A::WithBody(&codec::ParseAdminGetRequest, GetEntry));
  add("admin_entries_get_many", "/entries/get-many",
      A::WithBody(&codec::ParseAdminGetManyRequest, GetManyEntries));
  add("admin_entries_set", "/entries/set", [env](const JsonCallPtr& c) { SetEntry(*env, c); });
  add("admin_entries_delete", "/entries/delete",
      A::WithBody(&codec::ParseAdminDeleteRequest, DeleteEntry));
  add("admin_entries_delete_range", "/entries/delete-range",
      A::WithBody(&codec::ParseAdminRangeRequest, DeleteRange));
  add("admin_entries_count", "/entries/count", A::WithBody(&codec::ParseAdminRangeRequest, Count));
  add("admin_watch", "/watch", [env](const JsonCallPtr& c) { Watch(*env, c); });
  add("admin_export", "/export", [env](const JsonCallPtr& c) { Export(*env, c); });
  add("admin_import", "/import", [env](const JsonCallPtr& c) { Import(*env, c); });
  add("admin_backup", "/backup", [this](const JsonCallPtr& c) { Backup(c); });
}

void AdminApi::AddFallbackRoutes(Router* router) {
  // As the API always answered: anything else under a database is 405 but for POST, which is
  // 404; anything else under the prefix is 404, after the token and the database are checked.
  json_.Add(router, {"admin",
                     {"POST"},
                     {std::string(kDatabasePattern) + "/{path...}"},
                     JsonNeeds::kDatabase,
                     nullptr,
                     NoResource,
                     kUsePost});
  json_.Add(router, {"admin",
                     {},
                     {std::string(kPrefix) + "/{path...}"},
                     JsonNeeds::kNothing,
                     nullptr,
                     NoResource,
                     ""});
}

}  // namespace kvc::service
