#include "service/admin/admin_ops.h"

#include <cmath>
#include <map>

#include "common/enum_names.h"

namespace kvc::service {

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

namespace {
constexpr EnumName<TokenStatus> kTokenStatusNames[] = {
    {TokenStatus::kActive, "active"},
    {TokenStatus::kRevoked, "revoked"},
    {TokenStatus::kExpired, "expired"},
};
}  // namespace

const char* TokenStatusName(TokenStatus status) {
  return NameIn(kTokenStatusNames, status, "unknown");
}

TokenStatus StatusOfToken(const storage::AccessTokenRecord& token, int64_t now_ms) {
  if (token.revoked_ms != 0) return TokenStatus::kRevoked;
  if (token.expires_ms != 0 && now_ms >= token.expires_ms) return TokenStatus::kExpired;
  return TokenStatus::kActive;
}

Result<DatabaseInfo> AdminOps::CreateDatabase(const std::string& name) {
  if (!storage::IsValidDatabaseName(name)) {
    return InvalidArgument("invalid database name '" + name +
                           "': use 1-63 characters a-z, 0-9, '-' and '_', starting with a "
                           "letter or digit (and not shaped like a UUID)");
  }
  if (catalog_->FindDatabase(name).ok()) {
    return AlreadyExists("a database named '" + name + "' already exists");
  }
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, provisioner_->Create(name));
  rec.name = name;
  rec.created_ms = clock_->NowMs();
  Status s = catalog_->AddDatabase(rec);
  if (!s.ok()) {
    // Best effort: the catalog's error is the one to report.
    (void)provisioner_->Destroy(rec);
    return s;
  }
  std::string location = provisioner_->Location(rec);
  return DatabaseInfo{std::move(rec), std::move(location)};
}

Result<std::vector<DatabaseInfo>> AdminOps::ListDatabases() {
  KVC_ASSIGN_OR_RETURN(auto records, catalog_->ListDatabases());
  std::vector<DatabaseInfo> out;
  out.reserve(records.size());
  for (auto& rec : records) {
    std::string location = provisioner_->Location(rec);
    out.push_back(DatabaseInfo{std::move(rec), std::move(location)});
  }
  return out;
}

Result<RenamedDatabase> AdminOps::RenameDatabase(const std::string& name_or_id,
                                                 const std::string& new_name) {
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, catalog_->FindDatabase(name_or_id));
  if (rec.name == kDefaultDatabase) {
    return InvalidArgument("the database named default cannot be renamed");
  }
  if (!storage::IsValidDatabaseName(new_name)) {
    return InvalidArgument("invalid database name '" + new_name + "'");
  }
  KVC_RETURN_IF_ERROR(catalog_->RenameDatabase(rec.id, new_name));
  RenamedDatabase out;
  out.old_name = rec.name;
  out.record = std::move(rec);
  out.record.name = new_name;
  return out;
}

Result<storage::DatabaseRecord> AdminOps::CheckDeletable(const std::string& name_or_id) {
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, catalog_->FindDatabase(name_or_id));
  if (rec.name == kDefaultDatabase) {
    return InvalidArgument("the database named default cannot be deleted");
  }
  return rec;
}

Result<storage::DatabaseRecord> AdminOps::DeleteDatabase(const std::string& name_or_id) {
  KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord rec, CheckDeletable(name_or_id));
  KVC_RETURN_IF_ERROR(catalog_->RemoveDatabase(rec.id, clock_->NowMs()));
  KVC_RETURN_IF_ERROR(provisioner_->Destroy(rec));
  return rec;
}

Result<CreatedToken> AdminOps::CreateToken(const TokenRequest& request) {
  const int64_t now = clock_->NowMs();
  if (request.all_databases && !request.databases.empty()) {
    return InvalidArgument("name databases (--db) or all of them (--all-databases), not both");
  }
  if (!request.all_databases && request.databases.empty()) {
    return InvalidArgument(
        "name the database the token opens (--db NAME, repeatable) or --all-databases");
  }
  std::vector<storage::DatabaseRecord> dbs;
  for (const std::string& name : request.databases) {
    KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord db, catalog_->FindDatabase(name));
    bool seen = false;
    for (const auto& d : dbs) seen = seen || d.id == db.id;
    if (!seen) dbs.push_back(std::move(db));
  }
  KVC_ASSIGN_OR_RETURN(const auth::Scope scope, auth::ParseScope(request.scope));
  const int64_t ttl = ParseDurationMs(request.expires);
  if (ttl < 0 || ttl > INT64_MAX - now) {
    return InvalidArgument("invalid --expires '" + request.expires +
                           "': use e.g. 30d, 12h, 90m, 45s, 2w or never");
  }
  if (!std::isfinite(request.rate_limit)) {
    return InvalidArgument(
        "invalid --rate-limit: use a number of requests per second (0: unlimited)");
  }
  auth::NewAccessToken t = auth::GenerateAccessToken();
  CreatedToken out;
  out.token = std::move(t.token);
  out.scope = scope;
  storage::AccessTokenRecord& rec = out.record;
  for (storage::DatabaseRecord& db : dbs) {
    rec.database_ids.push_back(db.id);
    out.database_names.push_back(std::move(db.name));
  }
  rec.all_databases = request.all_databases;
  rec.id = std::move(t.id);
  rec.name = request.name;
  rec.scope = static_cast<int>(scope);
  rec.hash = std::move(t.hash);
  rec.created_ms = now;
  rec.expires_ms = ttl == 0 ? 0 : now + ttl;
  rec.rate_limit = request.rate_limit < 0 ? -1 : request.rate_limit;
  KVC_RETURN_IF_ERROR(catalog_->AddToken(rec));
  return out;
}

Result<std::vector<TokenInfo>> AdminOps::ListTokens(const std::string& database) {
  const int64_t now = clock_->NowMs();
  KVC_ASSIGN_OR_RETURN(auto dbs, catalog_->ListDatabases());
  std::map<std::string, std::string> names;
  for (const auto& d : dbs) names[d.id] = d.name;
  std::string filter_id;
  if (!database.empty()) {
    KVC_ASSIGN_OR_RETURN(storage::DatabaseRecord db, catalog_->FindDatabase(database));
    filter_id = db.id;
  }
  KVC_ASSIGN_OR_RETURN(auto tokens, catalog_->ListTokens());
  std::vector<TokenInfo> out;
  for (auto& t : tokens) {
    if (!filter_id.empty() && !storage::TokenOpensDatabase(t, filter_id)) continue;
    TokenInfo info;
    info.scope = static_cast<auth::Scope>(t.scope);
    for (const std::string& id : t.database_ids) {
      auto name = names.find(id);
      info.database_names.push_back(name != names.end() ? name->second : std::string());
    }
    info.status = StatusOfToken(t, now);
    info.record = std::move(t);
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::string> AdminOps::RevokeToken(const std::string& id_or_token) {
  std::string id = auth::AccessTokenId(id_or_token);
  if (id.empty()) id = id_or_token;
  KVC_RETURN_IF_ERROR(catalog_->RevokeToken(id, clock_->NowMs()));
  return id;
}

}  // namespace kvc::service
