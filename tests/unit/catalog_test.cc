// The catalog (databases, access tokens), access-token format, the config file,
// --public-url, the rate limiter and the status table.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "auth/tokens.h"
#include "cli/serve.h"
#include "codec/config_json.h"
#include "common/random.h"
#include "service/admin_ops.h"
#include "service/http_status.h"
#include "service/kv_service.h"
#include "service/rate_limiter.h"
#include "storage/sqlite/sqlite_catalog.h"
#include "storage/sqlite/sqlite_storage.h"
#include "storage/storage.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("kvc-unit-" + HexEncode(RandomBytes(6)))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(AccessTokens, ShapeHashAndId) {
  auto t = auth::GenerateAccessToken();
  EXPECT_EQ(t.token.size(), 4u + 16 + 1 + 64);
  EXPECT_EQ(t.token.rfind("kvt_", 0), 0u);
  EXPECT_EQ(auth::AccessTokenId(t.token), t.id);
  EXPECT_EQ(auth::HashAccessToken(t.token), t.hash);
  EXPECT_EQ(t.hash.size(), 64u);
  EXPECT_EQ(t.token.find(t.hash), std::string::npos);  // the hash is not the secret
  EXPECT_NE(auth::GenerateAccessToken().token, t.token);
  // Anything not exactly shaped like a token has no id.
  EXPECT_EQ(auth::AccessTokenId(""), "");
  EXPECT_EQ(auth::AccessTokenId("kvc_0123456789abcdef"), "");
  EXPECT_EQ(auth::AccessTokenId(t.token + "0"), "");
  std::string upper = t.token;
  upper[5] = 'G';
  EXPECT_EQ(auth::AccessTokenId(upper), "");
  std::string no_sep = t.token;
  no_sep[20] = 'a';
  EXPECT_EQ(auth::AccessTokenId(no_sep), "");
}

TEST(AccessTokens, Scopes) {
  EXPECT_EQ(*auth::ParseScope("read"), auth::Scope::kRead);
  EXPECT_EQ(*auth::ParseScope("write"), auth::Scope::kWrite);
  EXPECT_EQ(*auth::ParseScope("admin"), auth::Scope::kAdmin);
  EXPECT_FALSE(auth::ParseScope("root").ok());
  EXPECT_STREQ(auth::ScopeName(auth::Scope::kWrite), "write");
}

TEST(DatabaseNames, Validation) {
  for (const char* ok : {"a", "sales", "hr-2", "x_y", "0db"}) {
    EXPECT_TRUE(storage::IsValidDatabaseName(ok)) << ok;
  }
  for (const char* bad :
       {"", "-a", "_a", "Sales", "a/b", "a b", "a.b", "0b6f3a8e-1111-4222-8333-444455556666"}) {
    EXPECT_FALSE(storage::IsValidDatabaseName(bad)) << bad;
  }
  EXPECT_FALSE(storage::IsValidDatabaseName(std::string(64, 'a')));
  EXPECT_TRUE(storage::IsValidDatabaseName(std::string(63, 'a')));
}

