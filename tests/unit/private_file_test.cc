// storage/private_file and the SQLite connection that uses it: files come out 0600 and new
// directories 0700 whatever the umask and the mode of the directory they are made in; older,
// looser files are tightened; a scratch directory someone else owns (or a link in its place) is
// refused.
#include "storage/private_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "storage/sqlite/sqlite_util.h"

namespace kvc::storage {
namespace {
namespace fs = std::filesystem;

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// A fresh directory of mode 0755 (as an operator might make one) under the system's temporary
// directory, and umask 022 for the test's length.
class PrivateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kvc-private-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;
  mode_t old_umask_ = 0;
};

TEST_F(PrivateFileTest, NewFileIs0600AndAnOlderLooseOneIsTightened) {
  const fs::path fresh = dir_ / "fresh";
  ASSERT_TRUE(PreparePrivateFile(fresh.string(), true).ok());
  EXPECT_EQ(ModeOf(fresh), 0600u);

  const fs::path old = dir_ / "old";
  std::ofstream(old) << "x";
  ASSERT_EQ(::chmod(old.c_str(), 0664), 0);
  ASSERT_TRUE(PreparePrivateFile(old.string(), false).ok());
  EXPECT_EQ(ModeOf(old), 0600u);

  // Missing and not to be made: left missing, no error.
  ASSERT_TRUE(PreparePrivateFile((dir_ / "absent").string(), false).ok());
  EXPECT_FALSE(fs::exists(dir_ / "absent"));
}

// Opening a database that another connection of this process holds locked must leave its
// locks alone: closing any descriptor of a file drops every POSIX lock the process holds on it,
// so PreparePrivateFile never opens an existing file. Another process (the sqlite3 shell) must
// still find the write lock taken.
TEST_F(PrivateFileTest, OpeningALockedDatabaseAgainKeepsItsLocks) {
  if (std::system("command -v sqlite3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no sqlite3 shell";
  const fs::path db = dir_ / "locked.sqlite3";
  sqlite::Connection holder("test: ");
  ASSERT_TRUE(holder
                  .Open(db.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000,
                        "pragma journal_mode=wal; create table t (x);")
                  .ok());
  ASSERT_TRUE(holder.Exec("begin immediate; insert into t values (1);").ok());
  const std::string probe =
      "sqlite3 -cmd '.timeout 0' '" + db.string() + "' 'begin immediate; commit;' >/dev/null 2>&1";
  ASSERT_NE(std::system(probe.c_str()), 0) << "the write lock is not held to begin with";
  sqlite::Connection second("test: ");
  ASSERT_TRUE(second.Open(db.string(), SQLITE_OPEN_READWRITE, 1000, "").ok());
  EXPECT_NE(std::system(probe.c_str()), 0)
      << "another process took the write lock this process holds: opening the database again "
         "dropped its locks";
  ASSERT_TRUE(holder.Exec("commit;").ok());
}

TEST_F(PrivateFileTest, SqliteDatabaseWalAndShmAre0600) {
  const fs::path db = dir_ / "x.sqlite3";
  {
    sqlite::Connection c("test: ");
    ASSERT_TRUE(c.Open(db.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 1000,
                       "pragma journal_mode=wal; create table t (x); insert into t values (1);")
                    .ok());
    ASSERT_TRUE(fs::exists(db.string() + "-wal"));
    ASSERT_TRUE(fs::exists(db.string() + "-shm"));
    for (const char* suffix : {"", "-wal", "-shm"}) {
      EXPECT_EQ(ModeOf(db.string() + suffix), 0600u) << suffix;
    }
    // An older, looser set of files (as SQLite made them under umask 022): tightened on open.
    for (const char* suffix : {"", "-wal", "-shm"}) {
      ASSERT_EQ(::chmod((db.string() + suffix).c_str(), 0644), 0);
    }
    sqlite::Connection again("test: ");
    ASSERT_TRUE(again.Open(db.string(), SQLITE_OPEN_READWRITE, 1000, "").ok());
    for (const char* suffix : {"", "-wal", "-shm"}) {
      EXPECT_EQ(ModeOf(db.string() + suffix), 0600u) << suffix;
    }
  }
}

TEST_F(PrivateFileTest, NewDirectoriesAre0700AndExistingOnesKeepTheirMode) {
  ::umask(0);  // the most permissive umask: the mode must still be 0700
  const fs::path deep = dir_ / "a" / "b" / "c";
  ASSERT_TRUE(MakePrivateDirectories(deep.string()).ok());
  EXPECT_EQ(ModeOf(dir_ / "a"), 0700u);
  EXPECT_EQ(ModeOf(dir_ / "a" / "b"), 0700u);
  EXPECT_EQ(ModeOf(deep), 0700u);
  EXPECT_EQ(ModeOf(dir_), 0755u);  // the operator's
  std::ofstream(dir_ / "file") << "x";
  EXPECT_EQ(MakePrivateDirectories((dir_ / "file").string()).code(), StatusCode::kIoError);
}

TEST_F(PrivateFileTest, ScratchDirectoryOfAnotherUserOrALinkIsRefused) {
  const fs::path scratch = dir_ / "kvconnect-scratch";
  ASSERT_TRUE(MakeOwnedPrivateDirectory(scratch.string()).ok());
  EXPECT_EQ(ModeOf(scratch), 0700u);
  ASSERT_EQ(::chmod(scratch.c_str(), 0777), 0);  // ours but loose: set back to 0700
  ASSERT_TRUE(MakeOwnedPrivateDirectory(scratch.string()).ok());
  EXPECT_EQ(ModeOf(scratch), 0700u);

  // A link someone put where the directory should be, even to a directory of ours.
  const fs::path link = dir_ / "kvconnect-link";
  fs::create_directory_symlink(scratch, link);
  Status s = MakeOwnedPrivateDirectory(link.string());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.message();

  // Another user's directory: only root can make one for the test.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a directory another user owns";
  const fs::path theirs = dir_ / "kvconnect-theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(theirs.c_str(), 0777), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  s = MakeOwnedPrivateDirectory(theirs.string());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("belongs to user id 65534"), std::string::npos) << s.message();
  EXPECT_EQ(ModeOf(theirs), 0777u);  // left alone
}

}  // namespace
}  // namespace kvc::storage
