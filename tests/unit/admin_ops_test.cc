// service::AdminOps: the database and token rules behind `kvconnect db|token`, on a real
// SqliteCatalog in a temp dir, a fake provisioner (storage in a set, failures on demand) and a
// manual clock.
#include "service/admin/admin_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "auth/tokens.h"
#include "common/random.h"
#include "storage/sqlite/sqlite_catalog.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;

constexpr int64_t kStartMs = 1'800'000'000'000;
constexpr int64_t kHourMs = 3600 * 1000;

// Databases "stored" as entries of a set; the n-th id is a UUID ending in n.
class FakeProvisioner : public storage::DatabaseProvisioner {
 public:
  Result<storage::DatabaseRecord> Create(const std::string& name) override {
    ++creates;
    if (!fail_create.ok()) return fail_create;
    storage::DatabaseRecord rec;
    char id[40];
    std::snprintf(id, sizeof id, "0b6f3a8e-1111-4222-8333-%012d", next_id++);
    rec.id = id;
    rec.name = name;
    rec.location = "fake-" + rec.id;
    stored.insert(rec.location);
    return rec;
  }
  Status Destroy(const storage::DatabaseRecord& database) override {
    destroyed.push_back(database.location);
    stored.erase(database.location);
    return fail_destroy;
  }
  std::string Location(const storage::DatabaseRecord& database) const override {
    return "mem:" + database.location;
  }

  int next_id = 1;
  int creates = 0;
  Status fail_create;
  Status fail_destroy;
  std::set<std::string> stored;
  std::vector<std::string> destroyed;
};

class AdminOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-admin-ops-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    auto c = storage::SqliteCatalog::Open((dir_ / "catalog.sqlite3").string());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
    // As SqliteStorage registers it.
    ASSERT_TRUE(catalog_->AddDatabase({kDefaultId, "default", "default.sqlite3", 1}).ok());
    ops_ = std::make_unique<service::AdminOps>(catalog_.get(), &provisioner_, &clock_);
  }
  void TearDown() override {
    ops_.reset();
    catalog_.reset();
    fs::remove_all(dir_);
  }

  service::CreatedToken MakeToken(const std::string& db, const std::string& scope,
                                  const std::string& expires = "never") {
    service::TokenRequest req;
    req.databases = {db};
    req.scope = scope;
    req.expires = expires;
    auto t = ops_->CreateToken(req);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : service::CreatedToken{};
  }

  static constexpr const char* kDefaultId = "ffffffff-1111-4222-8333-444455556666";
  fs::path dir_;
  std::unique_ptr<storage::SqliteCatalog> catalog_;
  FakeProvisioner provisioner_;
  ManualClock clock_{kStartMs};
  std::unique_ptr<service::AdminOps> ops_;
};

TEST(AdminOpsDurations, Parse) {
  EXPECT_EQ(service::ParseDurationMs("never"), 0);
  EXPECT_EQ(service::ParseDurationMs(""), 0);
  EXPECT_EQ(service::ParseDurationMs("45s"), 45000);
  EXPECT_EQ(service::ParseDurationMs("90m"), 90 * 60000);
  EXPECT_EQ(service::ParseDurationMs("12h"), 12 * 3600000LL);
  EXPECT_EQ(service::ParseDurationMs("30d"), 30 * 86400000LL);
  EXPECT_EQ(service::ParseDurationMs("2w"), 14 * 86400000LL);
  for (const char* bad : {"0d", "-1d", "d", "10", "10x", "1.5h", "1dd", "99999999999999999999d"}) {
    EXPECT_EQ(service::ParseDurationMs(bad), -1) << bad;
  }
}

TEST(AdminOpsTokenStatus, RevokedWinsAndExpiryIsInclusive) {
  storage::AccessTokenRecord t;
  EXPECT_EQ(service::StatusOfToken(t, kStartMs), service::TokenStatus::kActive);
  t.expires_ms = kStartMs;
  EXPECT_EQ(service::StatusOfToken(t, kStartMs - 1), service::TokenStatus::kActive);
  EXPECT_EQ(service::StatusOfToken(t, kStartMs), service::TokenStatus::kExpired);
  t.revoked_ms = kStartMs - 5;
  EXPECT_EQ(service::StatusOfToken(t, kStartMs), service::TokenStatus::kRevoked);
  EXPECT_STREQ(service::TokenStatusName(service::TokenStatus::kActive), "active");
  EXPECT_STREQ(service::TokenStatusName(service::TokenStatus::kRevoked), "revoked");
  EXPECT_STREQ(service::TokenStatusName(service::TokenStatus::kExpired), "expired");
}

