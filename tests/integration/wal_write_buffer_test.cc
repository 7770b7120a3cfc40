// The WAL write buffer (storage/sqlite/wal_write_buffer.h) on real SQLite files: a commit's
// frames reach the wrapped VFS in one write instead of two per frame; a second connection
// through the plain VFS reads every commit at once; transactions larger than the buffer, larger
// than one write of the unix VFS, spilled by a tiny page cache and rolled back all leave the
// same rows as a model and pass SQLite's integrity check; after a power cut every commit that
// returned is there. The wrapped VFS is testutil::PowerLossVfs, which counts the writes.
#include "storage/sqlite/wal_write_buffer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <memory>
#include <string>

#include "storage/sqlite/sqlite_util.h"
#include "testutil/power_loss_vfs.h"
#include "testutil/temp_dir.h"

namespace kvc::storage::sqlite {
namespace {

using testutil::PowerLossVfs;

constexpr char kBaseVfs[] = "kvc-wal-buffer-test-base";

class WalWriteBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto v = PowerLossVfs::Register(kBaseVfs);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vfs_ = std::move(*v);
    path_ = (dir_.path() / "t.sqlite3").string();
  }

  // A connection in WAL mode and synchronous=FULL through `vfs`, with a table t(k, v).
  std::unique_ptr<Connection> OpenDb(const std::string& vfs, int cache_pages = 2000) {
    auto c = std::make_unique<Connection>("test ");
    const std::string pragmas =
        "pragma journal_mode=wal; pragma synchronous=full; "
        "pragma cache_size=" +
        std::to_string(cache_pages) +
        "; "
        "create table if not exists t (k integer primary key, v blob);";
    Status s = c->Open(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 5000, pragmas, vfs);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }

  std::string BufferVfs(size_t bytes) {
    auto name = WalWriteBufferVfs(kBaseVfs, bytes);
    EXPECT_TRUE(name.ok()) << name.status().ToString();
    return name.ok() ? *name : "";
  }

  // Inserts or replaces rows [first, first + n) with values of `bytes` bytes (each row on a page
  // of its own from about 2 KiB on), as one transaction, and records them in the model.
  void Put(Connection& c, int first, int n, size_t bytes, bool commit = true) {
    ASSERT_TRUE(c.Exec("begin immediate").ok());
    auto st = c.Prepare("insert or replace into t (k, v) values (?1, ?2)");
    ASSERT_TRUE(st.ok());
    for (int k = first; k < first + n; ++k) {
      const std::string v(bytes, static_cast<char>('a' + (k + n) % 26));
      Stmt s(*st);
      s.BindInt64(1, k).BindBlob(2, v);
      ASSERT_EQ(s.Step(), SQLITE_DONE) << sqlite3_errmsg(c.db());
      if (commit) model_[k] = v;
    }
    ASSERT_TRUE(c.Exec(commit ? "commit" : "rollback").ok());
  }

  // Every row of t through `c` equals the model, and SQLite's integrity check passes.
  void ExpectModel(Connection& c) {
    std::map<int64_t, std::string> rows;
    auto st = c.PrepareOnce("select k, v from t order by k");
    ASSERT_TRUE(st.ok());
    while (st->Step() == SQLITE_ROW) rows[st->ColumnInt64(0)] = st->ColumnBlob(1);
    EXPECT_EQ(rows.size(), model_.size());
    EXPECT_TRUE(rows == model_) << "the rows differ from the model";
    auto check = c.PrepareOnce("pragma integrity_check");
    ASSERT_TRUE(check.ok());
    ASSERT_EQ(check->Step(), SQLITE_ROW);
    EXPECT_EQ(check->ColumnText(0), "ok");
  }

  int64_t Writes() const { return vfs_->counters().writes; }

  testutil::TempDir dir_;
  std::unique_ptr<PowerLossVfs> vfs_;
  std::string path_;
  std::map<int64_t, std::string> model_;
};

