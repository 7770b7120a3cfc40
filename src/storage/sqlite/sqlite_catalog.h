// The catalog as a small SQLite file (`catalog.sqlite3` in the data directory), in WAL mode so
// the server and the `db` / `token` subcommands can use it at the same time.
//
// Thread-safety: thread-safe (one connection behind a mutex; catalog calls are rare).
#pragma once

#include <memory>
#include <string>

#include "common/mutex.h"
#include "storage/catalog.h"

namespace kvc::storage {

namespace sqlite {
class Connection;
}  // namespace sqlite

class SqliteCatalog : public Catalog {
 public:
  // Opens or creates the catalog file at `path`.
  // `vfs`: the SQLite VFS name (empty: the default).
  static Result<std::unique_ptr<SqliteCatalog>> Open(const std::string& path,
                                                     const std::string& vfs = "");
  ~SqliteCatalog() override;

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
  explicit SqliteCatalog(std::unique_ptr<sqlite::Connection> conn);
  // Runs `body` in a write transaction and bumps the change counter when it succeeds.
  template <typename F>
  Status WriteTxn(F&& body) KVC_REQUIRES(mu_);

  Mutex mu_;
  // FULLMUTEX, yet used under mu_ only: a transaction spans several calls.
  const std::unique_ptr<sqlite::Connection> conn_ KVC_PT_GUARDED_BY(mu_);
};

}  // namespace kvc::storage
