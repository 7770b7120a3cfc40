// The storage kind table (storage/storage_spec.h): every storage spec is parsed and checked in
// one place, before anything is opened or connected to, and an error never repeats what may be a
// password. The CLI's storage flags (cli/flags.h: --storage with --data-dir and --postgres as its
// short forms) resolve through the same parser.
#include "storage/storage_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/flags.h"
#include "common/random.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using storage::ParseStorageSpec;
using storage::StorageOptions;

TEST(StorageSpec, GoodSpecsOfEveryKind) {
  auto s = ParseStorageSpec("sqlite:/data/kv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, "sqlite");
  EXPECT_EQ(s->location, "/data/kv");
  s = ParseStorageSpec("sqlite:relative/dir");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->location, "relative/dir");
  s = ParseStorageSpec("postgres:host=db dbname=kv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, "postgres");
  EXPECT_EQ(s->location, "host=db dbname=kv");
  for (const char* uri :
       {"postgres://u@db/kv", "postgresql://u:pw@db1,db2/kv?target_session_attrs=read-write"}) {
    s = ParseStorageSpec(uri);
    ASSERT_TRUE(s.ok()) << uri << ": " << s.status().ToString();
    EXPECT_EQ(s->kind, "postgres");
    EXPECT_EQ(s->location, uri);  // a URI is its own conninfo
  }
  // A conninfo after postgres: may itself be a URI.
  s = ParseStorageSpec("postgres:postgresql://u@db/kv");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->location, "postgresql://u@db/kv");
}

TEST(StorageSpec, KeepsTheOptionsASpecDoesNotSet) {
  StorageOptions base;
  base.sync = storage::SyncMode::kNormal;
  base.mmap_bytes = 4096;
  base.read_location = "host=standby";
  base.pg.feed_poll_ms = 77;
  auto s = ParseStorageSpec("postgres:host=primary", base);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->location, "host=primary");
  EXPECT_EQ(s->sync, storage::SyncMode::kNormal);
  EXPECT_EQ(s->mmap_bytes, 4096);
  EXPECT_EQ(s->read_location, "host=standby");
  EXPECT_EQ(s->pg.feed_poll_ms, 77);
}

// Each hostile spec is refused as InvalidArgument, and the message never holds the secret.
TEST(StorageSpec, HostileSpecsAreRefusedWithoutEchoingSecrets) {
  const std::string secret = "hunter2secret";
  const std::string specs[] = {
      "",
      "sqlite:",
      "postgres:",
      "mysql:host=db password=" + secret,
      "SQLITE:/data",
      " sqlite:/data",
      "host=db password=" + secret,  // the kind forgotten
      "/var/lib/kvconnect",          // a bare path is no spec
      "postgres:host=db password=" + secret + " bogus",
      "postgres:host='db password=" + secret,  // unterminated quote
      "postgres:password " + secret,
      "postgresql://u:" + secret + "@db/kv?nosuchoption=" + secret,
      std::string("sqlite:/tmp/a\0/etc", 18),
      std::string("postgres:host=db\0 password=x", 28),
  };
  for (const std::string& spec : specs) {
    auto s = ParseStorageSpec(spec);
    ASSERT_FALSE(s.ok()) << "accepted: " << spec;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_EQ(s.status().message().find(secret), std::string::npos)
        << spec << " -> " << s.status().message();
    EXPECT_FALSE(s.status().message().empty());
  }
  // An unknown kind names the accepted forms.
  auto unknown = ParseStorageSpec("mysql:host=db");
  EXPECT_NE(unknown.status().message().find("'mysql:...' is not a storage"), std::string::npos)
      << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("sqlite:DIR"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("postgres:CONNINFO"), std::string::npos);
  // A conninfo libpq refuses keeps the keyword that helps and hides the rest.
  auto bad = ParseStorageSpec("postgres:host=db hots=x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"hots\""), std::string::npos) << bad.status().message();
}

TEST(StorageSpec, OptionsOfAnotherKindAreRefused) {
  StorageOptions sqlite_with_standby;
  sqlite_with_standby.read_location = "host=standby";
  auto s = ParseStorageSpec("sqlite:/data", sqlite_with_standby);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--postgres-read"), std::string::npos);

  StorageOptions postgres_with_file;
  postgres_with_file.default_database_file = "/data/x.sqlite3";
  s = ParseStorageSpec("postgres:host=db", postgres_with_file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--sqlite-path"), std::string::npos);

  StorageOptions bad_standby;
  bad_standby.read_location = "host='standby";
  EXPECT_EQ(ParseStorageSpec("postgres:host=db", bad_standby).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(StorageSpec, OpenStorageChecksFirstAndMakesNothing) {
  const fs::path dir = fs::temp_directory_path() / ("kvc-spec-" + HexEncode(RandomBytes(6)));
  StorageOptions o;
  o.location = dir.string();
  o.read_location = "host=standby";  // not for SQLite
  auto s = storage::OpenStorage(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir));
  o.kind = "oracle";
  EXPECT_EQ(storage::ValidateStorageOptions(o).code(), StatusCode::kInvalidArgument);
  // A conninfo that cannot parse never reaches a connection attempt.
  StorageOptions pg;
  pg.kind = "postgres";
  pg.location = "host='never";
  EXPECT_EQ(storage::OpenStorage(pg).status().code(), StatusCode::kInvalidArgument);
}

TEST(StorageSpec, FormsComeFromTheTable) {
  const std::string forms = storage::StorageSpecForms();
  EXPECT_NE(forms.find("sqlite:DIR"), std::string::npos) << forms;
  EXPECT_NE(forms.find("postgres:CONNINFO"), std::string::npos) << forms;
  EXPECT_NE(forms.find("postgresql://"), std::string::npos) << forms;
}

// --storage wins over --postgres, which wins over --data-dir; all three go through the table.
TEST(StorageFlags, ResolveThroughTheOneParser) {
  auto r = cli::ResolveStorage({"", "./kvconnect-data", ""});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, "sqlite");
  EXPECT_EQ(r->location, "./kvconnect-data");
  r = cli::ResolveStorage({"", "./kvconnect-data", "host=db dbname=kv"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, "postgres");
  EXPECT_EQ(r->location, "host=db dbname=kv");
  r = cli::ResolveStorage({"sqlite:/srv/kv", "./other", "host=db"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, "sqlite");
  EXPECT_EQ(r->location, "/srv/kv");
  // The aliases are checked like a spec: a --postgres libpq cannot parse is refused.
  EXPECT_EQ(cli::ResolveStorage({"", "./kvconnect-data", "host='x"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::ResolveStorage({"", "", ""}).status().code(), StatusCode::kInvalidArgument);
  // A hint names the storage again, never a conninfo.
  EXPECT_EQ(cli::StorageFlagsHint({"", "./kvconnect-data", ""}), "");
  EXPECT_EQ(cli::StorageFlagsHint({"", "mine", ""}), " --data-dir mine");
  EXPECT_EQ(cli::StorageFlagsHint({"sqlite:/srv/kv", "x", ""}), " --storage sqlite:/srv/kv");
  EXPECT_EQ(cli::StorageFlagsHint({"postgres:password=pw host=db", "x", ""}),
            " --storage postgres:CONNINFO");
  EXPECT_EQ(cli::LocalDataDir({"", "d", "host=db"}), "");
  EXPECT_EQ(cli::LocalDataDir({"sqlite:/srv/kv", "d", ""}), "/srv/kv");
}

}  // namespace
}  // namespace kvc