TEST_F(WalWriteBufferTest, NamesAreCheckedAndReused) {
  EXPECT_EQ(WalWriteBufferVfs(kBaseVfs, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WalWriteBufferVfs(kBaseVfs, (size_t{64} << 20) + 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WalWriteBufferVfs("no-such-vfs", 4096).status().code(), StatusCode::kInvalidArgument);
  const std::string a = BufferVfs(1 << 20);
  EXPECT_EQ(BufferVfs(1 << 20), a);
  EXPECT_NE(BufferVfs(1 << 16), a);
  EXPECT_NE(sqlite3_vfs_find(a.c_str()), nullptr);
}

// Twenty pages in one commit: about forty writes without the buffer, one (plus the WAL header
// of a new log) with it.
TEST_F(WalWriteBufferTest, OneCommitIsOneWrite) {
  int64_t plain = 0;
  {
    auto c = OpenDb(kBaseVfs);
    Put(*c, 0, 1, 10);  // the table and the WAL exist
    const int64_t before = Writes();
    Put(*c, 100, 20, 3000);
    plain = Writes() - before;
  }
  auto c = OpenDb(BufferVfs(1 << 20));
  Put(*c, 200, 1, 10);
  const int64_t before = Writes();
  Put(*c, 300, 20, 3000);
  const int64_t buffered = Writes() - before;
  EXPECT_GE(plain, 40) << "SQLite writes a frame's header and its page apart";
  EXPECT_LE(buffered, 2) << "the commit's frames in one write";
  ExpectModel(*c);
}

// A reader through the plain VFS sees each commit as soon as it returned.
TEST_F(WalWriteBufferTest, ReadersSeeEveryCommitAtOnce) {
  auto writer = OpenDb(BufferVfs(1 << 20));
  auto reader = OpenDb(kBaseVfs);
  for (int i = 0; i < 300; ++i) {
    Put(*writer, i, 1 + i % 7, 100 + static_cast<size_t>(i) * 37 % 5000);
    auto st = reader->PrepareOnce("select count(*), sum(length(v)) from t");
    ASSERT_TRUE(st.ok());
    ASSERT_EQ(st->Step(), SQLITE_ROW);
    int64_t bytes = 0;
    for (const auto& [k, v] : model_) bytes += static_cast<int64_t>(v.size());
    ASSERT_EQ(st->ColumnInt64(0), static_cast<int64_t>(model_.size())) << "after commit " << i;
    ASSERT_EQ(st->ColumnInt64(1), bytes) << "after commit " << i;
  }
  ExpectModel(*reader);
}

// A 16 KiB buffer and a 10-page cache: commits of 1.5 MB (beyond the buffer and beyond the unix
// VFS's 128 KiB per write), a transaction that spills frames and then rolls back, checkpoints.
TEST_F(WalWriteBufferTest, LargeSpilledAndRolledBackTransactions) {
  auto c = OpenDb(BufferVfs(16 << 10), /*cache_pages=*/10);
  Put(*c, 0, 400, 3800);
  Put(*c, 1000, 300, 3000, /*commit=*/false);  // spills, then rolls back
  Put(*c, 50, 200, 1500);
  ASSERT_TRUE(c->Exec("pragma wal_checkpoint(truncate)").ok());
  Put(*c, 2000, 100, 5000);
  Put(*c, 3000, 50, 2500, /*commit=*/false);
  Put(*c, 3, 3, 100);
  ExpectModel(*c);
  auto reader = OpenDb(kBaseVfs);
  ExpectModel(*reader);
}

// The power goes out at a sync: every commit that returned before is on the disk.
TEST_F(WalWriteBufferTest, CommitsThatReturnedSurviveAPowerCut) {
  {
    auto c = OpenDb(BufferVfs(1 << 20));
    for (int i = 0; i < 20; ++i) Put(*c, i * 10, 5, 2000);
    vfs_->ArmCutAtSync(1);
    ASSERT_TRUE(c->Exec("begin immediate").ok());
    ASSERT_TRUE(c->Exec("insert into t (k, v) values (99999, zeroblob(3000))").ok());
    EXPECT_FALSE(c->Exec("commit").ok());
    EXPECT_TRUE(vfs_->powered_off());
  }
  ASSERT_TRUE(vfs_->ApplyPowerLoss(PowerLossVfs::Mode::kDiscardUnsynced, 1).ok());
  auto reader = OpenDb(kBaseVfs);
  ExpectModel(*reader);
}

}  // namespace
}  // namespace kvc::storage::sqlite