TEST_F(AdminOpsTest, CreateAndListDatabases) {
  auto sales = ops_->CreateDatabase("sales");
  ASSERT_TRUE(sales.ok()) << sales.status().ToString();
  EXPECT_EQ(sales->record.name, "sales");
  EXPECT_EQ(sales->record.created_ms, kStartMs);
  EXPECT_EQ(sales->location, "mem:" + sales->record.location);
  EXPECT_TRUE(provisioner_.stored.count(sales->record.location));
  EXPECT_EQ(catalog_->FindDatabase("sales")->id, sales->record.id);

  auto list = ops_->ListDatabases();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].record.name, "default");
  EXPECT_EQ((*list)[0].location, "mem:default.sqlite3");
  EXPECT_EQ((*list)[1].record.id, sales->record.id);
  EXPECT_EQ((*list)[1].location, sales->location);
}

TEST_F(AdminOpsTest, CreateDatabaseErrors) {
  ASSERT_TRUE(ops_->CreateDatabase("sales").ok());
  const int creates = provisioner_.creates;

  auto bad = ops_->CreateDatabase("Bad Name");
  EXPECT_EQ(bad.status(), InvalidArgument("invalid database name 'Bad Name': use 1-63 characters "
                                          "a-z, 0-9, '-' and '_', starting with a letter or digit "
                                          "(and not shaped like a UUID)"));
  auto taken = ops_->CreateDatabase("sales");
  EXPECT_EQ(taken.status(), AlreadyExists("a database named 'sales' already exists"));
  EXPECT_EQ(ops_->CreateDatabase("default").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(provisioner_.creates, creates) << "no storage made for refused names";

  provisioner_.fail_create = Internal("cannot open x: disk full");
  EXPECT_EQ(ops_->CreateDatabase("hr").status(), Internal("cannot open x: disk full"));
  EXPECT_EQ(catalog_->FindDatabase("hr").status().code(), StatusCode::kNotFound);
}

TEST_F(AdminOpsTest, StorageTheCatalogRefusesIsDestroyed) {
  auto first = ops_->CreateDatabase("sales");
  ASSERT_TRUE(first.ok());
  provisioner_.next_id = 1;  // the next storage carries the same id as "sales"
  auto dup = ops_->CreateDatabase("hr");
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists) << dup.status().ToString();
  ASSERT_EQ(provisioner_.destroyed.size(), 1u);
  EXPECT_EQ(provisioner_.destroyed[0], "fake-" + first->record.id);
  EXPECT_EQ(catalog_->ListDatabases()->size(), 2u);
}

TEST_F(AdminOpsTest, RenameKeepsIdAndTokens) {
  auto hr = ops_->CreateDatabase("hr");
  ASSERT_TRUE(hr.ok());
  const auto tok = MakeToken("hr", "write");

  auto renamed = ops_->RenameDatabase("hr", "people");
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  EXPECT_EQ(renamed->old_name, "hr");
  EXPECT_EQ(renamed->record.name, "people");
  EXPECT_EQ(renamed->record.id, hr->record.id);
  EXPECT_EQ(catalog_->FindDatabase("people")->id, hr->record.id);
  EXPECT_EQ(catalog_->FindDatabase("hr").status().code(), StatusCode::kNotFound);
  auto tokens = ops_->ListTokens("people");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].record.id, tok.record.id);
  EXPECT_EQ((*tokens)[0].database_names, std::vector<std::string>{"people"});

  // By id, too.
  auto again = ops_->RenameDatabase(hr->record.id, "staff");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->old_name, "people");
}