TEST(Catalog, DatabasesAndTokensPersistAndBumpTheCounter) {
  TempDir dir;
  const std::string path = (dir.path() / "catalog.sqlite3").string();
  auto c = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cat = **c;
  const int64_t g0 = *cat.ChangeCounter();
  ASSERT_TRUE(cat.AddDatabase({"0b6f3a8e-1111-4222-8333-444455556666", "sales", "s.db", 5}).ok());
  EXPECT_GT(*cat.ChangeCounter(), g0);
  EXPECT_EQ(cat.AddDatabase({"0b6f3a8e-1111-4222-8333-444455556666", "other", "o.db", 5}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.AddDatabase({"1b6f3a8e-1111-4222-8333-444455556666", "sales", "o.db", 5}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.FindDatabase("sales")->location, "s.db");
  EXPECT_EQ(cat.FindDatabase("0B6F3A8E-1111-4222-8333-444455556666")->name, "sales");
  EXPECT_EQ(cat.FindDatabase("nope").status().code(), StatusCode::kNotFound);

  storage::AccessTokenRecord t;
  t.id = "00112233445566aa";
  t.name = "ci";
  t.database_ids = {"0b6f3a8e-1111-4222-8333-444455556666"};
  t.scope = 1;
  t.hash = std::string(64, 'f');
  t.created_ms = 7;
  t.expires_ms = 99;
  t.rate_limit = 12.5;
  ASSERT_TRUE(cat.AddToken(t).ok());
  EXPECT_EQ(cat.AddToken(t).code(), StatusCode::kAlreadyExists);

  ASSERT_TRUE(cat.RenameDatabase("0b6f3a8e-1111-4222-8333-444455556666", "sales2").ok());
  EXPECT_EQ(cat.RenameDatabase("nope", "x").code(), StatusCode::kNotFound);
  ASSERT_TRUE(cat.AddDatabase({"2b6f3a8e-1111-4222-8333-444455556666", "hr", "h.db", 5}).ok());
  EXPECT_EQ(cat.RenameDatabase("2b6f3a8e-1111-4222-8333-444455556666", "sales2").code(),
            StatusCode::kAlreadyExists);

  // Another connection (another process, in real life) sees everything and the counter.
  auto c2 = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(c2.ok());
  auto tok = (*c2)->FindToken("00112233445566aa");
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->name, "ci");
  EXPECT_EQ(tok->scope, 1);
  EXPECT_EQ(tok->expires_ms, 99);
  EXPECT_DOUBLE_EQ(tok->rate_limit, 12.5);
  EXPECT_EQ(tok->revoked_ms, 0);
  const int64_t g1 = *(*c2)->ChangeCounter();
  ASSERT_TRUE((*c2)->RevokeToken("00112233445566aa", 1234).ok());
  EXPECT_GT(*cat.ChangeCounter(), g1);
  EXPECT_EQ(cat.FindToken("00112233445566aa")->revoked_ms, 1234);
  EXPECT_EQ(cat.RevokeToken("00112233445566aa", 1).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(cat.RevokeToken("ffffffffffffffff", 1).code(), StatusCode::kNotFound);

  // Removing a database revokes its tokens in the same transaction.
  t.id = "00112233445566bb";
  t.database_ids = {"2b6f3a8e-1111-4222-8333-444455556666"};
  ASSERT_TRUE(cat.AddToken(t).ok());
  ASSERT_TRUE(cat.RemoveDatabase("2b6f3a8e-1111-4222-8333-444455556666", 777).ok());
  EXPECT_EQ(cat.FindToken("00112233445566bb")->revoked_ms, 777);
  EXPECT_EQ(cat.FindDatabase("hr").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cat.ListDatabases()->size(), 1u);
  EXPECT_EQ(cat.ListTokens()->size(), 2u);
}

constexpr const char* kDbA = "0a6f3a8e-1111-4222-8333-444455556666";
constexpr const char* kDbB = "0b6f3a8e-1111-4222-8333-444455556666";
constexpr const char* kDbC = "0c6f3a8e-1111-4222-8333-444455556666";

storage::AccessTokenRecord TokenFor(const std::string& id, std::vector<std::string> dbs,
                                    bool all = false) {
  storage::AccessTokenRecord t;
  t.id = id;
  t.name = id;
  t.database_ids = std::move(dbs);
  t.all_databases = all;
  t.scope = 2;
  t.hash = std::string(64, 'e');
  t.created_ms = 1;
  return t;
}

// A token of several databases keeps them in order; removing one of its databases takes that
// one off its list (revoked only when it was the last); all-databases tokens stay as they are.
TEST(Catalog, TokensOfSeveralOrAllDatabases) {
  TempDir dir;
  const std::string path = (dir.path() / "catalog.sqlite3").string();
  auto c = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto& cat = **c;
  for (const char* id : {kDbA, kDbB, kDbC}) {
    ASSERT_TRUE(cat.AddDatabase({id, std::string("db") + id[1], "x.db", 5}).ok());
  }
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a1", {kDbB, kDbA})).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a2", {kDbB})).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a3", {}, /*all=*/true)).ok());
  ASSERT_TRUE(cat.AddToken(TokenFor("00000000000000a4", {kDbC, kDbB})).ok());
  auto multi = cat.FindToken("00000000000000a1");
  ASSERT_TRUE(multi.ok());
  EXPECT_EQ(multi->database_ids, (std::vector<std::string>{kDbB, kDbA}));
  EXPECT_FALSE(multi->all_databases);
  auto all = cat.FindToken("00000000000000a3");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->all_databases);
  EXPECT_TRUE(all->database_ids.empty());
  EXPECT_TRUE(storage::TokenOpensDatabase(*all, "ffffffff-1111-4222-8333-444455556666"));
  EXPECT_TRUE(storage::TokenOpensDatabase(*multi, kDbA));
  EXPECT_FALSE(storage::TokenOpensDatabase(*multi, kDbC));

  ASSERT_TRUE(cat.RemoveDatabase(kDbB, 900).ok());
  auto reopened = storage::SqliteCatalog::Open(path);  // as another process sees it
  ASSERT_TRUE(reopened.ok());
  auto tokens = (*reopened)->ListTokens();
  ASSERT_TRUE(tokens.ok());
  std::map<std::string, storage::AccessTokenRecord> by_id;
  for (auto& t : *tokens) by_id[t.id] = t;
  EXPECT_EQ(by_id["00000000000000a1"].database_ids, std::vector<std::string>{kDbA});
  EXPECT_EQ(by_id["00000000000000a1"].revoked_ms, 0) << "it still opens A";
  EXPECT_EQ(by_id["00000000000000a2"].database_ids, std::vector<std::string>{kDbB});
  EXPECT_EQ(by_id["00000000000000a2"].revoked_ms, 900) << "B was all it opened";
  EXPECT_TRUE(by_id["00000000000000a3"].all_databases);
  EXPECT_EQ(by_id["00000000000000a3"].revoked_ms, 0);
  EXPECT_EQ(by_id["00000000000000a4"].database_ids, std::vector<std::string>{kDbC});
  EXPECT_EQ(by_id["00000000000000a4"].revoked_ms, 0);

  ASSERT_TRUE(cat.RemoveDatabase(kDbA, 950).ok());
  auto last = cat.FindToken("00000000000000a1");
  EXPECT_EQ(last->database_ids, std::vector<std::string>{kDbA});
  EXPECT_EQ(last->revoked_ms, 950);
  EXPECT_EQ(cat.FindToken("00000000000000a3")->revoked_ms, 0);
  EXPECT_EQ(cat.FindToken("00000000000000a2")->revoked_ms, 900) << "revoked once, not again";
}

