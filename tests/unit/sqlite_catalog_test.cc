// What only the SQLite catalog (storage/sqlite/sqlite_catalog.h) does: opening the file of an
// older schema. The Catalog contract both catalogs share is
// tests/integration/catalog_contract_test.cc.
#include "storage/sqlite/sqlite_catalog.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <utility>
#include <vector>

#include "testutil/catalog_records.h"
#include "testutil/temp_dir.h"

namespace kvc {
namespace {

using testutil::TempDir;

using testutil::kDbA;
using testutil::kDbB;
using testutil::TokenFor;

// The catalog schema version 1 (before tokens of several databases), as an older kvconnect
// wrote it, with a database and a token.
constexpr const char* kSchemaV1 = R"sql(
  create table catalog_meta (k text primary key, v integer not null);
  insert into catalog_meta (k, v) values ('schema_version', 1), ('generation', 7);
  create table databases (id text primary key, name text not null unique, path text not null,
                          created_ms integer not null);
  create table access_tokens (id text primary key, name text not null,
    database_id text not null, scope integer not null, hash text not null,
    created_ms integer not null, expires_ms integer not null default 0,
    revoked_ms integer not null default 0, rate_limit real not null default -1);
  create index access_tokens_by_db on access_tokens (database_id);
  insert into databases values ('0a6f3a8e-1111-4222-8333-444455556666', 'sales', 's.db', 3);
  insert into access_tokens values ('00000000000000b1', 'old', '0a6f3a8e-1111-4222-8333-444455556666',
                                    1, 'abc', 4, 0, 0, 2.5);
)sql";

// Runs `sql` on the SQLite file at `path` (created if missing); returns SQLite's error text,
// empty on success.
std::string Exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    error = db ? sqlite3_errmsg(db) : "out of memory";
  }
  sqlite3_close(db);
  return error;
}

// The first column of the first row `sql` selects from the file at `path`, as text; "?" if none.
std::string Column(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  std::string out = "?";
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// The catalog of schema version 1 opens; its tokens keep their one database, and a kvconnect of
// that age reading the migrated file sees a token of several databases as one of its first
// database and an all-databases token as one of no database, never as the bootstrap token (an
// empty id).
TEST(SqliteCatalog, OldSchemaOpensAndItsTokensKeepWorking) {
  TempDir dir;
  const std::string path = (dir.path() / "catalog.sqlite3").string();
  ASSERT_EQ(Exec(path, kSchemaV1), "");
  auto c = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto old = (*c)->FindToken("00000000000000b1");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->database_ids, std::vector<std::string>{kDbA});
  EXPECT_FALSE(old->all_databases);
  EXPECT_EQ(old->scope, 1);
  EXPECT_DOUBLE_EQ(old->rate_limit, 2.5);
  EXPECT_GT(*(*c)->ChangeCounter(), 7);
  ASSERT_TRUE((*c)->AddToken(TokenFor("00000000000000b2", {kDbA, kDbB})).ok());
  ASSERT_TRUE((*c)->AddToken(TokenFor("00000000000000b3", {}, /*all=*/true)).ok());
  // Opening again (the migration is done once) changes nothing.
  c->reset();
  auto again = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->ListTokens()->size(), 3u);
  EXPECT_EQ((*again)->FindToken("00000000000000b2")->database_ids,
            (std::vector<std::string>{kDbA, kDbB}));
  again->reset();

  EXPECT_EQ(Column(path, "select v from catalog_meta where k = 'schema_version'"), "2");
  EXPECT_EQ(Column(path, "select database_id from access_tokens where id = '00000000000000b2'"),
            kDbA);
  EXPECT_EQ(Column(path, "select database_id from access_tokens where id = '00000000000000b3'"),
            storage::kNoDatabaseId);
  // A row an older kvconnect adds to the migrated file (no database_ids) opens its database.
  ASSERT_EQ(Exec(path,
                 "insert into access_tokens (id, name, database_id, scope, hash, created_ms) "
                 "values ('00000000000000b4', 'older', '0b6f3a8e-1111-4222-8333-444455556666', "
                 "2, 'def', 5)"),
            "");
  // A catalog of a later schema is refused rather than misread.
  ASSERT_EQ(Exec(path, "update catalog_meta set v = 3 where k = 'schema_version'"), "");
  auto newer = storage::SqliteCatalog::Open(path);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer kvconnect"), std::string::npos)
      << newer.status().ToString();
  ASSERT_EQ(Exec(path, "update catalog_meta set v = 2 where k = 'schema_version'"), "");
  auto back = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->FindToken("00000000000000b4")->database_ids, std::vector<std::string>{kDbB});
}

}  // namespace
}  // namespace kvc