TEST_F(AdminOpsTest, RenameErrors) {
  ASSERT_TRUE(ops_->CreateDatabase("sales").ok());
  ASSERT_TRUE(ops_->CreateDatabase("hr").ok());
  EXPECT_EQ(ops_->RenameDatabase("default", "main").status(),
            InvalidArgument("the database named default cannot be renamed"));
  EXPECT_EQ(ops_->RenameDatabase(kDefaultId, "main").status(),
            InvalidArgument("the database named default cannot be renamed"));
  EXPECT_EQ(ops_->RenameDatabase("nope", "x").status(), NotFound("Database 'nope' not found."));
  EXPECT_EQ(ops_->RenameDatabase("sales", "Bad").status(),
            InvalidArgument("invalid database name 'Bad'"));
  EXPECT_EQ(ops_->RenameDatabase("sales", "hr").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(catalog_->FindDatabase("sales")->name, "sales");
}

TEST_F(AdminOpsTest, DeleteRemovesStorageAndRevokesTokens) {
  auto hr = ops_->CreateDatabase("hr");
  ASSERT_TRUE(hr.ok());
  const auto tok = MakeToken("hr", "read");

  auto check = ops_->CheckDeletable(hr->record.id);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->name, "hr");
  EXPECT_TRUE(catalog_->FindDatabase("hr").ok()) << "CheckDeletable deletes nothing";

  clock_.Advance(kHourMs);
  auto gone = ops_->DeleteDatabase("hr");
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->id, hr->record.id);
  EXPECT_EQ(provisioner_.destroyed, std::vector<std::string>{hr->record.location});
  EXPECT_FALSE(provisioner_.stored.count(hr->record.location));
  EXPECT_EQ(catalog_->FindDatabase("hr").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ops_->ListDatabases()->size(), 1u);

  auto tokens = ops_->ListTokens("");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].record.id, tok.record.id);
  EXPECT_EQ((*tokens)[0].database_names, std::vector<std::string>{""}) << "its database is gone";
  EXPECT_EQ((*tokens)[0].status, service::TokenStatus::kRevoked);
  EXPECT_EQ((*tokens)[0].record.revoked_ms, kStartMs + kHourMs);
}

TEST_F(AdminOpsTest, DeleteErrors) {
  EXPECT_EQ(ops_->CheckDeletable("default").status(),
            InvalidArgument("the database named default cannot be deleted"));
  EXPECT_EQ(ops_->DeleteDatabase("default").status(),
            InvalidArgument("the database named default cannot be deleted"));
  EXPECT_EQ(ops_->DeleteDatabase(kDefaultId).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ops_->CheckDeletable("nope").status(), NotFound("Database 'nope' not found."));
  EXPECT_EQ(ops_->DeleteDatabase("nope").status(), NotFound("Database 'nope' not found."));
  EXPECT_TRUE(provisioner_.destroyed.empty());

  // Storage that cannot be removed is reported; the catalog entry is gone by then.
  ASSERT_TRUE(ops_->CreateDatabase("hr").ok());
  provisioner_.fail_destroy = Internal("cannot remove");
  EXPECT_EQ(ops_->DeleteDatabase("hr").status(), Internal("cannot remove"));
  EXPECT_EQ(catalog_->FindDatabase("hr").status().code(), StatusCode::kNotFound);
}

TEST_F(AdminOpsTest, CreateToken) {
  auto sales = ops_->CreateDatabase("sales");
  ASSERT_TRUE(sales.ok());
  service::TokenRequest req;
  req.databases = {sales->record.id};
  req.scope = "admin";
  req.expires = "12h";
  req.name = "ci";
  req.rate_limit = 2.5;
  auto t = ops_->CreateToken(req);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->scope, auth::Scope::kAdmin);
  EXPECT_EQ(t->database_names, std::vector<std::string>{"sales"});
  EXPECT_EQ(auth::AccessTokenId(t->token), t->record.id);
  EXPECT_EQ(auth::HashAccessToken(t->token), t->record.hash);
  EXPECT_EQ(t->record.name, "ci");
  EXPECT_EQ(t->record.database_ids, std::vector<std::string>{sales->record.id});
  EXPECT_FALSE(t->record.all_databases);
  EXPECT_EQ(t->record.scope, static_cast<int>(auth::Scope::kAdmin));
  EXPECT_EQ(t->record.created_ms, kStartMs);
  EXPECT_EQ(t->record.expires_ms, kStartMs + 12 * kHourMs);
  EXPECT_EQ(t->record.rate_limit, 2.5);

  auto stored = catalog_->FindToken(t->record.id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->hash, t->record.hash);
  EXPECT_EQ(stored->expires_ms, t->record.expires_ms);
  EXPECT_EQ(stored->rate_limit, 2.5);

  const auto never = MakeToken("sales", "read");
  EXPECT_EQ(never.record.expires_ms, 0);
  EXPECT_EQ(never.record.rate_limit, -1) << "the server's default";
  req.rate_limit = 0;
  EXPECT_EQ(ops_->CreateToken(req)->record.rate_limit, 0) << "unlimited";
  req.rate_limit = -3;
  EXPECT_EQ(ops_->CreateToken(req)->record.rate_limit, -1);
  EXPECT_NE(MakeToken("sales", "read").token, never.token);
}

