// The catalog in PostgreSQL (tables kvc_databases, kvc_access_tokens, kvc_catalog_meta; see
// pg_schema.h), shared by every node and by the `db` / `token` subcommands run against the same
// PostgreSQL: a token made through one node opens every node.
//
// Thread-safety: thread-safe (one connection behind a mutex; catalog calls are rare). A lost
// connection is re-made on the next call.
#pragma once

#include <memory>
#include <string>

#include "common/mutex.h"
#include "storage/catalog.h"
#include "storage/postgres/pg_conn.h"

namespace kvc::storage {

class PgCatalog : public Catalog {
 public:
  explicit PgCatalog(const std::string& conninfo);

  Result<std::vector<DatabaseRecord>> ListDatabases() override;
  Result<DatabaseRecord> FindDatabase(const std::string& name_or_id) override;
  Status AddDatabase(const DatabaseRecord& db) override;
  Status RenameDatabase(const std::string& id, const std::string& new_name) override;
  Status RemoveDatabase(const std::string& id, int64_t now_ms) override;
  Status RebindDatabase(const std::string& name, const std::string& new_id,
                        const std::string& location) override;
  Status AddToken(const AccessTokenRecord& token) override;
  Result<std::vector<AccessTokenRecord>> ListTokens() override;
  Result<AccessTokenRecord> FindToken(const std::string& id) override;
  Status RevokeToken(const std::string& id, int64_t now_ms) override;
  Result<int64_t> ChangeCounter() override;

 private:
  // Runs `body` in a transaction and bumps the change counter when it succeeds.
  template <typename F>
  Status WriteTxn(F&& body) KVC_REQUIRES(mu_);

  Mutex mu_;
  pg::Connection conn_ KVC_GUARDED_BY(mu_);
};

}  // namespace kvc::storage
