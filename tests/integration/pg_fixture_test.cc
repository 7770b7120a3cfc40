// The PostgreSQL test fixture (testutil/pg_server.h) against the real PostgreSQL 15 server it
// starts: SQL over its Unix socket (and no TCP listener), committed rows surviving an immediate
// (crash-like) stop and a restart on the same socket, a synchronous standby that sees the
// primary's writes,
// its promotion to a new timeline, and the destructor leaving no process and no directory.
// Prints how long starting, making a standby and promoting took ("[pg timings] ...").
//
// Without postgresql-15 every test here fails, saying what to install.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "testutil/pg_server.h"

namespace kvc::testutil {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

long long MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

void PrintTiming(const std::string& what, long long ms) {
  std::cout << "[pg timings] " << what << ": " << ms << " ms" << std::endl;
  ::testing::Test::RecordProperty("pg_" + what + "_ms", std::to_string(ms));
}

// The first value `sql` returns through a libpq connection of our own, or the error.
std::string QueryThrough(const std::string& conninfo, const std::string& sql) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string out;
  if (PQstatus(conn) != CONNECTION_OK) {
    out = std::string("<cannot connect: ") + PQerrorMessage(conn) + ">";
  } else {
    PGresult* res = PQexec(conn, sql.c_str());
    out = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0
              ? PQgetvalue(res, 0, 0)
              : std::string("<error: ") + PQresultErrorMessage(res) + ">";
    PQclear(res);
  }
  PQfinish(conn);
  return out;
}

std::string Value(const Result<std::string>& result) {
  return result.ok() ? *result : "<error: " + result.status().ToString() + ">";
}

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

TEST(PgFixtureTest, RunsSqlAndKeepsCommittedRowsAcrossImmediateStop) {
  const auto start = Clock::now();
  auto server = PgServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  PrintTiming("start", MsSince(start));
  PgServer& pg = **server;
  EXPECT_EQ(pg.conninfo(), "host='" + pg.socket_dir() + "' port=" + std::to_string(pg.port()) +
                               " user=kvc dbname='kvc'");
  EXPECT_TRUE(fs::exists(pg.socket_dir() + "/.s.PGSQL." + std::to_string(pg.port())));
  EXPECT_TRUE(fs::exists(pg.data_dir() + "/PG_VERSION"));

  // Our own connections, over the Unix socket; no TCP listener (no port to race for).
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SELECT current_database() || ' ' || current_user"),
            "kvc kvc");
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SHOW server_version_num").substr(0, 2), "15");
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SELECT inet_server_port()"), "");
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SHOW listen_addresses"), "");
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SHOW wal_level"), "replica");
  EXPECT_EQ(QueryThrough(pg.conninfo(), "SHOW fsync"), "on");

  ASSERT_TRUE(pg.Exec("CREATE TABLE t (k int PRIMARY KEY, v text)").ok());
  ASSERT_TRUE(pg.Exec("INSERT INTO t VALUES (1, 'one'), (2, 'two')").ok());
  auto rows = pg.Query("SELECT k, v FROM t ORDER BY k");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1], (std::vector<std::string>{"2", "two"}));
  const Status bad = pg.Exec("SELECT * FROM no_such_table");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("no_such_table"), std::string::npos) << bad.ToString();

  // An immediate stop is a crash for the data directory; committed rows survive it.
  const std::string conninfo = pg.conninfo();
  ASSERT_TRUE(pg.Exec("INSERT INTO t VALUES (3, 'three')").ok());
  ASSERT_TRUE(pg.Stop(PgStopMode::kImmediate).ok());
  EXPECT_FALSE(pg.running());
  EXPECT_EQ(pg.Exec("SELECT 1").code(), StatusCode::kUnavailable);
  const auto restart = Clock::now();
  ASSERT_TRUE(pg.Restart().ok());
  PrintTiming("restart_after_immediate_stop", MsSince(restart));
  EXPECT_EQ(pg.conninfo(), conninfo);
  EXPECT_EQ(Value(pg.QueryValue("SELECT string_agg(v, ',' ORDER BY k) FROM t")), "one,two,three");
  EXPECT_NE(pg.Log().find("was interrupted"), std::string::npos)
      << "no crash recovery in the log:\n"
      << pg.Log();

  // A fast stop and a restart from a running server.
  ASSERT_TRUE(pg.Restart().ok());
  EXPECT_EQ(Value(pg.QueryValue("SELECT count(*) FROM t")), "3");
}