// The catalog of schema version 1 (before tokens of several databases), as an older kvconnect
// wrote it, opens; its tokens keep their one database, and a kvconnect of that age reading the
// migrated file sees a token of several databases as one of its first database and an
// all-databases token as one of no database, never as the bootstrap token (an empty id).
TEST(Catalog, OldSchemaOpensAndItsTokensKeepWorking) {
  TempDir dir;
  const std::string path = (dir.path() / "catalog.sqlite3").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* v1 = R"sql(
      create table catalog_meta (k text primary key, v integer not null);
      insert into catalog_meta (k, v) values ('schema_version', 1), ('generation', 7);
      create table databases (id text primary key, name text not null unique, path text not null,
                              created_ms integer not null);
      create table access_tokens (id text primary key, name text not null,
        database_id text not null, scope integer not null, hash text not null,
        created_ms integer not null, expires_ms integer not null default 0,
        revoked_ms integer not null default 0, rate_limit real not null default -1);
      create index access_tokens_by_db on access_tokens (database_id);
      insert into databases values ('0a6f3a8e-1111-4222-8333-444455556666', 'sales', 's.db', 3);
      insert into access_tokens values ('00000000000000b1', 'old', '0a6f3a8e-1111-4222-8333-444455556666',
                                        1, 'abc', 4, 0, 0, 2.5);
    )sql";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto c = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto old = (*c)->FindToken("00000000000000b1");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->database_ids, std::vector<std::string>{kDbA});
  EXPECT_FALSE(old->all_databases);
  EXPECT_EQ(old->scope, 1);
  EXPECT_DOUBLE_EQ(old->rate_limit, 2.5);
  EXPECT_GT(*(*c)->ChangeCounter(), 7);
  ASSERT_TRUE((*c)->AddToken(TokenFor("00000000000000b2", {kDbA, kDbB})).ok());
  ASSERT_TRUE((*c)->AddToken(TokenFor("00000000000000b3", {}, /*all=*/true)).ok());
  // Opening again (the migration is done once) changes nothing.
  c->reset();
  auto again = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->ListTokens()->size(), 3u);
  EXPECT_EQ((*again)->FindToken("00000000000000b2")->database_ids,
            (std::vector<std::string>{kDbA, kDbB}));
  again->reset();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto column = [db](const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    std::string out = "?";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return out;
  };
  EXPECT_EQ(column("select v from catalog_meta where k = 'schema_version'"), "2");
  EXPECT_EQ(column("select database_id from access_tokens where id = '00000000000000b2'"), kDbA);
  EXPECT_EQ(column("select database_id from access_tokens where id = '00000000000000b3'"),
            storage::kNoDatabaseId);
  // A row an older kvconnect adds to the migrated file (no database_ids) opens its database.
  ASSERT_EQ(sqlite3_exec(db,
                         "insert into access_tokens (id, name, database_id, scope, hash, "
                         "created_ms) values ('00000000000000b4', 'older', "
                         "'0b6f3a8e-1111-4222-8333-444455556666', 2, 'def', 5)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  // A catalog of a later schema is refused rather than misread.
  ASSERT_EQ(sqlite3_exec(db, "update catalog_meta set v = 3 where k = 'schema_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto newer = storage::SqliteCatalog::Open(path);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer kvconnect"), std::string::npos)
      << newer.status().ToString();
  db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "update catalog_meta set v = 2 where k = 'schema_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto back = storage::SqliteCatalog::Open(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)->FindToken("00000000000000b4")->database_ids, std::vector<std::string>{kDbB});
}

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

TEST(ConfigFile, KeysTypesAndUnknownKeys) {
  auto ok = codec::ParseConfigFile(
      R"({"addr":"0.0.0.0:4512","max_body_bytes":2048,"rate_limit_rps":2.5,"sync":"normal"})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 4u);
  EXPECT_EQ((*ok)[0], (std::pair<std::string, std::string>{"addr", "0.0.0.0:4512"}));
  EXPECT_EQ((*ok)[1].second, "2048");
  EXPECT_EQ((*ok)[2].second, "2.5");

  auto unknown = codec::ParseConfigFile(R"({"addr":"x:1","max_bodyy_bytes":1})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown key 'max_bodyy_bytes'"), std::string::npos);

  auto wrong_type = codec::ParseConfigFile(R"({"max_body_bytes":"big"})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("'max_body_bytes'"), std::string::npos)
      << wrong_type.status().message();

  auto too_small = codec::ParseConfigFile(R"({"max_body_bytes":1})");
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("at least 1024"), std::string::npos)
      << too_small.status().message();

  EXPECT_FALSE(codec::ParseConfigFile(R"({"sync":"sometimes"})").ok());
  EXPECT_FALSE(codec::ParseConfigFile("[1]").ok());
  auto broken = codec::ParseConfigFile("{\"addr\": ");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("malformed JSON"), std::string::npos);
}

