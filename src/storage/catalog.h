// Catalog: which databases a server holds and which access tokens may reach them. It is part of
// a Storage (storage.h) and is shared by `kvconnect serve` and the `db` / `token` subcommands,
// which may run while the server does.
//
// Only a hash of each access token is stored; the token itself is shown once when created.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::storage {

// The database every server has; it cannot be renamed or deleted.
inline constexpr const char* kDefaultDatabase = "default";

struct DatabaseRecord {
  std::string id;    // UUID, the same as stored inside the database
  std::string name;  // unique; see IsValidDatabaseName
  // Where the database's data is. Opaque outside the Storage that made it (storage.h); for
  // SQLite, a file name relative to the data directory, or an absolute path.
  std::string location;
  int64_t created_ms = 0;
};

struct AccessTokenRecord {
  std::string id;    // public part of the token, unique
  std::string name;  // free-form label
  // The databases it opens, by id, in the order they were given (at least one), unless
  // `all_databases`: then every database, present and future, and the list is empty. Neither
  // makes it the bootstrap token: managing the server (databases, tokens, /metrics) needs that.
  std::vector<std::string> database_ids;
  bool all_databases = false;
  int scope = 0;     // auth::Scope as an integer
  std::string hash;  // hex SHA-256 of the whole token
  int64_t created_ms = 0;
  int64_t expires_ms = 0;  // 0: never
  int64_t revoked_ms = 0;  // 0: not revoked
  double rate_limit = -1;  // requests per second; < 0: the server's default; 0: unlimited
};

// Does `token` open the database with id `database_id` (revocation and expiry aside)?
bool TokenOpensDatabase(const AccessTokenRecord& token, const std::string& database_id);

// RemoveDatabase's rule for one token: a token that opens `database_id` among others stops
// opening it; one that opens only it is revoked at `now_ms` (if not already) and keeps it on
// its list, so a listing shows what it was for; an all-databases token is left alone. Returns
// whether `token` changed.
bool RemoveDatabaseFromToken(AccessTokenRecord* token, const std::string& database_id,
                             int64_t now_ms);

// How both catalogs store a token's databases (on disk: do not change). `database_ids` holds the
// ids joined by ','; the older `database_id` column, which a kvconnect from before multi-database
// tokens reads, holds the first id, or kNoDatabaseId for an all-databases token, so that such a
// kvconnect sees a token that opens at most its first database and never mistakes one for the
// bootstrap token (an empty id). A row whose `database_ids` is empty and that is not for all
// databases was written by such a kvconnect: its `database_id` is its one database.
inline constexpr const char* kNoDatabaseId = "00000000-0000-0000-0000-000000000000";
std::string EncodeTokenDatabases(const std::vector<std::string>& ids);
std::vector<std::string> DecodeTokenDatabases(std::string_view ids, std::string_view legacy_id,
                                              bool all_databases);
std::string LegacyTokenDatabaseId(const AccessTokenRecord& token);

// 1-63 characters of [a-z0-9_-], starting with a letter or digit, and not shaped like a UUID.
bool IsValidDatabaseName(const std::string& name);
bool LooksLikeUuid(const std::string& s);

class Catalog {
 public:
  virtual ~Catalog() = default;

  virtual Result<std::vector<DatabaseRecord>> ListDatabases() = 0;
  // By name or by id. NotFound if absent.
  virtual Result<DatabaseRecord> FindDatabase(const std::string& name_or_id) = 0;
  // AlreadyExists if the name or id is taken.
  virtual Status AddDatabase(const DatabaseRecord& db) = 0;
  virtual Status RenameDatabase(const std::string& id, const std::string& new_name) = 0;
  // Removes the database and, in the same transaction, applies RemoveDatabaseFromToken to every
  // token that opens it (revoking those that opened only it).
  virtual Status RemoveDatabase(const std::string& id, int64_t now_ms) = 0;
  // Points an existing database at other storage (serve --sqlite-path).
  virtual Status RebindDatabase(const std::string& name, const std::string& new_id,
                                const std::string& location) = 0;

  virtual Status AddToken(const AccessTokenRecord& token) = 0;
  virtual Result<std::vector<AccessTokenRecord>> ListTokens() = 0;
  virtual Result<AccessTokenRecord> FindToken(const std::string& id) = 0;
  // NotFound if absent; AlreadyExists if already revoked.
  virtual Status RevokeToken(const std::string& id, int64_t now_ms) = 0;

  // A number that changes whenever anyone (any process) commits a change to the catalog; cheap
  // enough to poll every second.
  virtual Result<int64_t> ChangeCounter() = 0;
};

}  // namespace kvc::storage