TEST(PgFixtureTest, SynchronousStandbyFollowsAndIsPromotedToANewTimeline) {
  auto primary_or = PgServer::Start();
  ASSERT_TRUE(primary_or.ok()) << primary_or.status().ToString();
  PgServer& primary = **primary_or;
  ASSERT_TRUE(primary.Exec("CREATE TABLE t (k int PRIMARY KEY, v text)").ok());
  ASSERT_TRUE(primary.Exec("INSERT INTO t VALUES (1, 'before the standby')").ok());

  const auto standby_start = Clock::now();
  auto standby_or = primary.StartStandby(/*synchronous=*/true);
  ASSERT_TRUE(standby_or.ok()) << standby_or.status().ToString();
  PrintTiming("start_sync_standby", MsSince(standby_start));
  PgServer& standby = **standby_or;
  EXPECT_NE(standby.socket_dir(), primary.socket_dir());
  EXPECT_NE(standby.data_dir(), primary.data_dir());
  EXPECT_EQ(Value(primary.QueryValue("SELECT application_name || ' ' || sync_state FROM "
                                     "pg_stat_replication")),
            standby.application_name() + " sync");
  EXPECT_EQ(Value(standby.QueryValue("SELECT pg_is_in_recovery()")), "t");
  EXPECT_EQ(Value(standby.QueryValue("SELECT v FROM t WHERE k = 1")), "before the standby");

  // A synchronous commit returns once the standby has the WAL; replaying it may lag a bit.
  ASSERT_TRUE(primary.Exec("INSERT INTO t VALUES (2, 'on the primary')").ok());
  ASSERT_TRUE(standby.WaitForReplay(primary).ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT v FROM t WHERE k = 2")), "on the primary");
  EXPECT_EQ(QueryThrough(standby.conninfo(), "SELECT count(*) FROM t"), "2");
  auto lag = standby.ReplayLagBytes(primary);
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(*lag, 0);
  const Status read_only = standby.Exec("INSERT INTO t VALUES (3, 'on the standby')");
  EXPECT_NE(read_only.message().find("read-only"), std::string::npos) << read_only.ToString();

  ASSERT_TRUE(primary.Exec("CHECKPOINT").ok());
  EXPECT_EQ(Value(primary.QueryValue("SELECT timeline_id FROM pg_control_checkpoint()")), "1");
  EXPECT_EQ(primary.Promote().code(), StatusCode::kInvalidArgument);

  // Failover: the primary is gone, the standby takes over on timeline 2.
  ASSERT_TRUE(primary.Stop(PgStopMode::kImmediate).ok());
  const auto promote = Clock::now();
  ASSERT_TRUE(standby.Promote().ok());
  PrintTiming("promote", MsSince(promote));
  EXPECT_EQ(Value(standby.QueryValue("SELECT pg_is_in_recovery()")), "f");
  ASSERT_TRUE(standby.Exec("CHECKPOINT").ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT timeline_id FROM pg_control_checkpoint()")), "2");
  EXPECT_EQ(Value(standby.QueryValue("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)")),
            "00000002");
  ASSERT_TRUE(standby.Exec("INSERT INTO t VALUES (3, 'on the promoted standby')").ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT string_agg(v, ',' ORDER BY k) FROM t")),
            "before the standby,on the primary,on the promoted standby");

  // The promoted server restarts as a primary.
  ASSERT_TRUE(standby.Restart().ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT pg_is_in_recovery()")), "f");
  EXPECT_EQ(Value(standby.QueryValue("SELECT count(*) FROM t")), "3");
}

TEST(PgFixtureTest, AsynchronousStandbyWithoutFsync) {
  PgServerOptions options;
  options.fsync = false;
  options.database = "other db";
  options.settings = {"work_mem=8MB"};
  const auto start = Clock::now();
  auto primary_or = PgServer::Start(options);
  ASSERT_TRUE(primary_or.ok()) << primary_or.status().ToString();
  PrintTiming("start_fsync_off", MsSince(start));
  PgServer& primary = **primary_or;
  EXPECT_EQ(Value(primary.QueryValue("SELECT current_database()")), "other db");
  EXPECT_EQ(Value(primary.QueryValue("SHOW fsync")), "off");
  EXPECT_EQ(Value(primary.QueryValue("SHOW work_mem")), "8MB");

  const auto standby_start = Clock::now();
  auto standby_or = primary.StartStandby(/*synchronous=*/false);
  ASSERT_TRUE(standby_or.ok()) << standby_or.status().ToString();
  PrintTiming("start_async_standby", MsSince(standby_start));
  PgServer& standby = **standby_or;
  EXPECT_EQ(Value(primary.QueryValue("SELECT sync_state FROM pg_stat_replication")), "async");
  ASSERT_TRUE(
      primary.Exec("CREATE TABLE t AS SELECT g AS k FROM generate_series(1, 10000) g").ok());
  ASSERT_TRUE(standby.WaitForReplay(primary).ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT sum(k) FROM t")), "50005000");

  // A stopped standby catches up after a restart.
  ASSERT_TRUE(standby.Stop().ok());
  ASSERT_TRUE(primary.Exec("INSERT INTO t VALUES (0)").ok());
  ASSERT_TRUE(standby.Restart().ok());
  ASSERT_TRUE(standby.WaitForReplay(primary).ok());
  EXPECT_EQ(Value(standby.QueryValue("SELECT count(*) FROM t")), "10001");
}

TEST(PgFixtureTest, DestructorStopsTheServerAndRemovesItsDirectory) {
  auto server = PgServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const pid_t pid = (*server)->pid();
  const std::string dir = (*server)->socket_dir();
  ASSERT_TRUE(ProcessExists(pid));
  ASSERT_TRUE(fs::exists(dir));
  const auto stop = Clock::now();
  server = Status(StatusCode::kInternal, "replaced");
  PrintTiming("destroy", MsSince(stop));
  EXPECT_FALSE(ProcessExists(pid));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(PgFixtureTest, MissingBinariesFailWithAHint) {
  ::setenv("KVC_PG_BINDIR", "/nonexistent/postgresql/bin", 1);
  auto server = PgServer::Start();
  ::unsetenv("KVC_PG_BINDIR");
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kNotFound);
  EXPECT_NE(server.status().message().find("postgresql-15"), std::string::npos)
      << server.status().ToString();
}

}  // namespace
}  // namespace kvc::testutil
