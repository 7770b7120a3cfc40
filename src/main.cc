// kvconnect: a self-hosted KV Connect server. Composition root: parses the command line and
// hands over to the subcommand in src/cli/.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "cli/admin.h"
#include "cli/backup.h"
#include "cli/bench.h"
#include "cli/dump.h"
#include "cli/migrate.h"
#include "cli/queue.h"
#include "cli/serve.h"
#include "common/build_info.h"
#include "storage/sqlite/sqlite_util.h"

// CLI11 throws outside parse() only for misdeclared options, a bug best ended by terminate().
int main(int argc, char** argv) {                  // NOLINT(bugprone-exception-escape)
  kvc::storage::sqlite::ConfigureSqliteProcess();  // before any SQLite call or thread
  CLI::App app{"kvconnect: a self-hosted Deno KV server speaking the KV Connect protocol"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvconnect ") + kvc::BuildVersion() + " (commit " +
                                        kvc::BuildCommit() + ", allocator " +
                                        kvc::AllocatorInUse() + ")");
  kvc::cli::ServeConfig serve;
  CLI::App* serve_cmd = kvc::cli::AddServeCommand(app, &serve);
  kvc::cli::AdminConfig admin;
  kvc::cli::AddAdminCommands(app, &admin);
  kvc::cli::BenchConfig bench;
  kvc::cli::AddBenchCommand(app, &bench);
  kvc::cli::DumpConfig dump;
  kvc::cli::AddDumpCommands(app, &dump);
  kvc::cli::BackupConfig backup;
  kvc::cli::AddBackupCommands(app, &backup);
  kvc::cli::QueueCliConfig queue;
  kvc::cli::AddQueueCommands(app, &queue);
  kvc::cli::MigrateConfig migrate;
  kvc::cli::AddMigrateCommand(app, &migrate);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (app.got_subcommand("serve")) {
    // Before any thread exists: every thread inherits the mask, so SIGTERM during start-up
    // waits for serve's sigwait (and a drained shutdown) instead of killing the process.
    kvc::cli::BlockServeSignals();
    kvc::Status s = kvc::cli::ApplyServeConfigFile(serve_cmd, serve);
    if (!s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 2;
    }
    return kvc::cli::RunServe(serve);
  }
  if (app.got_subcommand("bench")) return kvc::cli::RunBench(bench);
  if (app.got_subcommand("export") || app.got_subcommand("import")) {
    return kvc::cli::RunDump(app, dump);
  }
  if (app.got_subcommand("backup") || app.got_subcommand("restore")) {
    return kvc::cli::RunBackup(app, backup);
  }
  if (app.got_subcommand("queue")) return kvc::cli::RunQueue(app, queue);
  if (app.got_subcommand("migrate")) return kvc::cli::RunMigrate(migrate);
  return kvc::cli::RunAdmin(app, admin);
}
