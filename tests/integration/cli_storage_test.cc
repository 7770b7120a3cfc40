// The CLI's commands on a storage spec (cli/flags.h, storage/storage_spec.h): `db`, `token`,
// `export` and `import` work on PostgreSQL (a real server, testutil/pg_shared.h) given
// `--storage postgres:CONNINFO` or `--postgres CONNINFO`, exactly as on a data directory, and an
// offline import runs beside a server there (PostgreSQL has many writers); `backup` snapshots
// PostgreSQL's databases and `restore` brings one back there; `serve --storage` opens the
// storage the spec names (SQLite or PostgreSQL, --data-dir then unused; --backup-to accepted on
// both), and refuses a bad spec or an option of another kind before anything is opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/admin.h"
#include "cli/application.h"
#include "cli/backup.h"
#include "cli/dump.h"
#include "common/random.h"
#include "storage/storage.h"
#include "testutil/pg_shared.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;

constexpr char kToken[] = "kvc_cli_storage_test_token";

// A line of a dump: `name` -> a string value.
std::string DumpLine(const std::string& name, const std::string& value) {
  return R"({"key":[{"type":"string","value":")" + name +
         R"("}],"value":{"type":"string","value":")" + value +
         R"("},"versionstamp":"00000000000000010000"})" + "\n";
}

// Runs `kvconnect db|token ...` as main() does; returns the exit code and what it printed.
struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};
CliRun RunAdminCli(std::vector<std::string> args) {
  CLI::App app;
  cli::AdminConfig config;
  cli::AddAdminCommands(app, &config);
  args.insert(args.begin(), "kvconnect");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  CliRun r;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  r.code = cli::RunAdmin(app, config);
  r.out = testing::internal::GetCapturedStdout();
  r.err = testing::internal::GetCapturedStderr();
  return r;
}

class CliStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every command runs where a stray ./kvconnect-data would show a wrong turn to SQLite.
    cwd_ = fs::current_path();
    dir_ = fs::temp_directory_path() / ("kvc-cli-storage-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    fs::current_path(dir_);
    auto conninfo = testutil::FreshPgDatabase();
    ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
    conninfo_ = *conninfo;
  }
  void TearDown() override {
    app_.reset();
    if (!conninfo_.empty()) testutil::DropPgDatabase(conninfo_);
    fs::current_path(cwd_);
    fs::remove_all(dir_);
  }
  std::string Spec() const { return "postgres:" + conninfo_; }
  bool MadeADataDirectory() const { return fs::exists(dir_ / "kvconnect-data"); }

  fs::path cwd_;
  fs::path dir_;
  std::string conninfo_;
  std::unique_ptr<cli::Application> app_;
};

TEST_F(CliStorageTest, DbTokenExportImportOnPostgres) {
  CliRun r = RunAdminCli({"db", "create", "sales", "--storage", Spec()});
  ASSERT_EQ(r.code, 0) << r.err;
  r = RunAdminCli({"db", "list", "--json", "--postgres", conninfo_});  // the short form
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"sales\""), std::string::npos) << r.out;
  r = RunAdminCli({"token", "create", "--db", "sales", "--scope", "read", "--storage", Spec()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GT(r.out.size(), 12u) << r.out;  // the token, printed once
  // The rows are in PostgreSQL, not in a data directory.
  {
    auto pg = storage::OpenStorage({.kind = "postgres", .location = conninfo_});
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    EXPECT_TRUE((*pg)->catalog().FindDatabase("sales").ok());
  }
  cli::DumpConfig c;
  c.db = "sales";
  c.storage = Spec();
  c.quiet = true;
  std::istringstream dump(DumpLine("ann", "one") + DumpLine("bob", "two"));
  std::ostringstream log;
  auto imported = cli::RunImport(c, dump, log);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->entries, 2);
  std::ostringstream out;
  auto exported = cli::RunExport(c, out);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->entries, 2);
  EXPECT_NE(out.str().find("\"ann\""), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\"two\""), std::string::npos) << out.str();
  // A database that is not there: the message says where it looked (the conninfo, with any
  // password redacted), and the commands it suggests name the storage again with a placeholder
  // for the conninfo, never the conninfo itself (it may hold a password).
  c.db = "absent";
  auto missing = cli::RunExport(c, out);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const std::string& text = missing.status().message();
  const size_t hint = text.find("; create it with");
  ASSERT_NE(hint, std::string::npos) << text;
  EXPECT_NE(text.find("--storage postgres:CONNINFO", hint), std::string::npos) << text;
  EXPECT_EQ(text.find(conninfo_, hint), std::string::npos) << text;
  EXPECT_FALSE(MadeADataDirectory());
}

