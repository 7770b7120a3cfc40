// PgServer: a real PostgreSQL 15 server for tests, started by the test itself in a temporary
// directory: initdb (trust authentication, superuser `kvc`, UTF8, locale C), then `postgres`
// listening only on a Unix socket in that same directory (listen_addresses='': no TCP port, so
// no port to race other processes for; every server has a directory, and so a socket, of its
// own), with wal_level=replica so that standbys can be made from it. One database (`kvc` by
// default) is created. Starting takes well under a second on an idle machine.
//
// The binaries come from KVC_PG_BINDIR (environment) or else the directory CMake recorded
// (/usr/lib/postgresql/15/bin, Debian's postgresql-15). If they are missing, Start fails with
// a message that says so: tests that need PostgreSQL fail, they never skip.
//
// initdb and postgres refuse to run as root: when this process is root, every PostgreSQL
// program runs as the `postgres` system user (through `setpriv`) and the temporary directory
// belongs to that user; otherwise they run as the current user. TMPDIR must then be
// reachable by `postgres` (/tmp is).
//
// Ownership: owns the postmaster process and the temporary directory; the destructor stops
// the server (immediate shutdown, SIGKILL if that hangs), reaps it and removes the directory.
// The postmaster is started with a parent-death signal (SIGQUIT, an immediate shutdown), so
// it never outlives a test process that crashes or is killed; a directory such a process left
// behind is removed by the next Start.
// REQUIRES: Start, Restart and StartStandby are called from a thread that lives as long as the
// servers they start (the parent-death signal follows the thread), e.g. the test's own thread.
// Thread-safety: the SQL helpers and accessors are const and may be called from several
// threads (each opens its own connection); the rest from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvc::testutil {

struct PgServerOptions {
  // Created at start; conninfo() connects to it. A standby has its primary's databases.
  std::string database = "kvc";
  // fsync=off is much faster but an operating-system crash could lose data (never a test's
  // crash: Stop(kImmediate) keeps committed transactions either way).
  bool fsync = true;
  std::string shared_buffers = "16MB";
  // More server settings, each "name=value", passed as `-c name=value` after the fixture's
  // own (listen_addresses='', unix_socket_directories, fsync, shared_buffers, wal_level=replica,
  // max_wal_senders, hot_standby=on, wal_keep_size, max_connections), so they override those,
  // postgresql.conf and ALTER SYSTEM.
  std::vector<std::string> settings;
  // Limit for each start, stop, promotion and wait for a standby.
  std::chrono::seconds timeout{60};
};

enum class PgStopMode {
  kFast,       // SIGINT, as `pg_ctl stop -m fast`: transactions rolled back, a clean shutdown
  kImmediate,  // SIGQUIT, as `pg_ctl stop -m immediate`: like a crash; recovery at next start
};

class PgServer {
 public:
  // The superuser initdb makes; trust authentication, so no password.
  static constexpr char kUser[] = "kvc";

  // Makes a temporary directory, runs initdb, starts the server and creates the database.
  // Errors: NotFound (PostgreSQL binaries, setpriv or the postgres user missing),
  // Unavailable (a program failed or the server did not answer in time; the message holds
  // its log), IoError.
  static Result<std::unique_ptr<PgServer>> Start(PgServerOptions options = {});
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  // "host='<socket_dir>' port=5432 user=kvc dbname='kvc'": the Unix socket.
  std::string conninfo() const;
  // The same for database `dbname`.
  std::string conninfo_for(const std::string& dbname) const;
  // The number in the socket's name (.s.PGSQL.<port>); no TCP port is open.
  int port() const { return kPort; }
  const std::string& data_dir() const { return data_dir_; }
  // Where the server puts its Unix socket: the `host` of a conninfo.
  const std::string& socket_dir() const { return dir_; }
  // The standby's application_name in its primary's pg_stat_replication; empty on a server
  // Start made.
  const std::string& application_name() const { return application_name_; }
  // The postmaster's process id; -1 when stopped.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // What initdb, pg_basebackup and the server printed so far.
  std::string Log() const;

  // Stops the server and waits for it to exit. Ok if it is not running. Errors: Unavailable
  // (it did not exit in time: it was SIGKILLed).
  Status Stop(PgStopMode mode = PgStopMode::kFast);
  // Starts the server again on the same data directory and socket (after a fast stop if it is
  // running) and waits until it answers. A standby stays a standby. Errors: as Start.
  Status Restart();

  // Runs `sql` (one or more statements, the simple query protocol) in the database. Errors:
  // Unavailable (cannot connect), InvalidArgument (the server refused the SQL; its message).
  Status Exec(const std::string& sql) const;
  // The last statement's rows, each column as text (NULL as ""). Errors: as Exec.
  Result<std::vector<std::vector<std::string>>> Query(const std::string& sql) const;
  // The first column of the first row. Errors: as Exec; NotFound if there is no row.
  Result<std::string> QueryValue(const std::string& sql) const;

  // Makes a streaming-replication standby of this server: pg_basebackup -R -X stream (and
  // --no-sync: the copy is not flushed as a whole, which took seconds) into a new temporary
  // directory, started on its own socket there with this server's options, and waits until this
  // server reports it streaming. If `synchronous`, this server's synchronous_standby_names
  // becomes the standby's application_name (reloaded, replacing any earlier synchronous
  // standby) and the wait is for sync_state = 'sync'; commits then wait for the standby, so
  // destroy the standby only after the last write here or turn that off (ALTER SYSTEM RESET
  // synchronous_standby_names; SELECT pg_reload_conf()).
  // REQUIRES: running(). Errors: as Start.
  Result<std::unique_ptr<PgServer>> StartStandby(bool synchronous);
  // Promotes this standby (pg_promote, as `pg_ctl promote`) and waits until
  // pg_is_in_recovery() is false. Errors: InvalidArgument (this server is not a standby),
  // Unavailable (no promotion within the timeout).
  Status Promote();
  // Waits until this standby has replayed `primary`'s current WAL position (what it had
  // written when called): afterwards every transaction the primary committed before the call
  // is visible here. Errors: Unavailable (not within the timeout; the message has the lag).
  Status WaitForReplay(const PgServer& primary) const;
  // Bytes of `primary`'s WAL this standby has not replayed yet (0 when caught up).
  Result<int64_t> ReplayLagBytes(const PgServer& primary) const;

 private:
  // Every server listens on <its own directory>/.s.PGSQL.5432.
  static constexpr int kPort = 5432;

  explicit PgServer(PgServerOptions options) : options_(std::move(options)) {}

  Result<std::vector<std::vector<std::string>>> RunSql(const std::string& dbname,
                                                       const std::string& sql) const;
  // Starts the postmaster and waits until it answers.
  Status Launch();
  Status WaitReady(std::chrono::steady_clock::time_point deadline);
  std::string LogTail() const;

  PgServerOptions options_;
  pid_t pid_ = -1;
  std::string dir_;  // temporary directory: data/, postgres.log, the socket, owner
  std::string data_dir_;
  std::string log_path_;
  std::string application_name_;
};

}  // namespace kvc::testutil
