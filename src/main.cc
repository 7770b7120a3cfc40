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

// jemalloc's options for this binary, read at its first allocation (the C library's malloc has
// no such symbol and ignores it; MALLOC_CONF in the environment overrides it, e.g.
// MALLOC_CONF=thp:default). thp:always: jemalloc asks the kernel for transparent huge pages for
// the memory it maps, where the kernel's setting is `madvise` (Debian's) or `always`. A large
// read cache is read at random: with 4 KiB pages nearly every hit also missed the TLB, and on a
// VM each such miss walks two page tables (README, Performance: 10 million keys).
extern "C" {
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables): jemalloc's ABI
const char* malloc_conf = "thp:always";
}

// CLI11 throws outside parse() only for misdeclared options, a bug best ended by terminate().
int main(int argc, char** argv) {                  // NOLINT(bugprone-exception-escape)
  kvc::storage::sqlite::ConfigureSqliteProcess();  // before any SQLite call or thread
  CLI::App app{"kvconnect: a self-hosted Deno KV server speaking the KV Connect protocol"};
  app.require_subcommand(1);
  const std::string thp = kvc::AllocatorHugePages();
  app.set_version_flag("--version", std::string("kvconnect ") + kvc::BuildVersion() + " (commit " +
                                        kvc::BuildCommit() + ", allocator " +
                                        kvc::AllocatorInUse() +
                                        (thp.empty() ? "" : ", thp " + thp) + ")");
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