TEST_F(CliStorageTest, ServeOnAPostgresSpecAndAnImportBesideIt) {
  cli::ServeConfig s;
  s.storage = Spec();
  s.data_dir = (dir_ / "unused").string();
  s.access_token = kToken;
  s.net.host = "127.0.0.1";
  s.net.port = 0;
  auto app = cli::Application::Open(s);
  ASSERT_TRUE(app.ok()) << app.status().ToString();
  app_ = std::move(*app);
  ASSERT_TRUE(app_->Start().ok());
  EXPECT_EQ(app_->storage().Describe().rfind("postgres:", 0), 0u) << app_->storage().Describe();
  EXPECT_FALSE(fs::exists(dir_ / "unused"));
  // PostgreSQL has many writers: an offline import does not wait for the server to stop.
  cli::DumpConfig c;
  c.postgres = conninfo_;
  c.quiet = true;
  std::istringstream dump(DumpLine("k", "v"));
  std::ostringstream log;
  auto imported = cli::RunImport(c, dump, log);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_EQ(imported->entries, 1);
}

// Runs `kvconnect <args...>` of the backup commands (backup, backup list, restore) with `c`.
CliRun RunBackupCli(std::vector<std::string> args, const cli::BackupConfig& c) {
  CLI::App app;
  cli::BackupConfig unused;
  cli::AddBackupCommands(app, &unused);
  args.insert(args.begin(), "kvconnect");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  CliRun r;
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  r.code = cli::RunBackup(app, c);
  r.err = testing::internal::GetCapturedStderr();
  r.out = testing::internal::GetCapturedStdout();
  return r;
}

// `kvconnect backup` snapshots PostgreSQL's databases (backend-neutral snapshot files, not a
// data directory's), and `kvconnect restore` brings one back into PostgreSQL as a new database
// with the same rows; in place over a database with data it is refused (PostgreSQL keys a
// database's rows by its id).
TEST_F(CliStorageTest, BackupReachesThePostgresStorage) {
  CliRun r = RunAdminCli({"db", "create", "sales", "--storage", Spec()});
  ASSERT_EQ(r.code, 0) << r.err;
  cli::DumpConfig d;
  d.db = "sales";
  d.storage = Spec();
  d.quiet = true;
  std::istringstream dump(DumpLine("ann", "one") + DumpLine("bob", "two"));
  std::ostringstream log;
  ASSERT_TRUE(cli::RunImport(d, dump, log).ok());
  cli::BackupConfig b;
  b.storage = Spec();
  b.all = true;
  b.to = (dir_ / "backups").string();
  r = RunBackupCli({"backup"}, b);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("backed up 'default'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backed up 'sales' at versionstamp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(2 keys"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("data directory"), std::string::npos) << r.err;
  cli::BackupConfig restore;
  restore.storage = Spec();
  restore.from = b.to;
  restore.db = "sales";
  restore.as = "sales-copy";
  r = RunBackupCli({"restore", "--from", b.to, "--db", "sales"}, restore);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("as 'sales-copy'"), std::string::npos) << r.out;
  std::ostringstream out;
  d.db = "sales-copy";
  auto exported = cli::RunExport(d, out);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->entries, 2);
  EXPECT_NE(out.str().find("\"bob\""), std::string::npos) << out.str();
  restore.as.clear();  // in place, over 'sales' and its data
  r = RunBackupCli({"restore", "--from", b.to, "--db", "sales"}, restore);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--as NAME"), std::string::npos) << r.err;
  EXPECT_FALSE(MadeADataDirectory());
}

TEST_F(CliStorageTest, ServeOnASqliteSpecAndRefusalsBeforeOpening) {
  cli::ServeConfig s;
  s.storage = "sqlite:" + (dir_ / "spec-data").string();
  s.data_dir = (dir_ / "unused").string();
  s.access_token = kToken;
  s.net.host = "127.0.0.1";
  s.sync = "normal";
  {
    auto app = cli::Application::Open(s);
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    EXPECT_TRUE(fs::is_directory(dir_ / "spec-data"));
    EXPECT_FALSE(fs::exists(dir_ / "unused"));
  }
  // A spec libpq cannot parse, an option of another kind: refused as bad input before any
  // connection or directory is made.
  cli::ServeConfig bad = s;
  bad.storage = "postgres:host='never";
  auto r = cli::Application::Open(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  bad = s;
  bad.storage = "sqlite:" + (dir_ / "fresh").string();
  bad.storage_options.read_location = "host=standby";
  r = cli::Application::Open(bad);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
  // Continuous backup on PostgreSQL is accepted (it ships the change log every node writes).
  cli::ServeConfig pg = s;
  pg.storage = Spec();
  pg.backup_to = (dir_ / "backups").string();
  r = cli::Application::Open(pg);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

}  // namespace
}  // namespace kvc
