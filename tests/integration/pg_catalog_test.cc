// What only the PostgreSQL catalog (storage/postgres/pg_catalog.h) does, against a real
// PostgreSQL 15 (testutil/pg_shared.h): a catalog of the schema before tokens of several
// databases (version 1) opens with its tokens intact. The Catalog contract both catalogs share
// (tokens of several or all databases, what removing a database does to them) is
// catalog_contract_test.cc.
//
// Without postgresql-15 every test here fails, saying what to install.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "storage/postgres/pg_conn.h"
#include "storage/storage.h"
#include "testutil/catalog_records.h"
#include "testutil/pg_shared.h"

namespace kvc {
namespace {

using testutil::kDbA;
using testutil::TokenFor;

std::unique_ptr<storage::Storage> Open(const std::string& conninfo) {
  storage::StorageOptions so;
  so.kind = "postgres";
  so.location = conninfo;
  auto st = storage::OpenStorage(so);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return st.ok() ? std::move(*st) : nullptr;
}

// One value of a query, as text ("?" when it fails or finds nothing).
std::string Value(const std::string& conninfo, const std::string& sql) {
  storage::pg::Connection c(conninfo, {}, "pg catalog test");
  if (!c.Connect().ok()) return "?";
  auto r = c.Query(sql, {});
  if (!r.ok() || r->rows() == 0) return "?";
  return r->Bytes(0, 0);
}

class PgCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = testutil::FreshPgDatabase();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conninfo_ = *c;
  }
  void TearDown() override { testutil::DropPgDatabase(conninfo_); }
  std::string conninfo_;
};

// A database at schema version 1 (made here from today's schema by dropping what version 2
// added, and a token row as a kvconnect of that age wrote it) opens: its token keeps its
// database, and new tokens of several databases can be added beside it.
TEST_F(PgCatalogTest, OldSchemaOpensAndItsTokensKeepWorking) {
  std::string default_id;
  {
    auto st = Open(conninfo_);
    ASSERT_TRUE(st);
    auto def = st->catalog().FindDatabase(storage::kDefaultDatabase);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    default_id = def->id;
  }
  {
    storage::pg::Connection c(conninfo_, {}, "pg catalog test");
    ASSERT_TRUE(c.Connect().ok());
    ASSERT_TRUE(c.Exec("alter table kvc_access_tokens drop column database_ids, "
                       "drop column all_databases; update kvc_schema_version set version = 1")
                    .ok());
    ASSERT_TRUE(c.Exec("insert into kvc_access_tokens (id, name, database_id, scope, hash, "
                       "created_ms, expires_ms, revoked_ms, rate_limit) values "
                       "('00000000000000b1', 'old', '" +
                       default_id + "', 1, 'abc', 4, 0, 0, 2.5)")
                    .ok());
  }
  auto st = Open(conninfo_);
  ASSERT_TRUE(st);
  EXPECT_EQ(Value(conninfo_, "select version::text from kvc_schema_version"), "2");
  auto old = st->catalog().FindToken("00000000000000b1");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->database_ids, std::vector<std::string>{default_id});
  EXPECT_FALSE(old->all_databases);
  EXPECT_EQ(old->scope, 1);
  EXPECT_DOUBLE_EQ(old->rate_limit, 2.5);
  ASSERT_TRUE(st->catalog().AddDatabase({kDbA, "sales", "pg", 5}).ok());
  ASSERT_TRUE(st->catalog().AddToken(TokenFor("00000000000000b2", {default_id, kDbA})).ok());
  EXPECT_EQ(st->catalog().FindToken("00000000000000b2")->database_ids,
            (std::vector<std::string>{default_id, kDbA}));
  // A row an older kvconnect adds to the migrated database (no database_ids) opens its one.
  {
    storage::pg::Connection c(conninfo_, {}, "pg catalog test");
    ASSERT_TRUE(c.Connect().ok());
    ASSERT_TRUE(c.Exec("insert into kvc_access_tokens (id, name, database_id, scope, hash, "
                       "created_ms) values ('00000000000000b3', 'older', '" +
                       std::string(kDbA) + "', 2, 'def', 5)")
                    .ok());
  }
  EXPECT_EQ(st->catalog().FindToken("00000000000000b3")->database_ids,
            std::vector<std::string>{kDbA});
  // Opening again applies nothing twice.
  auto again = Open(conninfo_);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->catalog().ListTokens()->size(), 3u);
}

}  // namespace
}  // namespace kvc