TEST_F(AdminOpsTest, CreateTokenErrors) {
  service::TokenRequest req;
  req.databases = {"nope"};
  req.scope = "root";
  req.expires = "5x";
  // The database is checked first, then the scope, then the lifetime.
  EXPECT_EQ(ops_->CreateToken(req).status(), NotFound("Database 'nope' not found."));
  req.databases = {"default"};
  EXPECT_EQ(ops_->CreateToken(req).status(),
            InvalidArgument("unknown scope 'root'; expected read, write, admin or queue"));
  req.scope = "write";
  EXPECT_EQ(ops_->CreateToken(req).status(),
            InvalidArgument("invalid --expires '5x': use e.g. 30d, 12h, 90m, 45s, 2w or never"));
  req.expires = "9223372036854775s";  // passes ParseDurationMs, but now + lifetime overflows
  EXPECT_EQ(ops_->CreateToken(req).status().code(), StatusCode::kInvalidArgument);
  req.expires = "1d";
  for (double rate : {std::numeric_limits<double>::infinity(),
                      -std::numeric_limits<double>::infinity(), std::nan("")}) {
    req.rate_limit = rate;
    EXPECT_EQ(ops_->CreateToken(req).status().code(), StatusCode::kInvalidArgument) << rate;
  }
  EXPECT_TRUE(catalog_->ListTokens()->empty()) << "no token made for a refused request";
}

// Tokens of several databases (each named once, by name or id) or of all; a listing filtered by
// one database shows the tokens that open it; deleting one of a token's databases leaves it
// the others.
TEST_F(AdminOpsTest, TokensOfSeveralOrAllDatabases) {
  auto sales = ops_->CreateDatabase("sales");
  auto hr = ops_->CreateDatabase("hr");
  ASSERT_TRUE(sales.ok() && hr.ok());
  service::TokenRequest req;
  req.databases = {"sales", hr->record.id, sales->record.id};
  req.scope = "write";
  auto multi = ops_->CreateToken(req);
  ASSERT_TRUE(multi.ok()) << multi.status().ToString();
  EXPECT_EQ(multi->record.database_ids,
            (std::vector<std::string>{sales->record.id, hr->record.id}));
  EXPECT_EQ(multi->database_names, (std::vector<std::string>{"sales", "hr"}));
  EXPECT_FALSE(multi->record.all_databases);
  req.databases.clear();
  req.all_databases = true;
  req.scope = "admin";
  auto all = ops_->CreateToken(req);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->record.all_databases);
  EXPECT_TRUE(all->record.database_ids.empty());
  const auto one = MakeToken("default", "read");

  // Token ids of a listing, sorted (the tokens here share one creation time).
  auto ids = [](const Result<std::vector<service::TokenInfo>>& list) {
    std::set<std::string> out;
    if (list.ok()) {
      for (const auto& t : *list) out.insert(t.record.id);
    }
    return out;
  };
  EXPECT_EQ(ids(ops_->ListTokens("hr")), (std::set<std::string>{multi->record.id, all->record.id}));
  EXPECT_EQ(ids(ops_->ListTokens("default")),
            (std::set<std::string>{all->record.id, one.record.id}));
  EXPECT_EQ(ids(ops_->ListTokens("")).size(), 3u);

  ASSERT_TRUE(ops_->DeleteDatabase("sales").ok());
  auto listed = ops_->ListTokens("hr");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  for (const service::TokenInfo& t : *listed) {
    EXPECT_EQ(t.status, service::TokenStatus::kActive) << t.record.id;
    if (t.record.id == multi->record.id) {
      EXPECT_EQ(t.database_names, std::vector<std::string>{"hr"});
    } else {
      EXPECT_TRUE(t.database_names.empty());
      EXPECT_TRUE(t.record.all_databases);
    }
  }
}

TEST_F(AdminOpsTest, TokenDatabasesMustBeNamedOneWay) {
  ASSERT_TRUE(ops_->CreateDatabase("sales").ok());
  service::TokenRequest req;
  req.scope = "read";
  EXPECT_EQ(ops_->CreateToken(req).status(),
            InvalidArgument(
                "name the database the token opens (--db NAME, repeatable) or --all-databases"));
  req.databases = {"sales"};
  req.all_databases = true;
  EXPECT_EQ(ops_->CreateToken(req).status(),
            InvalidArgument("name databases (--db) or all of them (--all-databases), not both"));
  req.all_databases = false;
  req.databases = {"sales", "nope"};
  EXPECT_EQ(ops_->CreateToken(req).status(), NotFound("Database 'nope' not found."));
  EXPECT_TRUE(catalog_->ListTokens()->empty()) << "no token made for a refused request";
}

