// Storage (storage/storage.h) on SQLite: the default database (made, or adopted from a data
// directory older than the catalog), databases made and deleted through AdminOps, secrets; and
// the storage kind table's answer to an unknown kind.
#include "storage/storage.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "service/admin/admin_ops.h"
#include "storage/sqlite/sqlite_storage.h"
#include "testutil/temp_dir.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;

using testutil::TempDir;

TEST(SqliteStorage, DefaultDatabaseCreateAndAdoptExisting) {
  TempDir dir;
  storage::SqliteOptions so;
  std::string default_id;
  {
    // A data directory from before the catalog: default.sqlite3 alone.
    auto b = storage::SqliteBackend::Open((dir.path() / "default.sqlite3").string(), so);
    ASSERT_TRUE(b.ok());
    default_id = (*b)->database_id();
  }
  storage::StorageOptions options;
  options.location = dir.path().string();
  auto st = storage::OpenStorage(options);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  storage::Storage& storage = **st;
  auto def = storage.catalog().FindDatabase("default");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->id, default_id);  // adopted, not replaced

  service::AdminOps ops(&storage.catalog(), &storage);
  auto sales = ops.CreateDatabase("sales");
  ASSERT_TRUE(sales.ok()) << sales.status().ToString();
  EXPECT_EQ(sales->location, storage.Location(sales->record));
  EXPECT_TRUE(fs::exists(sales->location));
  EXPECT_EQ(fs::path(sales->location).parent_path(), dir.path());
  EXPECT_NE(sales->record.id, default_id);
  EXPECT_EQ(ops.CreateDatabase("sales").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ops.CreateDatabase("Bad Name").status().code(), StatusCode::kInvalidArgument);
  {
    auto b = storage.OpenBackend(sales->record);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*b)->database_id(), sales->record.id);  // the file carries the catalog's id
  }
  // Deleting removes the file; opening it again is an error, not a new empty database.
  ASSERT_TRUE(ops.DeleteDatabase("sales").ok());
  EXPECT_FALSE(fs::exists(sales->location));
  EXPECT_FALSE(storage.OpenBackend(sales->record).ok());
  EXPECT_FALSE(fs::exists(sales->location));
  ASSERT_TRUE(ops.CreateDatabase("hr").ok());
  st->reset();
  // Reopening keeps everything.
  auto again = storage::OpenStorage(options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->catalog().ListDatabases()->size(), 2u);
  EXPECT_EQ((*again)->catalog().FindDatabase("default")->id, default_id);
}

TEST(SqliteStorage, SecretsAndDefaultFile) {
  TempDir dir;
  storage::StorageOptions options;
  options.location = (dir.path() / "data").string();
  options.default_database_file = (dir.path() / "elsewhere.sqlite3").string();
  auto st = storage::OpenStorage(options);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  // The data directory is made private; the default database lives in the given file.
  EXPECT_EQ(fs::status(options.location).permissions() & fs::perms::all, fs::perms::owner_all);
  auto def = (*st)->catalog().FindDatabase("default");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ((*st)->Location(*def), options.default_database_file);
  EXPECT_TRUE(fs::exists(options.default_database_file));

  bool created = false;
  int makes = 0;
  auto make = [&makes] { return "s3cret-" + std::to_string(++makes); };
  auto first = (*st)->LoadOrCreateSecret("server-secret", make, &created);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(created);
  EXPECT_EQ(*first, "s3cret-1");
  const fs::path file = (*st)->SecretLocation("server-secret");
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  auto second = (*st)->LoadOrCreateSecret("server-secret", make, &created);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(*second, "s3cret-1");
  EXPECT_EQ(makes, 1);
  // An empty secret file is an error, not a fresh secret.
  std::ofstream(dir.path() / "data" / "empty").put('\n');
  EXPECT_EQ((*st)->LoadOrCreateSecret("empty", make, &created).status().code(),
            StatusCode::kCorruption);
}

TEST(StorageFactory, UnknownKindNamesTheKnownOnes) {
  storage::StorageOptions options;
  options.kind = "cassandra";
  auto st = storage::OpenStorage(options);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.status().message(), "unknown storage kind 'cassandra' (known: sqlite, postgres)");
}

}  // namespace
}  // namespace kvc
