#include "testutil/pg_server.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace kvc::testutil {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

#ifndef KVC_PG_BINDIR
#define KVC_PG_BINDIR "/usr/lib/postgresql/15/bin"
#endif

constexpr char kDirPrefix[] = "kvc-pg-";
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr size_t kLogTailLines = 40;

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

std::string BinDir() {
  const char* env = std::getenv("KVC_PG_BINDIR");
  return env != nullptr && *env != '\0' ? env : KVC_PG_BINDIR;
}

// Who runs the PostgreSQL programs: the postgres system user when we are root (initdb and
// postgres refuse root), else ourselves.
struct RunAs {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<RunAs> PgUser() {
  RunAs run_as;
  if (::geteuid() != 0) return run_as;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) {
    return NotFound(
        "running as root, PostgreSQL needs the `postgres` system user (the postgresql-15 "
        "package makes it), which does not exist");
  }
  run_as.switch_user = true;
  run_as.uid = pw->pw_uid;
  run_as.gid = pw->pw_gid;
  return run_as;
}

bool Alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

pid_t ReadPid(const fs::path& file) {
  std::ifstream in(file);
  long pid = 0;
  in >> pid;
  return in ? static_cast<pid_t>(pid) : 0;
}

// Removes the directories of fixtures whose test process died without cleaning up (the
// parent-death signal has stopped their servers); never one whose postmaster still runs.
void RemoveStaleDirs() {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kDirPrefix, 0) != 0) continue;
    const pid_t owner = ReadPid(entry.path() / "owner");
    if (owner <= 0 || Alive(owner)) continue;
    const pid_t postmaster = ReadPid(entry.path() / "data" / "postmaster.pid");
    if (postmaster > 0 && Alive(postmaster)) continue;
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

// Our environment without PG* variables (which would redirect the programs) and with C
// messages (the log is searched for English text).
std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.rfind("PG", 0) == 0 || entry.rfind("LC_ALL=", 0) == 0) continue;
    env.emplace_back(entry);
  }
  env.emplace_back("LC_ALL=C");
  return env;
}

// Starts `program` from the PostgreSQL binary directory under setpriv: as the postgres user
// when `run_as` says so, with `death_signal` sent to it when this thread ends. Its stdout and
// stderr are appended to `log_path`; its working directory is `cwd`.
Result<pid_t> Spawn(const RunAs& run_as, const char* death_signal, const std::string& program,
                    const std::vector<std::string>& args, const std::string& cwd,
                    const std::string& log_path) {
  std::vector<std::string> argv = {"setpriv"};
  if (run_as.switch_user) {
    argv.insert(argv.end(), {"--reuid=postgres", "--regid=postgres", "--init-groups"});
  }
  argv.insert(argv.end(), {"--pdeathsig", death_signal, "--", BinDir() + "/" + program});
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> argp;
  for (std::string& arg : argv) argp.push_back(arg.data());
  argp.push_back(nullptr);
  std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Errno("open " + log_path);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    return Errno("open /dev/null");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, null_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  // The postgres user may not enter our working directory.
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "setpriv", &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  ::close(null_fd);
  if (rc != 0) {
    return NotFound(std::string("cannot run setpriv (util-linux): ") + std::strerror(rc));
  }
  return pid;
}