TEST_F(AdminOpsTest, ListTokensFiltersNamesAndStatus) {
  ASSERT_TRUE(ops_->CreateDatabase("sales").ok());
  auto hr = ops_->CreateDatabase("hr");
  ASSERT_TRUE(hr.ok());
  const auto a = MakeToken("sales", "write", "1h");
  const auto b = MakeToken("hr", "read");
  const auto c = MakeToken("default", "admin", "2h");

  auto all = ops_->ListTokens("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  std::map<std::string, service::TokenInfo> by_id;
  for (const auto& t : *all) by_id[t.record.id] = t;
  EXPECT_EQ(by_id[a.record.id].database_names, std::vector<std::string>{"sales"});
  EXPECT_EQ(by_id[a.record.id].scope, auth::Scope::kWrite);
  EXPECT_EQ(by_id[b.record.id].database_names, std::vector<std::string>{"hr"});
  EXPECT_EQ(by_id[b.record.id].scope, auth::Scope::kRead);
  EXPECT_EQ(by_id[c.record.id].database_names, std::vector<std::string>{"default"});
  EXPECT_EQ(by_id[c.record.id].scope, auth::Scope::kAdmin);
  for (const auto& t : *all) {
    EXPECT_EQ(t.status, service::TokenStatus::kActive) << t.record.id;
    EXPECT_EQ(t.record.hash, auth::HashAccessToken(t.record.id == a.record.id   ? a.token
                                                   : t.record.id == b.record.id ? b.token
                                                                                : c.token));
  }

  for (const std::string& filter : {std::string("hr"), hr->record.id}) {
    auto only = ops_->ListTokens(filter);
    ASSERT_TRUE(only.ok());
    ASSERT_EQ(only->size(), 1u) << filter;
    EXPECT_EQ((*only)[0].record.id, b.record.id);
  }
  EXPECT_EQ(ops_->ListTokens("nope").status(), NotFound("Database 'nope' not found."));

  // One hour on, the 1h token is expired (from its expiry instant on); the 2h one is not.
  clock_.Advance(kHourMs);
  auto later = ops_->ListTokens("");
  ASSERT_TRUE(later.ok());
  for (const auto& t : *later) {
    const auto want =
        t.record.id == a.record.id ? service::TokenStatus::kExpired : service::TokenStatus::kActive;
    EXPECT_EQ(t.status, want) << t.record.id;
  }
  // Revoked wins over expired.
  ASSERT_TRUE(ops_->RevokeToken(a.record.id).ok());
  auto sales = ops_->ListTokens("sales");
  ASSERT_TRUE(sales.ok());
  ASSERT_EQ(sales->size(), 1u);
  EXPECT_EQ((*sales)[0].status, service::TokenStatus::kRevoked);
}

TEST_F(AdminOpsTest, RevokeByIdOrWholeToken) {
  const auto a = MakeToken("default", "write");
  const auto b = MakeToken("default", "read");
  clock_.Advance(5);

  auto by_id = ops_->RevokeToken(a.record.id);
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(*by_id, a.record.id);
  EXPECT_EQ(catalog_->FindToken(a.record.id)->revoked_ms, kStartMs + 5);

  auto by_token = ops_->RevokeToken(b.token);
  ASSERT_TRUE(by_token.ok()) << by_token.status().ToString();
  EXPECT_EQ(*by_token, b.record.id) << "the id, never the token";
  EXPECT_NE(catalog_->FindToken(b.record.id)->revoked_ms, 0);

  EXPECT_EQ(ops_->RevokeToken(a.token).status(),
            AlreadyExists("Access token '" + a.record.id + "' is already revoked."));
  EXPECT_EQ(ops_->RevokeToken("0123456789abcdef").status(),
            NotFound("Access token '0123456789abcdef' not found."));
  // Something not shaped like a token is taken as an id as it is.
  EXPECT_EQ(ops_->RevokeToken("kvt_nope").status(), NotFound("Access token 'kvt_nope' not found."));
}

}  // namespace
}  // namespace kvc
