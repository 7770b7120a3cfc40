#include "cli/admin.h"

#include <cstdio>
#include <iostream>
#include <map>
#include <vector>

#include "auth/tokens.h"
#include "cli/data_dir.h"
#include "codec/json_text.h"
#include "common/clock.h"

namespace kvc::cli {
namespace {

using codec::JsonQuote;

std::string Time(int64_t ms) { return ms == 0 ? "" : FormatRfc3339Utc(ms); }

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A token's own rate limit as `token list` shows it.
std::string RateLimitText(double rate) {
  if (rate < 0) return "default";
  if (rate == 0) return "unlimited";
  return Number(rate);
}

int Fail(const Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return 2;
    case StatusCode::kNotFound:
      return 3;
    case StatusCode::kAlreadyExists:
      return 4;
    default:
      return 1;
  }
}

std::string TokenStatus(const storage::AccessTokenRecord& t, int64_t now) {
  if (t.revoked_ms != 0) return "revoked";
  if (t.expires_ms != 0 && now >= t.expires_ms) return "expired";
  return "active";
}

int DbCommand(const AdminConfig& c, DataDir& dd) {
  storage::SqliteOptions so;
  if (c.action == "create") {
    auto rec = CreateDatabase(dd, c.name, so);
    if (!rec.ok()) return Fail(rec.status());
    std::cout << rec->id << "\n";
    std::cerr << "Created database '" << rec->name << "' (" << rec->id << ") in "
              << dd.Resolve(rec->path) << ".\nConnect to /databases/" << rec->name
              << "/connect with a token from `kvconnect token create --db " << rec->name
              << " --scope write`.\n";
    return 0;
  }
  if (c.action == "list") {
    auto dbs = dd.catalog->ListDatabases();
    if (!dbs.ok()) return Fail(dbs.status());
    if (c.json) {
      std::cout << "[";
      for (size_t i = 0; i < dbs->size(); ++i) {
        const auto& d = (*dbs)[i];
        std::cout << (i ? "," : "") << "\n  {\"name\":" << JsonQuote(d.name)
                  << ",\"id\":" << JsonQuote(d.id) << ",\"path\":" << JsonQuote(dd.Resolve(d.path))
                  << ",\"created_at\":" << JsonQuote(Time(d.created_ms)) << "}";
      }
      std::cout << (dbs->empty() ? "]\n" : "\n]\n");
      return 0;
    }
    std::printf("%-24s %-36s %s\n", "NAME", "ID", "FILE");
    for (const auto& d : *dbs) {
      std::printf("%-24s %-36s %s\n", d.name.c_str(), d.id.c_str(), dd.Resolve(d.path).c_str());
    }
    return 0;
  }
  auto rec = dd.catalog->FindDatabase(c.name);
  if (!rec.ok()) return Fail(rec.status());
  if (c.action == "rename") {
    if (rec->name == kDefaultDatabase) {
      return Fail(InvalidArgument("the database named default cannot be renamed"));
    }
    if (!storage::IsValidDatabaseName(c.new_name)) {
      return Fail(InvalidArgument("invalid database name '" + c.new_name + "'"));
    }
    Status s = dd.catalog->RenameDatabase(rec->id, c.new_name);
    if (!s.ok()) return Fail(s);
    std::cerr << "Renamed '" << rec->name << "' to '" << c.new_name
              << "'; its id and tokens stay the same.\n";
    return 0;
  }
  // delete
  if (rec->name == kDefaultDatabase) {
    return Fail(InvalidArgument("the database named default cannot be deleted"));
  }
  if (!c.yes) {
    return Fail(InvalidArgument("deleting '" + rec->name +
                                "' destroys its data and revokes its tokens; add --yes to do it"));
  }
  Status s = dd.catalog->RemoveDatabase(rec->id, NowUnixMs());
  if (!s.ok()) return Fail(s);
  RemoveDatabaseFiles(dd.Resolve(rec->path));
  std::cerr << "Deleted database '" << rec->name << "' (" << rec->id
            << ") and revoked its tokens.\n";
  return 0;
}

int TokenCommand(const AdminConfig& c, DataDir& dd) {
  const int64_t now = NowUnixMs();
  if (c.action == "create") {
    auto db = dd.catalog->FindDatabase(c.db);
    if (!db.ok()) return Fail(db.status());
    auto scope = auth::ParseScope(c.scope);
    if (!scope.ok()) return Fail(scope.status());
    const int64_t ttl = ParseDurationMs(c.expires);
    if (ttl < 0) {
      return Fail(InvalidArgument("invalid --expires '" + c.expires +
                                  "': use e.g. 30d, 12h, 90m, 45s, 2w or never"));
    }
    auth::NewAccessToken t = auth::GenerateAccessToken();
    storage::AccessTokenRecord rec;
    rec.id = t.id;
    rec.name = c.label;
    rec.database_id = db->id;
    rec.scope = static_cast<int>(*scope);
    rec.hash = t.hash;
    rec.created_ms = now;
    rec.expires_ms = ttl == 0 ? 0 : now + ttl;
    rec.rate_limit = c.rate_limit;
    Status s = dd.catalog->AddToken(rec);
    if (!s.ok()) return Fail(s);
    std::cout << t.token << "\n";
    std::cerr << "Created " << c.scope << " token " << t.id << " for database '" << db->name << "'"
              << (rec.expires_ms ? ", expires " + Time(rec.expires_ms) : "")
              << ". It is shown only this once.\n";
    return 0;
  }
  if (c.action == "list") {
    auto dbs = dd.catalog->ListDatabases();
    if (!dbs.ok()) return Fail(dbs.status());
    std::map<std::string, std::string> names;
    for (const auto& d : *dbs) names[d.id] = d.name;
    std::string filter_id;
    if (!c.db.empty()) {
      auto db = dd.catalog->FindDatabase(c.db);
      if (!db.ok()) return Fail(db.status());
      filter_id = db->id;
    }
    auto tokens = dd.catalog->ListTokens();
    if (!tokens.ok()) return Fail(tokens.status());
    std::vector<storage::AccessTokenRecord> shown;
    for (auto& t : *tokens) {
      if (filter_id.empty() || t.database_id == filter_id) shown.push_back(t);
    }
    if (c.json) {
      std::cout << "[";
      for (size_t i = 0; i < shown.size(); ++i) {
        const auto& t = shown[i];
        std::cout << (i ? "," : "") << "\n  {\"id\":" << JsonQuote(t.id)
                  << ",\"name\":" << JsonQuote(t.name) << ",\"database\":"
                  << JsonQuote(names.count(t.database_id) ? names[t.database_id] : "")
                  << ",\"database_id\":" << JsonQuote(t.database_id)
                  << ",\"scope\":" << JsonQuote(auth::ScopeName(static_cast<auth::Scope>(t.scope)))
                  << ",\"created_at\":" << JsonQuote(Time(t.created_ms))
                  << ",\"expires_at\":" << (t.expires_ms ? JsonQuote(Time(t.expires_ms)) : "null")
                  << ",\"revoked_at\":" << (t.revoked_ms ? JsonQuote(Time(t.revoked_ms)) : "null")
                  << ",\"rate_limit\":"
                  << (t.rate_limit < 0 ? std::string("null") : Number(t.rate_limit))
                  << ",\"status\":" << JsonQuote(TokenStatus(t, now)) << "}";
      }
      std::cout << (shown.empty() ? "]\n" : "\n]\n");
      return 0;
    }
    std::printf("%-16s %-16s %-16s %-6s %-8s %-10s %-24s %s\n", "ID", "NAME", "DATABASE", "SCOPE",
                "STATUS", "RATE", "CREATED", "EXPIRES");
    for (const auto& t : shown) {
      const std::string db = names.count(t.database_id) ? names[t.database_id] : "(deleted)";
      std::printf("%-16s %-16s %-16s %-6s %-8s %-10s %-24s %s\n", t.id.c_str(), t.name.c_str(),
                  db.c_str(), auth::ScopeName(static_cast<auth::Scope>(t.scope)),
                  TokenStatus(t, now).c_str(), RateLimitText(t.rate_limit).c_str(),
                  Time(t.created_ms).c_str(), t.expires_ms ? Time(t.expires_ms).c_str() : "never");
    }
    return 0;
  }
  // revoke: by id, or by the token itself.
  std::string id = auth::AccessTokenId(c.token);
  if (id.empty()) id = c.token;
  Status s = dd.catalog->RevokeToken(id, now);
  if (!s.ok()) return Fail(s);
  std::cerr << "Revoked token " << id
            << ". A running server refuses it and its data-path tokens within its catalog poll "
               "interval.\n";
  return 0;
}

}  // namespace