// Waits for `pid` to exit until `deadline`; true with its wait status if it did.
bool WaitExit(pid_t pid, Clock::time_point deadline, int* status) {
  for (;;) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// An immediate shutdown (the postmaster stops its children first), SIGKILL if it hangs.
void Terminate(pid_t pid, std::chrono::seconds timeout) {
  ::kill(pid, SIGQUIT);
  int status = 0;
  if (!WaitExit(pid, Clock::now() + timeout, &status)) KillAndReap(pid);
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last lines of the file at `path`.
std::string Tail(const std::string& path) {
  const std::string log = ReadText(path);
  size_t start = log.size();
  for (size_t lines = 0; start > 0 && lines <= kLogTailLines; --start) {
    if (log[start - 1] == '\n') ++lines;
  }
  return log.substr(start);
}

// A SQL string literal.
std::string Literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// A conninfo value.
std::string ConnValue(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// Runs a PostgreSQL program (initdb, pg_basebackup) to completion, its output appended to
// `log_path`. Errors: Unavailable (it failed or did not finish within `timeout`: the message
// ends with the log's last lines), NotFound (setpriv missing), IoError.
Status RunTool(const RunAs& run_as, const std::string& program,
               const std::vector<std::string>& args, const std::string& cwd,
               const std::string& log_path, std::chrono::seconds timeout) {
  KVC_ASSIGN_OR_RETURN(const pid_t pid, Spawn(run_as, "KILL", program, args, cwd, log_path));
  int status = 0;
  if (!WaitExit(pid, Clock::now() + timeout, &status)) {
    KillAndReap(pid);
    return Unavailable(program + " did not finish within " + std::to_string(timeout.count()) +
                       " s; its log:\n" + Tail(log_path));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable(program + " failed (" + DescribeExit(status) + "); its log:\n" +
                       Tail(log_path));
  }
  return Status::Ok();
}

// Makes a server's temporary directory (owned by the user that runs PostgreSQL) and its paths.
Status MakeDir(const RunAs& run_as, std::string* dir, std::string* data_dir,
               std::string* log_path) {
  RemoveStaleDirs();
  std::string dir_template =
      (fs::temp_directory_path() / (std::string(kDirPrefix) + "XXXXXX")).string();
  if (::mkdtemp(dir_template.data()) == nullptr) return Errno("mkdtemp");
  *dir = dir_template;
  // The server's socket goes into this directory; its path must fit a sockaddr_un.
  if ((*dir + "/.s.PGSQL.5432").size() >= sizeof(sockaddr_un{}.sun_path)) {
    return InvalidArgument("the temporary directory " + *dir +
                           " is too long for a Unix socket path: set TMPDIR to a shorter one");
  }
  *data_dir = *dir + "/data";
  *log_path = *dir + "/postgres.log";
  {
    std::ofstream owner(*dir + "/owner");
    owner << ::getpid() << "\n";
    if (!owner) return IoError("cannot write " + *dir + "/owner");
  }
  if (run_as.switch_user && ::chown(dir->c_str(), run_as.uid, run_as.gid) != 0) {
    return Errno("chown " + *dir);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PgServer>> PgServer::Start(PgServerOptions options) {
  const std::string initdb = BinDir() + "/initdb";
  if (::access(initdb.c_str(), X_OK) != 0 ||
      ::access((BinDir() + "/postgres").c_str(), X_OK) != 0) {
    return NotFound("PostgreSQL 15 is not installed in " + BinDir() +
                    " (Debian: apt-get install postgresql-15; or set KVC_PG_BINDIR)");
  }
  KVC_ASSIGN_OR_RETURN(const RunAs run_as, PgUser());
  std::unique_ptr<PgServer> server(new PgServer(std::move(options)));
  KVC_RETURN_IF_ERROR(MakeDir(run_as, &server->dir_, &server->data_dir_, &server->log_path_));

  std::vector<std::string> args = {
      "-D",        server->data_dir_,  "-A", "trust", "-U", kUser, "-E", "UTF8", "--locale=C",
      "--no-sync", "--no-instructions"};
  KVC_RETURN_IF_ERROR(
      RunTool(run_as, "initdb", args, server->dir_, server->log_path_, server->options_.timeout));
  KVC_RETURN_IF_ERROR(server->Launch());
  std::string name;
  for (char c : server->options_.database) {
    name += c;
    if (c == '"') name += '"';
  }
  auto created = server->RunSql("postgres", "CREATE DATABASE \"" + name + "\"");
  if (!created.ok()) return created.status();
  return server;
}

PgServer::~PgServer() {
  if (pid_ > 0) Terminate(pid_, options_.timeout);
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string PgServer::conninfo_for(const std::string& dbname) const {
  return "host=" + ConnValue(dir_) + " port=" + std::to_string(kPort) + " user=" + kUser +
         " dbname=" + ConnValue(dbname);
}

std::string PgServer::conninfo() const { return conninfo_for(options_.database); }

std::string PgServer::Log() const { return ReadText(log_path_); }

std::string PgServer::LogTail() const { return Tail(log_path_); }

Status PgServer::Launch() {
  KVC_ASSIGN_OR_RETURN(const RunAs run_as, PgUser());
  // -k: the socket goes into the server's own directory; no TCP listener at all.
  std::vector<std::string> args = {"-D", data_dir_, "-p", std::to_string(kPort), "-k", dir_};
  for (const std::string& setting : {
           std::string("listen_addresses="),
           std::string("fsync=") + (options_.fsync ? "on" : "off"),
           std::string("shared_buffers=") + options_.shared_buffers,
           std::string("wal_level=replica"),
           std::string("max_wal_senders=10"),
           std::string("max_replication_slots=10"),
           std::string("hot_standby=on"),
           // A standby that was stopped for a while can still catch up by streaming.
           std::string("wal_keep_size=128MB"),
           std::string("max_connections=50"),
       }) {
    args.insert(args.end(), {"-c", setting});
  }
  for (const std::string& setting : options_.settings) args.insert(args.end(), {"-c", setting});
  // SIGQUIT is an immediate shutdown: the postmaster stops its children, then itself.
  KVC_ASSIGN_OR_RETURN(pid_, Spawn(run_as, "QUIT", "postgres", args, dir_, log_path_));
  Status ready = WaitReady(Clock::now() + options_.timeout);
  if (!ready.ok() && pid_ > 0) {
    Terminate(pid_, options_.timeout);
    pid_ = -1;
  }
  return ready;
}

Status PgServer::WaitReady(Clock::time_point deadline) {
  const std::string ping = conninfo_for("postgres") + " connect_timeout=2";
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Unavailable("postgres exited at start (" + DescribeExit(status) + "); its log:\n" +
                         LogTail());
    }
    if (PQping(ping.c_str()) == PQPING_OK) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Unavailable("postgres did not accept connections on its socket in " + dir_ +
                         " within " + std::to_string(options_.timeout.count()) + " s; its log:\n" +
                         LogTail());
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status PgServer::Stop(PgStopMode mode) {
  if (pid_ <= 0) return Status::Ok();
  ::kill(pid_, mode == PgStopMode::kFast ? SIGINT : SIGQUIT);
  int status = 0;
  if (WaitExit(pid_, Clock::now() + options_.timeout, &status)) {
    pid_ = -1;
    return Status::Ok();
  }
  KillAndReap(pid_);
  pid_ = -1;
  return Unavailable("postgres did not stop within " + std::to_string(options_.timeout.count()) +
                     " s and was killed; its log:\n" + LogTail());
}

Status PgServer::Restart() {
  KVC_RETURN_IF_ERROR(Stop(PgStopMode::kFast));
  return Launch();
}

Result<std::vector<std::vector<std::string>>> PgServer::RunSql(const std::string& dbname,
                                                               const std::string& sql) const {
  if (pid_ <= 0) return Unavailable("the PostgreSQL server is stopped");
  const std::string info = conninfo_for(dbname) + " connect_timeout=10";
  PGconn* conn = PQconnectdb(info.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    Status error = Unavailable("cannot connect (" + info + "): " + PQerrorMessage(conn));
    PQfinish(conn);
    return error;
  }
  PGresult* res = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(res);
  std::vector<std::vector<std::string>> rows;
  Status error;
  if (status == PGRES_TUPLES_OK) {
    for (int r = 0; r < PQntuples(res); ++r) {
      std::vector<std::string>& row = rows.emplace_back();
      for (int c = 0; c < PQnfields(res); ++c) row.emplace_back(PQgetvalue(res, r, c));
    }
  } else if (status != PGRES_COMMAND_OK) {
    error = InvalidArgument(sql + ": " + PQresultErrorMessage(res));
    if (PQstatus(conn) != CONNECTION_OK) error = Unavailable(error.message());
  }
  PQclear(res);
  PQfinish(conn);
  if (!error.ok()) return error;
  return rows;
}

Status PgServer::Exec(const std::string& sql) const {
  auto rows = RunSql(options_.database, sql);
  return rows.ok() ? Status::Ok() : rows.status();
}

Result<std::vector<std::vector<std::string>>> PgServer::Query(const std::string& sql) const {
  return RunSql(options_.database, sql);
}

Result<std::string> PgServer::QueryValue(const std::string& sql) const {
  KVC_ASSIGN_OR_RETURN(auto rows, RunSql(options_.database, sql));
  if (rows.empty() || rows[0].empty()) return NotFound("no row: " + sql);
  return std::move(rows[0][0]);
}

Result<std::unique_ptr<PgServer>> PgServer::StartStandby(bool synchronous) {
  if (!running()) return Unavailable("the primary is stopped");
  KVC_ASSIGN_OR_RETURN(const RunAs run_as, PgUser());
  static std::atomic<int> counter{0};
  std::unique_ptr<PgServer> standby(new PgServer(options_));
  standby->application_name_ =
      "kvc_standby_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
  KVC_RETURN_IF_ERROR(MakeDir(run_as, &standby->dir_, &standby->data_dir_, &standby->log_path_));

  // -c fast: do not wait for a spread checkpoint. -R: standby.signal and primary_conninfo.
  // --no-sync: the copy is not flushed to disk as a whole (that alone took seconds); the
  // standby itself runs with the primary's fsync setting.
  std::vector<std::string> args = {"-D",   standby->data_dir_,
                                   "-h",   dir_,
                                   "-p",   std::to_string(kPort),
                                   "-U",   kUser,
                                   "-X",   "stream",
                                   "-R",   "-c",
                                   "fast", "--no-sync"};
  KVC_RETURN_IF_ERROR(
      RunTool(run_as, "pg_basebackup", args, standby->dir_, standby->log_path_, options_.timeout));
  // Later lines win. Our own primary_conninfo names the standby; the copied
  // synchronous_standby_names (an earlier synchronous standby of the primary) is cleared so
  // that a promoted standby does not wait for a standby it does not have.
  {
    const std::string auto_conf = standby->data_dir_ + "/postgresql.auto.conf";
    std::ofstream conf(auto_conf, std::ios::app);
    conf << "primary_conninfo = "
         << Literal("host=" + ConnValue(dir_) + " port=" + std::to_string(kPort) +
                    " user=" + kUser + " application_name=" + standby->application_name_)
         << "\nsynchronous_standby_names = ''\n";
    if (!conf) return IoError("cannot append to " + auto_conf);
  }
  KVC_RETURN_IF_ERROR(standby->Launch());

  if (synchronous) {
    KVC_RETURN_IF_ERROR(Exec("ALTER SYSTEM SET synchronous_standby_names = " +
                             Literal(standby->application_name_)));
    KVC_RETURN_IF_ERROR(Exec("SELECT pg_reload_conf()"));
  }
  const std::string want = synchronous ? "sync" : "async";
  const std::string query =
      "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' AND "
      "application_name = " +
      Literal(standby->application_name_);
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    auto rows = Query(query);
    if (rows.ok() && !rows->empty() && (*rows)[0][0] == want) break;
    if (Clock::now() >= deadline) {
      return Unavailable("the standby is not streaming (" + want + ") within " +
                         std::to_string(options_.timeout.count()) + " s; its log:\n" +
                         standby->LogTail());
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return standby;
}

Status PgServer::Promote() {
  KVC_ASSIGN_OR_RETURN(const std::string in_recovery, QueryValue("SELECT pg_is_in_recovery()"));
  if (in_recovery != "t") return InvalidArgument("not a standby: nothing to promote");
  KVC_ASSIGN_OR_RETURN(
      const std::string promoted,
      QueryValue("SELECT pg_promote(true, " + std::to_string(options_.timeout.count()) + ")"));
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    auto still = QueryValue("SELECT pg_is_in_recovery()");
    if (still.ok() && *still == "f") return Status::Ok();
    if (Clock::now() >= deadline) {
      return Unavailable("the standby was not promoted within " +
                         std::to_string(options_.timeout.count()) + " s (pg_promote said '" +
                         promoted + "'); its log:\n" + LogTail());
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status PgServer::WaitForReplay(const PgServer& primary) const {
  KVC_ASSIGN_OR_RETURN(const std::string lsn, primary.QueryValue("SELECT pg_current_wal_lsn()"));
  const std::string query =
      "SELECT coalesce(pg_last_wal_replay_lsn() >= " + Literal(lsn) + "::pg_lsn, false)";
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    KVC_ASSIGN_OR_RETURN(const std::string done, QueryValue(query));
    if (done == "t") return Status::Ok();
    if (Clock::now() >= deadline) {
      auto lag = ReplayLagBytes(primary);
      return Unavailable("the standby did not replay up to " + lsn + " within " +
                         std::to_string(options_.timeout.count()) + " s (" +
                         (lag.ok() ? std::to_string(*lag) + " bytes behind" : "lag unknown") + ")");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Result<int64_t> PgServer::ReplayLagBytes(const PgServer& primary) const {
  KVC_ASSIGN_OR_RETURN(const std::string lsn, primary.QueryValue("SELECT pg_current_wal_lsn()"));
  KVC_ASSIGN_OR_RETURN(const std::string lag,
                       QueryValue("SELECT greatest(0, pg_wal_lsn_diff(" + Literal(lsn) +
                                  ", pg_last_wal_replay_lsn()))::bigint"));
  int64_t bytes = 0;
  const auto [end, ec] = std::from_chars(lag.data(), lag.data() + lag.size(), bytes);
  if (ec != std::errc() || end != lag.data() + lag.size()) {
    return Unavailable("no replay position on this server (not a standby?)");
  }
  return bytes;
}

}  // namespace kvc::testutil
