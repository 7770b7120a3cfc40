#include "storage/catalog.h"

#include <algorithm>

namespace kvc::storage {

bool LooksLikeUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

bool TokenOpensDatabase(const AccessTokenRecord& token, const std::string& database_id) {
  if (token.all_databases) return true;
  return std::find(token.database_ids.begin(), token.database_ids.end(), database_id) !=
         token.database_ids.end();
}

bool RemoveDatabaseFromToken(AccessTokenRecord* token, const std::string& database_id,
                             int64_t now_ms) {
  if (token->all_databases) return false;
  std::vector<std::string>& ids = token->database_ids;
  auto it = std::find(ids.begin(), ids.end(), database_id);
  if (it == ids.end()) return false;
  if (ids.size() > 1) {
    ids.erase(it);
    return true;
  }
  if (token->revoked_ms != 0) return false;
  token->revoked_ms = now_ms;
  return true;
}

std::string EncodeTokenDatabases(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) {
    if (!out.empty()) out.push_back(',');
    out += id;
  }
  return out;
}

std::vector<std::string> DecodeTokenDatabases(std::string_view ids, std::string_view legacy_id,
                                              bool all_databases) {
  std::vector<std::string> out;
  if (all_databases) return out;
  if (ids.empty()) {
    if (!legacy_id.empty()) out.emplace_back(legacy_id);
    return out;
  }
  size_t i = 0;
  while (i <= ids.size()) {
    size_t j = ids.find(',', i);
    if (j == std::string_view::npos) j = ids.size();
    if (j > i) out.emplace_back(ids.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string LegacyTokenDatabaseId(const AccessTokenRecord& token) {
  if (token.all_databases || token.database_ids.empty()) return kNoDatabaseId;
  return token.database_ids.front();
}

bool IsValidDatabaseName(const std::string& name) {
  if (name.empty() || name.size() > 63 || LooksLikeUuid(name)) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '-' && c != '_'))) return false;
  }
  return true;
}

}  // namespace kvc::storage