int64_t ParseDurationMs(const std::string& text) {
  if (text.empty() || text == "never") return 0;
  size_t pos = 0;
  int64_t n = 0;
  try {
    n = std::stoll(text, &pos);
  } catch (...) {
    return -1;
  }
  if (n <= 0 || pos != text.size() - 1) return -1;
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1000;
      break;
    case 'm':
      unit = 60 * 1000;
      break;
    case 'h':
      unit = 3600 * 1000;
      break;
    case 'd':
      unit = 24LL * 3600 * 1000;
      break;
    case 'w':
      unit = 7 * 24LL * 3600 * 1000;
      break;
    default:
      return -1;
  }
  if (n > INT64_MAX / unit) return -1;
  return n * unit;
}

void AddAdminCommands(CLI::App& app, AdminConfig* c) {
  auto data_dir = [c](CLI::App* s) {
    s->add_option("--data-dir", c->data_dir, "Data directory (as for serve)")
        ->capture_default_str();
  };
  CLI::App* db = app.add_subcommand("db", "Manage databases (create, list, rename, delete)");
  db->require_subcommand(1);
  CLI::App* dc = db->add_subcommand("create", "Create a database; prints its id");
  dc->add_option("name", c->name, "Database name")->required();
  data_dir(dc);
  CLI::App* dl = db->add_subcommand("list", "List databases");
  dl->add_flag("--json", c->json, "JSON output");
  data_dir(dl);
  CLI::App* dr = db->add_subcommand("rename", "Rename a database (id and tokens stay)");
  dr->add_option("name", c->name, "Current name or id")->required();
  dr->add_option("new_name", c->new_name, "New name")->required();
  data_dir(dr);
  CLI::App* dd = db->add_subcommand("delete", "Delete a database, its data and its tokens");
  dd->add_option("name", c->name, "Name or id")->required();
  dd->add_flag("--yes", c->yes, "Really delete");
  data_dir(dd);

  CLI::App* tok = app.add_subcommand("token", "Manage access tokens (create, list, revoke)");
  tok->require_subcommand(1);
  CLI::App* tc =
      tok->add_subcommand("create", "Create an access token; prints only the token (shown once)");
  tc->add_option("--db", c->db, "Database name or id")->required();
  tc->add_option("--scope", c->scope, "read | write | admin")
      ->required()
      ->check(CLI::IsMember({"read", "write", "admin"}));
  tc->add_option("--expires", c->expires, "Lifetime: 30d, 12h, 90m, 45s, 2w or never")
      ->capture_default_str();
  tc->add_option("--name", c->label, "A label to recognise the token by");
  tc->add_option("--rate-limit", c->rate_limit,
                 "Requests per second for this token, which also bounds its bursts (0: unlimited; "
                 "default: the server's)");
  data_dir(tc);
  CLI::App* tl = tok->add_subcommand("list", "List access tokens (never the secrets)");
  tl->add_option("--db", c->db, "Only this database's tokens");
  tl->add_flag("--json", c->json, "JSON output");
  data_dir(tl);
  CLI::App* tr = tok->add_subcommand("revoke", "Revoke an access token");
  tr->add_option("token", c->token, "Token id (as listed) or the token itself")->required();
  data_dir(tr);
}

int RunAdmin(CLI::App& app, const AdminConfig& config) {
  AdminConfig c = config;
  CLI::App* group =
      app.got_subcommand("db") ? app.get_subcommand("db") : app.get_subcommand("token");
  for (const char* a : {"create", "list", "rename", "delete", "revoke"}) {
    bool has = false;
    for (auto* sub : group->get_subcommands()) has = has || sub->get_name() == a;
    if (has) c.action = a;
  }
  auto dd = OpenDataDir(c.data_dir, storage::SqliteOptions{});
  if (!dd.ok()) return Fail(dd.status());
  return group->get_name() == "db" ? DbCommand(c, *dd) : TokenCommand(c, *dd);
}

}  // namespace kvc::cli
