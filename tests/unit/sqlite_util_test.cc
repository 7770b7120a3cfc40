// storage/sqlite/sqlite_util: the one error mapping (IoError with the connection's prefix and
// SQLite's message), typed bind/column round trips, and statement reset/finalize on scope exit.
#include "storage/sqlite/sqlite_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace kvc::storage::sqlite {
namespace {

constexpr int kMemoryFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;

TEST(SqliteUtil, FailuresAreIoErrorsWithPrefixAndDetail) {
  Connection c("test: ");
  ASSERT_TRUE(c.Open(":memory:", kMemoryFlags, 1000, "pragma synchronous=full;").ok());

  Status exec = c.Exec("select * from no_such_table");
  EXPECT_EQ(exec.code(), StatusCode::kIoError);
  EXPECT_EQ(exec.message().rfind("test: exec: ", 0), 0u) << exec.message();
  EXPECT_NE(exec.message().find("no_such_table"), std::string::npos) << exec.message();

  Result<sqlite3_stmt*> persistent = c.Prepare("select x from no_such_table");
  EXPECT_EQ(persistent.status().code(), StatusCode::kIoError);
  EXPECT_NE(persistent.status().message().find("no_such_table"), std::string::npos);

  Result<Stmt> once = c.PrepareOnce("not sql at all");
  EXPECT_EQ(once.status().code(), StatusCode::kIoError);
  EXPECT_EQ(once.status().message().rfind("test: prepare: ", 0), 0u);
}

TEST(SqliteUtil, OpenFailureIsAnIoError) {
  Connection c("test: ");
  Status s = c.Open("/nonexistent-dir-for-kvc-test/x.sqlite3", SQLITE_OPEN_READWRITE, 1000, "");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message().rfind("test: open ", 0), 0u) << s.message();
}

TEST(SqliteUtil, TypedBindAndColumnRoundTrip) {
  Connection c("test: ");
  ASSERT_TRUE(c.Open(":memory:", kMemoryFlags, 1000, "").ok());
  ASSERT_TRUE(c.Exec("create table t (b blob, s text, i integer, d real)").ok());
  const std::string blob("a\0b\xff", 4);
  const std::string text = "h\xc3\xa9llo";
  {
    Result<Stmt> ins = c.PrepareOnce("insert into t values (?1, ?2, ?3, ?4)");
    ASSERT_TRUE(ins.ok());
    ins->BindBlob(1, blob).BindText(2, text).BindInt64(3, INT64_MIN).BindDouble(4, 2.5);
    EXPECT_EQ(ins->Step(), SQLITE_DONE);
  }
  Result<Stmt> sel = c.PrepareOnce("select b, s, i, d, null from t");
  ASSERT_TRUE(sel.ok());
  ASSERT_EQ(sel->Step(), SQLITE_ROW);
  EXPECT_EQ(sel->ColumnBlob(0), blob);
  EXPECT_EQ(sel->ColumnText(1), text);
  EXPECT_EQ(sel->ColumnInt64(2), INT64_MIN);
  EXPECT_EQ(sel->ColumnDouble(3), 2.5);
  EXPECT_EQ(sel->ColumnBlob(4), "");
  EXPECT_EQ(sel->ColumnText(4), "");
  EXPECT_EQ(sel->Step(), SQLITE_DONE);
}

TEST(SqliteUtil, BorrowedStatementIsResetAndUnboundOnScopeExit) {
  Connection c("test: ");
  ASSERT_TRUE(c.Open(":memory:", kMemoryFlags, 1000, "").ok());
  ASSERT_TRUE(c.Exec("create table t (k integer); insert into t values (1), (2);").ok());
  Result<sqlite3_stmt*> sel = c.Prepare("select k, ?1 from t order by k");
  ASSERT_TRUE(sel.ok());
  for (int round = 0; round < 2; ++round) {
    Stmt s(*sel);
    if (round == 0) s.BindInt64(1, 7);
    ASSERT_EQ(s.Step(), SQLITE_ROW);
    EXPECT_EQ(s.ColumnInt64(0), 1);  // starts over: the first scope reset it mid-result
    EXPECT_EQ(s.ColumnInt64(1), round == 0 ? 7 : 0);  // and cleared the binding
  }
  // A reset statement holds no read transaction open.
  EXPECT_EQ(sqlite3_stmt_busy(*sel), 0);
}

}  // namespace
}  // namespace kvc::storage::sqlite
