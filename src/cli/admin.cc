#include "cli/admin.h"

#include <cstdio>
#include <iostream>

#include "auth/tokens.h"
#include "cli/flags.h"
#include "codec/json_text.h"
#include "common/clock.h"
#include "service/admin/admin_api.h"
#include "service/admin/admin_ops.h"
#include "storage/storage.h"

namespace kvc::cli {
namespace {

using codec::JsonQuote;

std::string Time(int64_t ms) { return ms == 0 ? "" : FormatRfc3339Utc(ms); }

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A token's databases as `token list` and `token create` show them: "all", or the names joined
// by ',' ("(deleted)" for a database that is gone).
std::string DatabasesText(bool all_databases, const std::vector<std::string>& names) {
  if (all_databases) return "all";
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out.push_back(',');
    out += n.empty() ? "(deleted)" : n;
  }
  return out;
}

// A token's own rate limit as `token list` shows it.
std::string RateLimitText(double rate) {
  if (rate < 0) return "default";
  if (rate == 0) return "unlimited";
  return Number(rate);
}

}  // namespace

int PrintError(const Status& s) {
  std::string text = s.message();
  // A database that is not there (the server's or the catalog's words): say how to see the
  // ones that are.
  if (s.code() == StatusCode::kNotFound && text.starts_with("Database '") &&
      text.find("kvconnect db") == std::string::npos) {
    text += " `kvconnect db list` shows the databases.";
  }
  std::cerr << "error: " << text << "\n";
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

namespace {

int DbCommand(const AdminConfig& c, service::AdminOps& ops) {
  if (c.action == "create") {
    auto db = ops.CreateDatabase(c.name);
    if (!db.ok()) return PrintError(db.status());
    const storage::DatabaseRecord& rec = db->record;
    std::cout << rec.id << "\n";
    std::cerr << "Created database '" << rec.name << "' (" << rec.id << ") in " << db->location
              << ".\nConnect to /databases/" << rec.name
              << "/connect with a token from `kvconnect token create --db " << rec.name
              << " --scope write`.\n";
    return 0;
  }
  if (c.action == "list") {
    auto dbs = ops.ListDatabases();
    if (!dbs.ok()) return PrintError(dbs.status());
    if (c.json) {
      std::cout << "[";
      for (size_t i = 0; i < dbs->size(); ++i) {
        const auto& d = (*dbs)[i];
        std::cout << (i ? "," : "") << "\n  {\"name\":" << JsonQuote(d.record.name)
                  << ",\"id\":" << JsonQuote(d.record.id) << ",\"path\":" << JsonQuote(d.location)
                  << ",\"created_at\":" << JsonQuote(Time(d.record.created_ms)) << "}";
      }
      std::cout << (dbs->empty() ? "]\n" : "\n]\n");
      return 0;
    }
    std::printf("%-24s %-36s %s\n", "NAME", "ID", "FILE");
    for (const auto& d : *dbs) {
      std::printf("%-24s %-36s %s\n", d.record.name.c_str(), d.record.id.c_str(),
                  d.location.c_str());
    }
    return 0;
  }
  if (c.action == "rename") {
    auto renamed = ops.RenameDatabase(c.name, c.new_name);
    if (!renamed.ok()) return PrintError(renamed.status());
    std::cerr << "Renamed '" << renamed->old_name << "' to '" << renamed->record.name
              << "'; its id and tokens stay the same.\n";
    return 0;
  }
  // delete
  if (!c.yes) {
    auto rec = ops.CheckDeletable(c.name);
    if (!rec.ok()) return PrintError(rec.status());
    return PrintError(
        InvalidArgument("deleting '" + rec->name +
                        "' destroys its data and revokes its tokens (tokens of other databases too "
                        "keep those); add --yes to do it"));
  }
  auto rec = ops.DeleteDatabase(c.name);
  if (!rec.ok()) return PrintError(rec.status());
  std::cerr << "Deleted database '" << rec->name << "' (" << rec->id
            << ") and revoked its tokens (tokens that open other databases too keep those).\n";
  return 0;
}

int TokenCommand(const AdminConfig& c, service::AdminOps& ops) {
  if (c.action == "create") {
    auto t = ops.CreateToken({.databases = c.dbs,
                              .all_databases = c.all_databases,
                              .scope = c.scope,
                              .expires = c.expires,
                              .name = c.label,
                              .rate_limit = c.rate_limit});
    if (!t.ok()) return PrintError(t.status());
    std::cout << t->token << "\n";
    const std::string what =
        t->record.all_databases         ? std::string("every database, present and future")
        : t->database_names.size() == 1 ? "database '" + t->database_names[0] + "'"
                                        : "databases " + DatabasesText(false, t->database_names);
    std::cerr << "Created " << auth::ScopeName(t->scope) << " token " << t->record.id << " for "
              << what << (t->record.expires_ms ? ", expires " + Time(t->record.expires_ms) : "")
              << ". It is shown only this once.\n";
    return 0;
  }
  if (c.action == "list") {
    auto shown = ops.ListTokens(c.db);
    if (!shown.ok()) return PrintError(shown.status());
    if (c.json) {
      std::cout << "[";
      for (size_t i = 0; i < shown->size(); ++i) {
        std::cout << (i ? "," : "") << "\n  " << service::TokenJson((*shown)[i]);
      }
      std::cout << (shown->empty() ? "]\n" : "\n]\n");
      return 0;
    }
    std::printf("%-16s %-16s %-16s %-6s %-8s %-10s %-36s %s\n", "ID", "NAME", "DATABASE", "SCOPE",
                "STATUS", "RATE", "CREATED", "EXPIRES");
    const int64_t now = NowUnixMs();
    for (const service::TokenInfo& info : *shown) {
      const storage::AccessTokenRecord& t = info.record;
      const std::string db = DatabasesText(t.all_databases, info.database_names);
      std::printf("%-16s %-16s %-16s %-6s %-8s %-10s %-36s %s\n", t.id.c_str(), t.name.c_str(),
                  db.c_str(), auth::ScopeName(info.scope), service::TokenStatusName(info.status),
                  RateLimitText(t.rate_limit).c_str(), HumanTime(t.created_ms, now).c_str(),
                  HumanTime(t.expires_ms, now).c_str());
    }
    return 0;
  }
  // revoke: by id, or by the token itself.
  auto id = ops.RevokeToken(c.token);
  if (!id.ok()) return PrintError(id.status());
  std::cerr << "Revoked token " << *id
            << ". A running server refuses it and its data-path tokens within its catalog poll "
               "interval.\n";
  return 0;
}

}  // namespace

void AddAdminCommands(CLI::App& app, AdminConfig* c) {
  auto data_dir = [c](CLI::App* s) {
    AddStorageFlags(s, &c->storage, &c->data_dir, &c->postgres,
                    "Data directory (as for serve); must exist but for db create");
  };
  CLI::App* db = app.add_subcommand("db", "Manage databases (create, list, rename, delete)");
  db->require_subcommand(1);
  CLI::App* dc = db->add_subcommand("create", "Create a database; prints its id");
  dc->add_option("name", c->name, "Database name")->required();
  data_dir(dc);
  CLI::App* dl = db->add_subcommand("list", "List databases");
  AddJsonFlag(dl, &c->json);
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
  CLI::Option* one =
      tc->add_option("--db", c->dbs, "Database name or id; repeat it for a token of several")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* all = tc->add_flag("--all-databases", c->all_databases,
                                  "Every database, present and future (the token still cannot "
                                  "manage databases or tokens, whatever its scope)");
  one->excludes(all);  // neither: AdminOps::CreateToken says to give one
  tc->add_option("--scope", c->scope, "read | write | admin")
      ->required()
      ->check(CLI::IsMember({"read", "write", "admin", "queue"}));
  tc->add_option("--expires", c->expires, "Lifetime: 30d, 12h, 90m, 45s, 2w or never")
      ->capture_default_str();
  tc->add_option("--name", c->label, "A label to recognise the token by");
  tc->add_option("--rate-limit", c->rate_limit,
                 "Requests per second for this token, which also bounds its bursts (0: unlimited; "
                 "default: the server's)");
  data_dir(tc);
  CLI::App* tl = tok->add_subcommand("list", "List access tokens (never the secrets)");
  tl->add_option("--db", c->db,
                 "Only the tokens that open this database (tokens of several or all included)");
  AddJsonFlag(tl, &c->json);
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
  // Only `db create` (and serve) make a data directory: a mistyped --data-dir must not get a
  // fresh catalog whose tokens the running server has never heard of.
  const bool creates = group->get_name() == "db" && c.action == "create";
  auto storage = OpenStorageOf({c.storage, c.data_dir, c.postgres},
                               creates ? DataDirUse::kMayCreate : DataDirUse::kMustExist);
  if (!storage.ok()) return PrintError(storage.status());
  service::AdminOps ops(&(*storage)->catalog(), storage->get());
  return group->get_name() == "db" ? DbCommand(c, ops) : TokenCommand(c, ops);
}

}  // namespace kvc::cli
