// The Catalog contract (storage/catalog.h), one typed test run against both catalogs: SQLite
// (storage/sqlite/sqlite_catalog.h, a file in a temporary directory) and PostgreSQL
// (storage/postgres/pg_catalog.h, a fresh database on the shared server, testutil/pg_shared.h).
// Each kind opens any number of connections to one catalog (another process or node, in real
// life) and reads a token row's older `database_id` column, which a kvconnect from before tokens
// of several databases reads. What only one catalog does (opening an older schema) stays in
// tests/unit/sqlite_catalog_test.cc and pg_catalog_test.cc.
//
// Without postgresql-15 the PostgreSQL half fails, saying what to install.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/catalog.h"
#include "storage/postgres/pg_conn.h"
#include "storage/sqlite/sqlite_catalog.h"
#include "storage/storage.h"
#include "testutil/catalog_records.h"
#include "testutil/pg_shared.h"
#include "testutil/temp_dir.h"

namespace kvc {
namespace {

class SqliteCatalogKind {
 public:
  Status SetUp() { return Status::Ok(); }
  // A new connection to the catalog.
  Result<std::shared_ptr<storage::Catalog>> Open() {
    auto c = storage::SqliteCatalog::Open(path_);
    if (!c.ok()) return c.status();
    return std::shared_ptr<storage::Catalog>(std::move(*c));
  }
  // The `database_id` column of token `id` ("?" if there is no such row).
  std::string LegacyDatabaseId(const std::string& id) {
    sqlite3* db = nullptr;
    std::string out = "?";
    if (sqlite3_open(path_.c_str(), &db) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, "select database_id from access_tokens where id = ?1", -1, &st,
                             nullptr) == SQLITE_OK &&
          sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      }
      sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return out;
  }

 private:
  testutil::TempDir dir_{"kvc-catalog-"};
  std::string path_ = (dir_.path() / "catalog.sqlite3").string();
};

class PgCatalogKind {
 public:
  ~PgCatalogKind() {
    if (!conninfo_.empty()) testutil::DropPgDatabase(conninfo_);
  }
  Status SetUp() {
    KVC_ASSIGN_OR_RETURN(conninfo_, testutil::FreshPgDatabase());
    return Status::Ok();
  }
  // A new connection: the catalog of a new Storage (as another node opens it).
  Result<std::shared_ptr<storage::Catalog>> Open() {
    storage::StorageOptions so;
    so.kind = "postgres";
    so.location = conninfo_;
    KVC_ASSIGN_OR_RETURN(std::unique_ptr<storage::Storage> st, storage::OpenStorage(so));
    std::shared_ptr<storage::Storage> shared = std::move(st);
    return std::shared_ptr<storage::Catalog>(shared, &shared->catalog());
  }
  std::string LegacyDatabaseId(const std::string& id) {
    storage::pg::Connection c(conninfo_, {}, "catalog contract test");
    if (!c.Connect().ok()) return "?";
    auto r = c.Query("select database_id::text from kvc_access_tokens where id = '" + id + "'", {});
    if (!r.ok() || r->rows() == 0) return "?";
    return r->Bytes(0, 0);
  }

 private:
  std::string conninfo_;
};

template <typename Kind>
class CatalogContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = kind_.SetUp();
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto c = kind_.Open();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
  }

  Kind kind_;
  std::shared_ptr<storage::Catalog> catalog_;  // the first connection
};

class KindNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, SqliteCatalogKind> ? "Sqlite" : "Postgres";
  }
};

using Kinds = ::testing::Types<SqliteCatalogKind, PgCatalogKind>;
TYPED_TEST_SUITE(CatalogContractTest, Kinds, KindNames);

using testutil::kDbA;
using testutil::kDbB;
using testutil::kDbC;
using testutil::TokenFor;

