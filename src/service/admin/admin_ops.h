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
  std::vector<std::string> databases;  // names or ids; at least one, unless all_databases
  // Every database, present and future. Not the bootstrap token's powers: an admin token for
  // all databases is a database admin on each of them and cannot manage databases or tokens.
  bool all_databases = false;
  std::string scope;              // "read" | "write" | "admin" | "queue"
  std::string expires = "never";  // lifetime, see ParseDurationMs
  std::string name;               // free-form label
  double rate_limit = -1;         // requests per second; < 0: the server's default; 0: unlimited
};

struct CreatedToken {
  std::string token;  // the whole access token; shown once, never stored
  storage::AccessTokenRecord record;
  auth::Scope scope = auth::Scope::kRead;
  std::vector<std::string> database_names;  // one per record.database_ids
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
  // One per record.database_ids: the database's name, or empty if it has been deleted (only the
  // last database of a token stays on its list when deleted; the token is revoked then).
  std::vector<std::string> database_names;
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
  // Removes the database from the catalog, taking it off its tokens (revoking those that opened
  // only it: Catalog::RemoveDatabase), then destroys its storage;
  // returns what was deleted. Errors: those of CheckDeletable, the catalog's, and the
  // provisioner's (then the database is already gone from the catalog).
  Result<storage::DatabaseRecord> DeleteDatabase(const std::string& name_or_id);

  // A database named twice (e.g. by name and by id) is listed once.
  // Errors: NotFound (database), InvalidArgument (no database or both a list and
  // all_databases; scope, lifetime, rate limit), the catalog's.
  Result<CreatedToken> CreateToken(const TokenRequest& request);
  // Every token, or only those that open `database` (a name or id; empty: all), tokens of
  // several or all databases included. Errors: NotFound.
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
