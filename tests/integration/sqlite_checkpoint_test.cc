// SQLite's WAL checkpoints off the commit path (storage/sqlite/checkpointer.h): the writer
// checkpoints itself at the WAL limit, which bounds the WAL; a thread checkpoints in the
// background from its own threshold on, after which the next commit writes the WAL from its start
// again; and every committed write is in the database, read back through a new backend and
// checked by SQLite's own integrity check, whichever way the pages were copied. Each case is
// deterministic: the writer is the only one writing, and a background checkpoint is awaited
// before anything depends on it.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "storage/sqlite/checkpointer.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/temp_dir.h"
#include "testutil/wait.h"

namespace kvc::storage {
namespace {

constexpr int kKeys = 2000;

std::string KeyOf(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "key%06d", i);
  return buf;
}

class SqliteCheckpointTest : public ::testing::Test {
 protected:
  void Open(int64_t checkpoint_pages, int64_t wal_limit_pages) {
    SqliteOptions o;
    o.checkpoint_pages = checkpoint_pages;
    o.wal_limit_pages = wal_limit_pages;
    auto b = SqliteBackend::Open(path_, o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(*b);
    auto w = backend_->OpenWriter();
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    writer_ = std::move(*w);
  }

  // One transaction: `value` under each of `keys` (an empty value deletes the key).
  void Commit(const std::vector<int>& keys, const std::string& value) {
    auto base = writer_->Begin();
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    for (int k : keys) {
      if (value.empty()) {
        ASSERT_TRUE(writer_->Delete(KeyOf(k)).ok());
        model_.erase(KeyOf(k));
      } else {
        StoredRow row{value, ValueEncoding::kBytes, *base + 1, -1};
        ASSERT_TRUE(writer_->Put(KeyOf(k), row).ok());
        model_[KeyOf(k)] = value;
      }
    }
    ASSERT_TRUE(writer_->SetDataVersion(*base + 1).ok());
    ASSERT_TRUE(writer_->Commit().ok());
  }

  // Every key, `per_commit` to a commit (50 new keys write about a dozen pages).
  void Preload(int per_commit) {
    for (int from = 0; from < kKeys; from += per_commit) {
      std::vector<int> keys;
      for (int i = from; i < std::min(kKeys, from + per_commit); ++i) keys.push_back(i);
      Commit(keys, std::string(100, 'p'));
    }
  }

  // Overwrites of `n` random preloaded keys with a value of the same size: no page splits, so
  // each commit writes at most n + 1 WAL pages (the keys' leaves and data_version's).
  void Overwrite(int n, char fill) {
    std::vector<int> keys;
    for (int i = 0; i < n; ++i) keys.push_back(static_cast<int>(rng_() % kKeys));
    Commit(keys, std::string(100, fill));
  }

  std::uintmax_t WalBytes() const { return std::filesystem::file_size(path_ + "-wal"); }
  // Pages in the WAL file as it stands (its size; SQLite does not shrink it on a restart).
  int64_t WalFilePages() const {
    std::ifstream in(path_ + "-wal", std::ios::binary);
    unsigned char h[12] = {};
    in.read(reinterpret_cast<char*>(h), sizeof h);
    const uint32_t page =
        (uint32_t{h[8]} << 24) | (uint32_t{h[9]} << 16) | (uint32_t{h[10]} << 8) | h[11];
    if (page == 0 || WalBytes() < 32) return 0;
    return static_cast<int64_t>((WalBytes() - 32) / (page + 24));
  }

  // Closes the writer and the backend, opens the file again and compares every row with the
  // model; then SQLite's integrity check.
  void ExpectEveryWrite() {
    writer_.reset();
    backend_.reset();
    auto b = SqliteBackend::Open(path_, SqliteOptions{});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    auto r = (*b)->OpenReader();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE((*r)->Begin().ok());
    std::vector<Entry> rows;
    ASSERT_TRUE((*r)->Scan({"", "\xff", kKeys * 2, false}, 0, &rows).ok());
    (*r)->End();
    std::map<std::string, std::string> got;
    for (const Entry& e : rows) got[e.key] = e.value;
    EXPECT_EQ(got, model_);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "pragma integrity_check", -1, &s, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "ok");
    sqlite3_finalize(s);
    sqlite3_close(db);
  }

  testutil::TempDir dir_{"kvc-checkpoint-"};
  const std::string path_ = (dir_.path() / "db.sqlite3").string();
  std::unique_ptr<SqliteBackend> backend_;
  std::unique_ptr<Writer> writer_;
  std::map<std::string, std::string> model_;
  std::mt19937 rng_{7};
};

// With the thread's threshold at the limit the writer does every checkpoint itself, at the
// limit: the WAL file never grows past the limit plus one commit (the largest, a preload
// commit of 50 new keys, is under 16 pages), though the commits write 30 times that.
TEST_F(SqliteCheckpointTest, TheWriterCheckpointsAtTheLimit) {
  constexpr int64_t kLimit = 64;
  constexpr int kPerCommit = 6;
  Open(kLimit, kLimit);
  Preload(50);
  int64_t most = 0;
  for (int i = 0; i < 200; ++i) {
    Overwrite(kPerCommit, static_cast<char>('a' + i % 26));
    most = std::max(most, WalFilePages());
  }
  EXPECT_LE(most, kLimit + 16);
  EXPECT_GE(backend_->checkpoint_counts().by_writer.load(), 10);
  EXPECT_EQ(backend_->checkpoint_counts().background.load(), 0);
  ExpectEveryWrite();
}

// Past its threshold the thread checkpoints while the writer waits for nothing; once it has
// copied everything, the next commit writes the WAL from its start (the file does not grow).
TEST_F(SqliteCheckpointTest, AThreadCheckpointsInTheBackground) {
  Open(/*checkpoint_pages=*/32, /*wal_limit_pages=*/int64_t{1} << 30);
  Preload(kKeys);  // one commit of about 80 pages: past the threshold, and nothing after it
  ASSERT_TRUE(testutil::WaitFor([&] { return backend_->checkpoint_counts().background >= 1; }))
      << "a background checkpoint after the preload";
  const auto before = WalBytes();
  Overwrite(6, 'x');
  EXPECT_EQ(WalBytes(), before) << "the commit after a complete checkpoint restarts the WAL";
  for (int i = 0; i < 100; ++i) Overwrite(6, static_cast<char>('a' + i % 26));
  EXPECT_EQ(backend_->checkpoint_counts().by_writer.load(), 0);
  ExpectEveryWrite();
}

// Both at once, small, with inserts, overwrites and deletes: nothing committed is lost or
// damaged whichever checkpoint copied it.
TEST_F(SqliteCheckpointTest, EveryWriteSurvivesBothCheckpoints) {
  Open(/*checkpoint_pages=*/16, /*wal_limit_pages=*/64);
  Preload(50);
  for (int i = 0; i < 300; ++i) {
    std::vector<int> keys;
    for (int j = 0; j < 5; ++j) keys.push_back(static_cast<int>(rng_() % (kKeys + 500)));
    Commit(keys, i % 7 == 0 ? std::string() : std::string(50 + i % 100, 'v'));
  }
  EXPECT_GE(backend_->checkpoint_counts().by_writer.load() +
                backend_->checkpoint_counts().background.load(),
            1);
  ExpectEveryWrite();
}

}  // namespace
}  // namespace kvc::storage