// Databases: unique names and ids, found by name or id (in any case), renamed; tokens: unique
// ids, every field kept, revoked once; every change bumps the counter, and another connection
// sees it all.
TYPED_TEST(CatalogContractTest, DatabasesAndTokensPersistAndBumpTheCounter) {
  storage::Catalog& cat = *this->catalog_;
  const size_t databases0 = cat.ListDatabases()->size();  // PostgreSQL's has "default"
  const size_t tokens0 = cat.ListTokens()->size();
  const int64_t g0 = *cat.ChangeCounter();
  ASSERT_TRUE(cat.AddDatabase({kDbB, "sales", "s.db", 5}).ok());
  EXPECT_GT(*cat.ChangeCounter(), g0);
  EXPECT_EQ(cat.AddDatabase({kDbB, "other", "o.db", 5}).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.AddDatabase({"1b6f3a8e-1111-4222-8333-444455556666", "sales", "o.db", 5}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.FindDatabase("sales")->location, "s.db");
  EXPECT_EQ(cat.FindDatabase("0B6F3A8E-1111-4222-8333-444455556666")->name, "sales");
  EXPECT_EQ(cat.FindDatabase("nope").status().code(), StatusCode::kNotFound);

  storage::AccessTokenRecord t = TokenFor("00112233445566aa", {kDbB});
  t.name = "ci";
  t.scope = 1;
  t.hash = std::string(64, 'f');
  t.created_ms = 7;
  t.expires_ms = 99;
  t.rate_limit = 12.5;
  ASSERT_TRUE(cat.AddToken(t).ok());
  EXPECT_EQ(cat.AddToken(t).code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(cat.RenameDatabase(kDbB, "sales2").ok());
  EXPECT_EQ(cat.RenameDatabase("nope", "x").code(), StatusCode::kNotFound);
  ASSERT_TRUE(cat.AddDatabase({kDbC, "hr", "h.db", 5}).ok());
  EXPECT_EQ(cat.RenameDatabase(kDbC, "sales2").code(), StatusCode::kAlreadyExists);

  // Another connection (another process, in real life) sees everything and the counter.
  auto c2 = this->kind_.Open();
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  auto tok = (*c2)->FindToken("00112233445566aa");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->name, "ci");
  EXPECT_EQ(tok->database_ids, std::vector<std::string>{kDbB});
  EXPECT_EQ(tok->scope, 1);
  EXPECT_EQ(tok->hash, std::string(64, 'f'));
  EXPECT_EQ(tok->created_ms, 7);
  EXPECT_EQ(tok->expires_ms, 99);
  EXPECT_DOUBLE_EQ(tok->rate_limit, 12.5);
  EXPECT_EQ(tok->revoked_ms, 0);
  EXPECT_EQ((*c2)->FindDatabase("sales2")->id, kDbB);
  const int64_t g1 = *(*c2)->ChangeCounter();
  ASSERT_TRUE((*c2)->RevokeToken("00112233445566aa", 1234).ok());
  EXPECT_GT(*cat.ChangeCounter(), g1);
  EXPECT_EQ(cat.FindToken("00112233445566aa")->revoked_ms, 1234);
  EXPECT_EQ(cat.RevokeToken("00112233445566aa", 1).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.RevokeToken("ffffffffffffffff", 1).code(), StatusCode::kNotFound);

  // Removing a database revokes its tokens in the same transaction.
  t.id = "00112233445566bb";
  t.database_ids = {kDbC};
  ASSERT_TRUE(cat.AddToken(t).ok());
  ASSERT_TRUE(cat.RemoveDatabase(kDbC, 777).ok());
  EXPECT_EQ(cat.RemoveDatabase(kDbC, 778).code(), StatusCode::kNotFound);
  EXPECT_EQ(cat.FindToken("00112233445566bb")->revoked_ms, 777);
  EXPECT_EQ(cat.FindDatabase("hr").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cat.ListDatabases()->size(), databases0 + 1);
  EXPECT_EQ(cat.ListTokens()->size(), tokens0 + 2);
}

// A token of several databases keeps them in order; removing one of its databases takes that
// one off its list (revoked only when it was the last); all-databases tokens stay as they are.
// The older `database_id` column holds the first database, or none that exists.
TYPED_TEST(CatalogContractTest, TokensOfSeveralOrAllDatabases) {
  storage::Catalog& cat = *this->catalog_;
  for (const char* id : {kDbA, kDbB, kDbC}) {
    ASSERT_TRUE(cat.AddDatabase({id, std::string("db") + id[1], "x.db", 5}).ok());
  }
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a1", {kDbB, kDbA})).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a2", {kDbB})).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a3", {}, /*all=*/true)).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a4", {kDbC, kDbB})).ok());
  EXPECT_EQ(cat.AddToken(TokenFor("00000000000000a4", {kDbC})).code(), StatusCode::kAlreadyExists);
  auto multi = cat.FindToken("00000000000000a1");
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ(multi->database_ids, (std::vector<std::string>{kDbB, kDbA}));
  EXPECT_FALSE(multi->all_databases);
  auto all = cat.FindToken("00000000000000a3");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all_databases);
  EXPECT_TRUE(all->database_ids.empty());
  EXPECT_TRUE(storage::TokenOpensDatabase(*all, "ffffffff-1111-4222-8333-444455556666"));
  EXPECT_TRUE(storage::TokenOpensDatabase(*multi, kDbA));
  EXPECT_FALSE(storage::TokenOpensDatabase(*multi, kDbC));
  // What a kvconnect from before these tokens reads: the first database, or none that exists.
  EXPECT_EQ(this->kind_.LegacyDatabaseId("00000000000000a1"), kDbB);
  EXPECT_EQ(this->kind_.LegacyDatabaseId("00000000000000a3"), storage::kNoDatabaseId);

  ASSERT_TRUE(cat.RemoveDatabase(kDbB, 900).ok());
  auto other = this->kind_.Open();  // as another process or node sees it
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto tokens = (*other)->ListTokens();
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  std::map<std::string, storage::AccessTokenRecord> by_id;
  for (auto& t : *tokens) by_id[t.id] = t;
  EXPECT_EQ(by_id["00000000000000a1"].database_ids, std::vector<std::string>{kDbA});
  EXPECT_EQ(by_id["00000000000000a1"].revoked_ms, 0) << "it still opens A";
  EXPECT_EQ(by_id["00000000000000a2"].database_ids, std::vector<std::string>{kDbB});
  EXPECT_EQ(by_id["00000000000000a2"].revoked_ms, 900) << "B was all it opened";
  EXPECT_TRUE(by_id["00000000000000a3"].all_databases);
  EXPECT_EQ(by_id["00000000000000a3"].revoked_ms, 0);
  EXPECT_EQ(by_id["00000000000000a4"].database_ids, std::vector<std::string>{kDbC});
  EXPECT_EQ(by_id["00000000000000a4"].revoked_ms, 0);
  EXPECT_EQ(this->kind_.LegacyDatabaseId("00000000000000a1"), kDbA);

  ASSERT_TRUE(cat.RemoveDatabase(kDbA, 950).ok());
  auto last = cat.FindToken("00000000000000a1");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->database_ids, std::vector<std::string>{kDbA});
  EXPECT_EQ(last->revoked_ms, 950);
  EXPECT_EQ(cat.FindToken("00000000000000a3")->revoked_ms, 0);
  EXPECT_EQ(cat.FindToken("00000000000000a2")->revoked_ms, 900) << "revoked once, not again";
}

}  // namespace
}  // namespace kvc