// Every serve flag has a schema key and every schema key a flag, so the config file and the
// command line cannot drift apart.
TEST(ConfigFile, SchemaMatchesServeFlags) {
  CLI::App app;
  cli::ServeConfig config;
  CLI::App* serve = cli::AddServeCommand(app, &config);
  std::set<std::string> flags;
  for (const CLI::Option* o : serve->get_options()) {
    for (std::string name : o->get_lnames()) {
      if (name == "help" || name == "config") continue;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      flags.insert(name);
    }
  }
  const auto keys = codec::ConfigKeys();
  const std::set<std::string> schema(keys.begin(), keys.end());
  EXPECT_EQ(flags, schema);
}

TEST(ConfigFile, FlagsOverrideTheFile) {
  TempDir dir;
  const fs::path file = dir.path() / "config.json";
  std::ofstream(file) << R"({"addr":"0.0.0.0:9999","max_body_bytes":4096,"idle_timeout_ms":1234})";
  CLI::App app;
  cli::ServeConfig config;
  CLI::App* serve = cli::AddServeCommand(app, &config);
  std::vector<std::string> args = {"kvconnect",   "serve",  "--config",
                                   file.string(), "--addr", "127.0.0.1:1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli::ApplyServeConfigFile(serve, config).ok());
  EXPECT_EQ(config.addr, "127.0.0.1:1");                          // flag wins
  EXPECT_EQ(config.net.max_body_bytes, 4096u);                    // from the file
  EXPECT_EQ(config.net.idle_timeout.count(), 1234);               // via an option callback
  std::ofstream(file) << R"({"addr":"0.0.0.0:9999","bogus":1})";  // truncates and rewrites
  cli::ServeConfig c2;
  CLI::App app2;
  CLI::App* s2 = cli::AddServeCommand(app2, &c2);
  app2.parse(static_cast<int>(argv.size()), argv.data());
  Status s = cli::ApplyServeConfigFile(s2, c2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'bogus'"), std::string::npos) << s.message();
}

// --portable-v8-values is on by default; `=false` or the config file's false turn it off.
TEST(ConfigFile, PortableV8ValuesSwitch) {
  auto parse = [](std::vector<std::string> args, const std::string& file_json) {
    TempDir dir;
    const fs::path file = dir.path() / "config.json";
    if (!file_json.empty()) {
      std::ofstream(file) << file_json;
      args.insert(args.end(), {"--config", file.string()});
    }
    CLI::App app;
    cli::ServeConfig config;
    CLI::App* serve = cli::AddServeCommand(app, &config);
    args.insert(args.begin(), {"kvconnect", "serve"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
    EXPECT_TRUE(cli::ApplyServeConfigFile(serve, config).ok());
    return config.service.portable_v8_values;
  };
  EXPECT_TRUE(parse({}, ""));
  EXPECT_FALSE(parse({"--portable-v8-values=false"}, ""));
  EXPECT_TRUE(parse({"--portable-v8-values"}, ""));
  EXPECT_FALSE(parse({}, R"({"portable_v8_values": false})"));
  EXPECT_TRUE(parse({}, R"({"portable_v8_values": true})"));
  EXPECT_TRUE(parse({"--portable-v8-values=true"}, R"({"portable_v8_values": false})"));
  EXPECT_FALSE(codec::ParseConfigFile(R"({"portable_v8_values": "no"})").ok());
}

TEST(RateLimiter, BucketRefillsAtTheRate) {
  service::RateLimiter rl;
  const auto t0 = service::RateLimiter::Clock::now();
  int allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += rl.Allow("a", 10, 5, t0);
  EXPECT_EQ(allowed, 5);                  // the burst
  EXPECT_TRUE(rl.Allow("b", 10, 5, t0));  // buckets are per key
  // 0.5 s later: 5 more.
  allowed = 0;
  for (int i = 0; i < 20; ++i) allowed += rl.Allow("a", 10, 5, t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(allowed, 5);
  EXPECT_TRUE(rl.Allow("a", 0, 0, t0));  // rate 0: unlimited
}

TEST(RateLimiter, RefusalsSayWhenToRetry) {
  service::RateLimiter rl;
  const auto t0 = service::RateLimiter::Clock::now();
  service::RateLimiter::Clock::duration wait{};
  EXPECT_TRUE(rl.Allow("a", 4, 1, t0, &wait));
  EXPECT_FALSE(rl.Allow("a", 4, 1, t0, &wait));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(), 250);
  // 100 ms later, 0.4 of a request has refilled: 150 ms to go.
  EXPECT_FALSE(rl.Allow("a", 4, 1, t0 + std::chrono::milliseconds(100), &wait));
  using DoubleMs = std::chrono::duration<double, std::milli>;
  EXPECT_NEAR(std::chrono::duration_cast<DoubleMs>(wait).count(), 150, 0.01);
  EXPECT_TRUE(rl.Allow("a", 4, 1, t0 + std::chrono::milliseconds(300), &wait));
}

TEST(StatusTable, ThrottledIs503WithRetryAfterAndQuotasStay429) {
  EXPECT_EQ(service::HttpStatusFor(StatusCode::kThrottled), 503);
  EXPECT_EQ(service::HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(static_cast<int>(StatusCode::kThrottled), 12);  // do not renumber
  auto header = [](const service::HttpResponse& r) {
    for (const auto& [k, v] : r.headers) {
      if (k == "retry-after") return v;
    }
    return std::string("(none)");
  };
  // Whole seconds, rounded up, at least 1.
  for (auto [ms, seconds] : std::vector<std::pair<int64_t, std::string>>{
           {1, "1"}, {999, "1"}, {1000, "1"}, {1001, "2"}, {2500, "3"}}) {
    const service::HttpResponse r = service::ErrorResponse(Throttled("slow down", ms));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.body, "slow down");
    EXPECT_EQ(header(r), seconds) << ms;
  }
  // No hint, no header; the hint survives KVC_RETURN_IF_ERROR-style copies.
  EXPECT_EQ(header(service::ErrorResponse(Unavailable("busy"))), "(none)");
  EXPECT_EQ(header(service::ErrorResponse(ResourceExhausted("quota used up"))), "(none)");
  const Status copy = Throttled("x", 42);
  EXPECT_EQ(copy.retry_after_ms(), 42);
  EXPECT_EQ(copy.ToString(), "THROTTLED: x");
}

TEST(PublicUrl, NormalizedOrRefused) {
  const std::pair<const char*, const char*> good[] = {
      {"https://kv.example.com", "https://kv.example.com"},
      {"https://kv.example.com/", "https://kv.example.com"},
      {"HTTP://kv.example.com:8080//", "http://kv.example.com:8080"},
      {"https://kv.example.com/base/", "https://kv.example.com/base"},
      {"http://[::1]:4512", "http://[::1]:4512"},
      {"http://127.0.0.1:4512", "http://127.0.0.1:4512"},
  };
  for (const auto& [in, out] : good) {
    auto r = service::NormalizePublicUrl(in);
    ASSERT_TRUE(r.ok()) << in << ": " << r.status().ToString();
    EXPECT_EQ(*r, out);
  }
  for (const char* bad :
       {"", "kv.example.com", "ftp://kv.example.com", "https://", "https:///v2",
        "https://kv.example.com/?x=1", "https://kv.example.com#f", "https://user@kv.example.com",
        "https://kv example.com", "https://kv.example.com/a b", "wss://kv.example.com"}) {
    auto r = service::NormalizePublicUrl(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The config file's schema refuses what the flag refuses (the flag check runs as well).
  EXPECT_TRUE(codec::ParseConfigFile(R"({"public_url":"https://kv.example.com/"})").ok());
  EXPECT_TRUE(codec::ParseConfigFile(R"({"public_url":"http://h:1/base"})").ok());
  for (const char* bad : {R"({"public_url":"ftp://h"})", R"({"public_url":"https://h/?q"})",
                          R"({"public_url":"h"})", R"({"public_url":1})"}) {
    EXPECT_FALSE(codec::ParseConfigFile(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kvc
