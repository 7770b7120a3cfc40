// Database and access-token management: the operations behind `kvconnect db ...` and
// `kvconnect token ...` (and the admin JSON API), as typed requests and Result<typed values>.
// They hold the rules (names, the database named "default", scopes, lifetimes, rate limits,
// token status) and never print; callers format the results.
//
// Error texts are what the CLI shows after "error: ", so they are exact and stable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "auth/tokens.h"
#include "common/clock.h"
#include "common/status.h"
#include "storage/catalog.h"
#include "storage/storage.h"

namespace kvc::service {

using storage::kDefaultDatabase;

// "30d", "12h", "90m", "45s", "2w" -> milliseconds; "never" or "" -> 0. -1 if malformed.
int64_t ParseDurationMs(const std::string& text);

// A database as listed: its catalog record and where its data lives.
struct DatabaseInfo {
  storage::DatabaseRecord record;
  std::string location;  // storage::DatabaseProvisioner::Location
};

struct RenamedDatabase {
  storage::DatabaseRecord record;  // after the rename
  std::string old_name;
};

// What `token create` asks for, as given by the operator; AdminOps parses and checks it.
struct TokenRequest {
  std::string database;           // name or id
  std::string scope;              // "read" | "write" | "admin"
  std::string expires = "never";  // lifetime, see ParseDurationMs
  std::string name;               // free-form label
  double rate_limit = -1;         // requests per second; < 0: the server's default; 0: unlimited
};

struct CreatedToken {
  std::string token;  // the whole access token; shown once, never stored
  storage::AccessTokenRecord record;
  auth::Scope scope = auth::Scope::kRead;
  std::string database_name;
};

enum class TokenStatus { kActive, kRevoked, kExpired };
// "active" | "revoked" | "expired".
const char* TokenStatusName(TokenStatus status);
// Revoked wins over expired; a token is expired from its expiry instant on.
TokenStatus StatusOfToken(const storage::AccessTokenRecord& token, int64_t now_ms);

// A token as listed (never its secret).
struct TokenInfo {
  storage::AccessTokenRecord record;
  auth::Scope scope = auth::Scope::kRead;
  std::string database_name;  // empty if its database has been deleted
  TokenStatus status = TokenStatus::kActive;
};

// Ownership: borrows the catalog, provisioner and clock, which must outlive it.
// Thread-safety: holds no state of its own; thread-safe if the catalog and provisioner are.
class AdminOps {
 public:
  AdminOps(storage::Catalog* catalog, storage::DatabaseProvisioner* provisioner,
           const Clock* clock = SystemClock())
      : catalog_(catalog), provisioner_(provisioner), clock_(clock) {}

  // Errors: InvalidArgument (bad name), AlreadyExists (name taken), the provisioner's or the
  // catalog's errors. Storage made for a database the catalog then refuses is destroyed.
  Result<DatabaseInfo> CreateDatabase(const std::string& name);
  // In catalog order.
  Result<std::vector<DatabaseInfo>> ListDatabases();
  // `name_or_id` keeps its id and tokens under `new_name`.
  // Errors: NotFound, InvalidArgument (the default database, or a bad new name), AlreadyExists.
  Result<RenamedDatabase> RenameDatabase(const std::string& name_or_id,
                                         const std::string& new_name);
  // The database DeleteDatabase(name_or_id) would delete, without deleting it (for a caller
  // that asks for confirmation first). Errors: NotFound, InvalidArgument (the default database).
  Result<storage::DatabaseRecord> CheckDeletable(const std::string& name_or_id);
  // Removes the database from the catalog, revoking its tokens, then destroys its storage;
  // returns what was deleted. Errors: those of CheckDeletable, the catalog's, and the
  // provisioner's (then the database is already gone from the catalog).
  Result<storage::DatabaseRecord> DeleteDatabase(const std::string& name_or_id);

  // Errors: NotFound (database), InvalidArgument (scope, lifetime, rate limit), the catalog's.
  Result<CreatedToken> CreateToken(const TokenRequest& request);
  // Every token, or only those of `database` (a name or id; empty: all). Errors: NotFound.
  Result<std::vector<TokenInfo>> ListTokens(const std::string& database);
  // Revokes a token given by its id or as the whole token; returns its id.
  // Errors: NotFound, AlreadyExists (already revoked).
  Result<std::string> RevokeToken(const std::string& id_or_token);

 private:
  storage::Catalog* const catalog_;
  storage::DatabaseProvisioner* const provisioner_;
  const Clock* const clock_;
};

}  // namespace kvc::service
