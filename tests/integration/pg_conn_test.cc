// storage/postgres/pg_conn.h against a real PostgreSQL 15 (testutil/pg_server.h) when the server
// ends a session: a pinned connection (a transaction open) never carries on over a new session,
// where each statement would commit on its own; an idle connection the server ended (a restart,
// pg_terminate_backend) is noticed before use, so the first statement after it does not fail.
// Regressions found by tests/crash/postgres_test.mjs (fault kill-sessions), which lost money
// between accounts before the pin existed.
//
// Without postgresql-15 every test here fails, saying what to install.
#include "storage/postgres/pg_conn.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testutil/pg_server.h"
#include "testutil/wait.h"

namespace kvc::storage::pg {
namespace {

using testutil::PgServer;
using testutil::PgServerOptions;
using testutil::PgStopMode;

constexpr char kApp[] = "kvc_conn_test";
using Overrides = std::map<std::string, std::string>;

std::unique_ptr<PgServer> StartServer() {
  PgServerOptions o;
  o.fsync = false;
  auto server = PgServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

// Ends every session named kApp and waits until PostgreSQL has none left. (The backend sends
// its goodbye before it leaves pg_stat_activity; the end of the socket may come a moment later.)
void TerminateOurSessions(const PgServer& server) {
  const std::string where =
      std::string(" from pg_stat_activity where application_name = '") + kApp + "'";
  ASSERT_TRUE(server.Exec("select pg_terminate_backend(pid)" + where).ok());
  std::string left;
  EXPECT_TRUE(testutil::WaitFor([&] {
    auto n = server.QueryValue("select count(*)" + where);
    left = n.ok() ? *n : n.status().ToString();
    return left == "0";
  })) << "our sessions to end; still "
      << left;
}

// Polls c.CloseIfEndedByServer() until the connection is closed: true once the server's
// goodbye and the end of the socket reached it and it noticed.
bool NoticesEnd(Connection& c) {
  return testutil::WaitFor([&] {
    c.CloseIfEndedByServer();
    return !c.connected();
  });
}

std::string Count(const PgServer& server) {
  auto n = server.QueryValue("select count(*) from t");
  return n.ok() ? *n : n.status().ToString();
}

TEST(PgConnTest, APinnedConnectionIsNotRemadeInsideATransaction) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->Exec("create table t (k int)").ok());
  Connection c(server->conninfo(), {{"application_name", kApp}}, "postgres test");

  ASSERT_TRUE(c.Exec("begin").ok());
  c.set_pinned(true);
  ASSERT_TRUE(c.Exec("insert into t values (1)").ok());
  TerminateOurSessions(*server);

  // The session and its transaction are gone: every further statement of it fails, none runs
  // on a new session (there `insert 3` would commit alone and `commit` would succeed).
  EXPECT_FALSE(c.Exec("insert into t values (2)").ok());
  EXPECT_FALSE(c.Exec("insert into t values (3)").ok());
  const Status commit = c.Exec("commit");
  EXPECT_FALSE(commit.ok());
  EXPECT_NE(commit.message().find("lost inside a transaction"), std::string::npos)
      << commit.ToString();
  EXPECT_EQ(Count(*server), "0");

  // Once the transaction is given up, the connection is made again.
  c.set_pinned(false);
  ASSERT_TRUE(c.Exec("insert into t values (4)").ok());
  EXPECT_EQ(Count(*server), "1");
}

TEST(PgConnTest, AnIdleConnectionEndedByTheServerIsNoticedBeforeUse) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  Connection c(server->conninfo(), {{"application_name", kApp}}, "postgres test");
  c.Define("one", "select 1");
  ASSERT_TRUE(c.Run("one", Params()).ok());

  // A live idle connection is kept.
  c.CloseIfEndedByServer();
  EXPECT_TRUE(c.connected());

  // Ended by an administrator: noticed, and the next statement succeeds on a new session.
  TerminateOurSessions(*server);
  EXPECT_TRUE(c.connected()) << "libpq cannot know before reading the socket";
  EXPECT_TRUE(NoticesEnd(c)) << "the end of the terminated session";
  EXPECT_TRUE(c.Run("one", Params()).ok());

  // Ended by a crash of the server (immediate stop) and a restart.
  ASSERT_TRUE(server->Stop(PgStopMode::kImmediate).ok());
  ASSERT_TRUE(server->Restart().ok());
  EXPECT_TRUE(NoticesEnd(c)) << "the end of the session of the crashed server";
  auto r = c.Run("one", Params());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// Runs c->Pipeline(stmts) on a thread of its own and waits up to 20 s for it: nullopt when it
// did not return (the thread is left behind with its connection, and the test fails).
std::optional<Status> PipelineWithin(const std::shared_ptr<Connection>& c,
                                     std::vector<Statement> stmts) {
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> f = done->get_future();
  std::thread([c, stmts = std::move(stmts), done] {
    auto r = c->Pipeline(stmts);
    done->set_value(r.status());
  }).detach();
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) return std::nullopt;
  return f.get();
}

// The server goes while the session is idle and nothing looks at the socket before a pipeline
// is sent on it (the engine's writer between commits when the primary crashes, as in a
// failover): the pipeline fails with the server's reason, and the next one runs on a new
// session. Pipeline once waited for a sync that could never come, spinning without end.
TEST(PgConnTest, APipelineOnASessionTheServerEndedFailsInsteadOfWaitingForever) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto c = std::make_shared<Connection>(server->conninfo(), Overrides{{"application_name", kApp}},
                                        "postgres test");
  c->Define("one", "select 1");
  const std::vector<Statement> stmts = {{"one", Params()}, {"one", Params()}};
  ASSERT_TRUE(c->Pipeline(stmts).ok());

  for (const bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "an immediate stop" : "pg_terminate_backend");
    if (crash) {
      ASSERT_TRUE(server->Stop(PgStopMode::kImmediate).ok());
    } else {
      TerminateOurSessions(*server);
    }
    // The goodbye and the end of the socket reach us before the pipeline starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::optional<Status> broken = PipelineWithin(c, stmts);
    ASSERT_TRUE(broken.has_value()) << "Pipeline did not return";
    EXPECT_FALSE(broken->ok());
    EXPECT_FALSE(c->connected());
    if (crash) {
      ASSERT_TRUE(server->Restart().ok());
    }
    const std::optional<Status> again = PipelineWithin(c, stmts);
    ASSERT_TRUE(again.has_value()) << "Pipeline did not return";
    EXPECT_TRUE(again->ok()) << again->ToString();
  }
}

}  // namespace
}  // namespace kvc::storage::pg
