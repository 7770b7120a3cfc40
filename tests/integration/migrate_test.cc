// `kvconnect migrate` (cli/migrate.h over storage/migration.h): several databases with values
// of every encoding, expiring and already expired keys, versionstamped keys, a queue message,
// access tokens and secrets move to another storage; the copy keeps ids, names, rows (versions
// and expiries included) and data versions, the digests of both sides match, tokens and secrets
// arrive, and a row changed in the destination afterwards makes the verification fail.
//
// Every scenario is a function of two storage::StorageOptions, run for each pair of storages in
// MigrationPairs(): SQLite -> SQLite, SQLite -> PostgreSQL, PostgreSQL -> SQLite and
// PostgreSQL -> PostgreSQL (a real server, testutil/pg_shared.h).
#include "cli/migrate.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "auth/tokens.h"
#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "codec/versionstamp.h"
#include "common/clock.h"
#include "common/random.h"
#include "engine/engine.h"
#include "service/admin/dump.h"
#include "storage/migration.h"
#include "storage/sqlite/sqlite_backend.h"
#include "storage/storage.h"
#include "testutil/engine_sync.h"
#include "testutil/pg_shared.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;
using storage::StorageOptions;
using testutil::WriteSync;

// --- The storages under test ---------------------------------------------------------------

// A kind of storage as the scenarios use it: a fresh, empty storage for every call, and its
// removal afterwards.
struct StorageKind {
  std::string name;
  std::function<StorageOptions()> make_fresh;
  std::function<void(const StorageOptions&)> remove;
};

StorageKind SqliteKind() {
  return StorageKind{
      "Sqlite",
      [] {
        StorageOptions o;
        o.kind = "sqlite";
        o.location =
            (fs::temp_directory_path() / ("kvc-migrate-" + HexEncode(RandomBytes(6)))).string();
        return o;
      },
      [](const StorageOptions& o) {
        std::error_code ec;
        fs::remove_all(o.location, ec);
      }};
}

struct MigrationPair {
  StorageKind from;
  StorageKind to;
};

void PrintTo(const MigrationPair& p, std::ostream* os) { *os << p.from.name << "->" << p.to.name; }

// PostgreSQL: a fresh database on the binary's shared server (testutil/pg_shared.h) each time.
StorageKind PostgresKind() {
  return StorageKind{"Postgres",
                     [] {
                       StorageOptions o;
                       o.kind = "postgres";
                       auto conninfo = testutil::FreshPgDatabase();
                       EXPECT_TRUE(conninfo.ok()) << conninfo.status().ToString();
                       o.location = conninfo.ok() ? *conninfo : "";
                       return o;
                     },
                     [](const StorageOptions& o) { testutil::DropPgDatabase(o.location); }};
}

void AddPostgresPairs(std::vector<MigrationPair>* pairs) {
  pairs->push_back({SqliteKind(), PostgresKind()});
  pairs->push_back({PostgresKind(), SqliteKind()});
  pairs->push_back({PostgresKind(), PostgresKind()});
}

std::vector<MigrationPair> MigrationPairs() {
  std::vector<MigrationPair> pairs = {{SqliteKind(), SqliteKind()}};
  AddPostgresPairs(&pairs);
  return pairs;
}

// --- Helpers -------------------------------------------------------------------------------

std::unique_ptr<storage::Storage> Open(const StorageOptions& o) {
  auto s = storage::OpenStorage(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string Key(const std::string& prefix, int64_t i) {
  return codec::EncodeKey({codec::KeyPart::String(prefix), codec::KeyPart::Int(i)});
}

// A V8-serialized one-byte string, as Deno writes it.
std::string V8String(const std::string& s) {
  return std::string("\xff\x0f\x22", 3) + static_cast<char>(s.size()) + s;
}

Mutation SetAs(std::string key, std::string value, ValueEncoding encoding, int64_t expire = 0) {
  Mutation m = testutil::Set(std::move(key), std::move(value), expire);
  m.value.encoding = encoding;
  return m;
}

// Every row of a database, expired ones included, from one snapshot.
std::vector<storage::KeyedRow> AllRows(storage::Storage& s, const storage::DatabaseRecord& rec) {
  std::vector<storage::KeyedRow> out;
  auto backend = s.OpenBackend(rec);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  if (!backend.ok()) return out;
  auto reader = (*backend)->OpenReader();
  EXPECT_TRUE(reader.ok());
  EXPECT_TRUE((*reader)->Begin().ok());
  EXPECT_TRUE(
      (*reader)->ScanRows(ReadRange{"", storage::EndOfKeySpace(), 1 << 30, false}, &out).ok());
  (*reader)->End();
  return out;
}

int64_t DataVersion(storage::Storage& s, const storage::DatabaseRecord& rec) {
  auto backend = s.OpenBackend(rec);
  EXPECT_TRUE(backend.ok());
  auto v = (*backend)->LoadDataVersion();
  EXPECT_TRUE(v.ok());
  return v.ok() ? *v : -1;
}

void ExpectSameRows(const std::vector<storage::KeyedRow>& a,
                    const std::vector<storage::KeyedRow>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key, b[i].key) << i;
    EXPECT_EQ(a[i].row.value, b[i].row.value) << i;
    EXPECT_EQ(a[i].row.encoding, b[i].row.encoding) << i;
    EXPECT_EQ(a[i].row.version, b[i].row.version) << i;
    EXPECT_EQ(a[i].row.expire_at_ms, b[i].row.expire_at_ms) << i;
  }
}

std::shared_ptr<engine::Engine> OpenEngine(storage::Storage& s, const storage::DatabaseRecord& r) {
  auto backend = s.OpenBackend(r);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  if (!backend.ok()) return nullptr;
  engine::EngineOptions eo;
  eo.reader_threads = 1;
  auto e = engine::Engine::Open(std::move(*backend), eo);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::shared_ptr<engine::Engine>(std::move(*e)) : nullptr;
}

// What Populate wrote.
struct Populated {
  storage::DatabaseRecord record;
  int64_t version = 0;                 // the data version afterwards
  std::string versionstamped_key;      // written with kSetSuffixVersionstampedKey...
  int64_t versionstamped_version = 0;  // ...in the commit of this version
};

// Writes `keys` bytes values, one of every other encoding, a large value, a key expiring in an
// hour, a versionstamped key, a deletion and (with `enqueue`) a queue message through an
// engine, then a row that expired long ago straight through a writer (as if the expiry sweep
// had not run yet).
Populated Populate(storage::Storage& s, const std::string& name, int keys, bool enqueue) {
  Populated out;
  auto rec = s.catalog().FindDatabase(name);
  if (!rec.ok()) {
    auto made = s.Create(name);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    EXPECT_TRUE(s.catalog().AddDatabase(*made).ok());
    rec = *made;
  }
  out.record = *rec;
  {
    auto e = OpenEngine(s, out.record);
    if (!e) return out;
    for (int b = 0; b < keys; b += 50) {
      AtomicWrite w;
      for (int i = b; i < std::min(keys, b + 50); ++i) {
        w.mutations.push_back(testutil::Set(Key("k", i), name + "-value-" + std::to_string(i)));
      }
      EXPECT_TRUE(WriteSync(*e, std::move(w)).ok());
    }
    AtomicWrite w;
    w.mutations.push_back(SetAs(Key("v8", 1), V8String("hello"), ValueEncoding::kV8));
    Mutation sum;
    sum.key = Key("counter", 1);
    sum.type = MutationType::kSum;
    sum.value = KvValue{std::string("\x07\0\0\0\0\0\0\0", 8), ValueEncoding::kLe64};
    w.mutations.push_back(sum);
    w.mutations.push_back(testutil::Set(Key("big", 1), std::string(60000, 'b')));
    w.mutations.push_back(testutil::Set(Key("soon", 1), "expires", NowUnixMs() + 3600 * 1000));
    Mutation stamped = SetAs(codec::EncodeKey({codec::KeyPart::String("log")}), V8String("entry"),
                             ValueEncoding::kV8);
    stamped.type = MutationType::kSetSuffixVersionstampedKey;
    w.mutations.push_back(stamped);
    auto r = WriteSync(*e, std::move(w));
    EXPECT_TRUE(r.ok() && r->ok);
    out.versionstamped_version = r.ok() ? r->version : 0;
    out.versionstamped_key =
        codec::EncodeKey({codec::KeyPart::String("log")}) +
        codec::VersionstampSuffix(codec::VersionToVersionstamp(out.versionstamped_version));
    AtomicWrite del;
    Mutation d;
    d.key = Key("k", 0);
    d.type = MutationType::kDelete;
    del.mutations.push_back(d);
    if (enqueue) {
      Enqueue q;
      q.payload = V8String("job");
      q.deadline_ms = NowUnixMs() + 3600 * 1000;
      del.enqueues.push_back(q);
    }
    EXPECT_TRUE(WriteSync(*e, std::move(del)).ok());
    e->Shutdown();
  }
  auto backend = s.OpenBackend(out.record);
  EXPECT_TRUE(backend.ok());
  auto writer = (*backend)->OpenWriter();
  EXPECT_TRUE(writer.ok());
  auto base = (*writer)->Begin();
  EXPECT_TRUE(base.ok());
  storage::StoredRow expired{"long gone", ValueEncoding::kBytes, *base, 1000};
  EXPECT_TRUE((*writer)->Put(Key("expired", 1), expired).ok());
  EXPECT_TRUE((*writer)->Commit().ok());
  out.version = *base;
  return out;
}

storage::AccessTokenRecord AddToken(storage::Storage& s, const std::string& database_id,
                                    bool revoked) {
  auth::NewAccessToken t = auth::GenerateAccessToken();
  storage::AccessTokenRecord r;
  r.id = t.id;
  r.name = "test";
  r.database_ids = {database_id};
  r.scope = static_cast<int>(auth::Scope::kWrite);
  r.hash = t.hash;
  r.created_ms = NowUnixMs();
  r.revoked_ms = revoked ? NowUnixMs() : 0;
  EXPECT_TRUE(s.catalog().AddToken(r).ok());
  return r;
}

// A token of several databases, or of all of them.
storage::AccessTokenRecord AddTokenOf(storage::Storage& s, std::vector<std::string> database_ids,
                                      bool all) {
  auth::NewAccessToken t = auth::GenerateAccessToken();
  storage::AccessTokenRecord r;
  r.id = t.id;
  r.name = all ? "all" : "several";
  r.database_ids = std::move(database_ids);
  r.all_databases = all;
  r.scope = static_cast<int>(auth::Scope::kRead);
  r.hash = t.hash;
  r.created_ms = NowUnixMs();
  EXPECT_TRUE(s.catalog().AddToken(r).ok());
  return r;
}

const cli::DatabaseMigration* Find(const cli::MigrationReport& r, const std::string& name) {
  for (const auto& d : r.databases) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

cli::MigrateOptions All() {
  cli::MigrateOptions o;
  o.all = true;
  o.batch_rows = 7;  // many transactions for a few hundred rows
  return o;
}

// --- Scenarios, each a function of two storages -------------------------------------------

// Three databases (one empty) with tokens and secrets move; everything is checked on the
// destination directly, then a changed row makes --verify-only fail.
void MigratesEverythingAndVerifies(const StorageOptions& from, const StorageOptions& to) {
  auto src = Open(from);
  ASSERT_TRUE(src);
  const Populated def = Populate(*src, "default", 120, false);
  const Populated app = Populate(*src, "app", 300, true);
  auto empty = src->Create("empty");
  ASSERT_TRUE(empty.ok());
  ASSERT_TRUE(src->catalog().AddDatabase(*empty).ok());
  const auto app_token = AddToken(*src, app.record.id, false);
  const auto revoked_token = AddToken(*src, app.record.id, true);
  const auto def_token = AddToken(*src, def.record.id, false);
  // Copied whole with the first database they open, found present with the others.
  const auto multi_token = AddTokenOf(*src, {app.record.id, def.record.id}, false);
  const auto all_token = AddTokenOf(*src, {}, true);
  bool created = false;
  auto secret = src->LoadOrCreateSecret(
      "server-secret", [] { return std::string(64, 's'); }, &created);
  ASSERT_TRUE(secret.ok());
  auto bootstrap = src->LoadOrCreateSecret(
      "access-token", [] { return std::string("kvc_bootstrap_token_0123"); }, &created);
  ASSERT_TRUE(bootstrap.ok());

  std::stringstream log;
  auto report = cli::Migrate(from, to, All(), log);
  ASSERT_TRUE(report.ok()) << report.status().ToString() << "\n" << log.str();
  EXPECT_TRUE(report->ok()) << log.str();
  ASSERT_EQ(report->databases.size(), 3u) << log.str();
  const cli::DatabaseMigration* app_m = Find(*report, "app");
  ASSERT_NE(app_m, nullptr);
  EXPECT_TRUE(app_m->copied);
  EXPECT_EQ(app_m->copy.copied.version, app.version);
  // 300 keys, one deleted, and v8, counter, big, soon, log/<stamp>, expired.
  EXPECT_EQ(app_m->copy.copied.keys, 300 - 1 + 6);
  EXPECT_GT(app_m->copy.batches, 40);
  EXPECT_TRUE(storage::SameContent(app_m->source, app_m->destination));
  EXPECT_EQ(app_m->tokens.matching, 4);  // its two, the multi-database and all-databases ones
  int64_t copied = 0, present = 0, all_databases = 0;
  for (const cli::DatabaseMigration& m : report->databases) {
    copied += m.tokens_copied.copied;
    present += m.tokens_copied.present;
    all_databases += m.tokens_copied.all_databases;
  }
  EXPECT_EQ(copied, 5) << log.str();
  EXPECT_EQ(present, 3) << log.str();  // the multi-database token once, the other twice
  EXPECT_EQ(all_databases, 1) << log.str();
  bool warned_all = false;
  for (const std::string& w : report->warnings) {
    warned_all |= w.find("1 access token(s) for all databases") != std::string::npos;
  }
  EXPECT_TRUE(warned_all) << log.str();
  ASSERT_TRUE(app_m->copy.queue_left.has_value());
  EXPECT_EQ(app_m->copy.queue_left->delayed, 1);
  bool warned = false;
  for (const std::string& w : report->warnings) {
    warned |= w.find("'app': 1 queue message(s)") != std::string::npos;
  }
  EXPECT_TRUE(warned) << log.str();
  const cli::DatabaseMigration* def_m = Find(*report, "default");
  ASSERT_NE(def_m, nullptr);
  ASSERT_TRUE(def_m->copy.replaced.has_value());  // the destination's own, empty "default"
  EXPECT_NE(def_m->copy.replaced->id, def.record.id);
  EXPECT_NE(log.str().find("sha256 " + app_m->source.sha256), std::string::npos);

  // The destination itself.
  auto dst = Open(to);
  ASSERT_TRUE(dst);
  for (const storage::DatabaseRecord& rec : {def.record, app.record, *empty}) {
    SCOPED_TRACE(rec.name);
    auto there = dst->catalog().FindDatabase(rec.id);
    ASSERT_TRUE(there.ok()) << there.status().ToString();
    EXPECT_EQ(there->name, rec.name);
    EXPECT_EQ(DataVersion(*dst, *there), DataVersion(*src, rec));
    const auto rows = AllRows(*dst, *there);
    ExpectSameRows(AllRows(*src, rec), rows);
    if (rec.id == app.record.id) {  // the row that expired long ago is there too
      const auto it = std::find_if(rows.begin(), rows.end(), [](const storage::KeyedRow& r) {
        return r.key == Key("expired", 1);
      });
      ASSERT_NE(it, rows.end());
      EXPECT_EQ(it->row.expire_at_ms, 1000);
      // What reads and exports of the copy show (`kvconnect export`, the admin API): the
      // expiry of "soon" as the source had it, on its dump line.
      const auto soon = std::find_if(rows.begin(), rows.end(), [](const storage::KeyedRow& r) {
        return r.key == Key("soon", 1);
      });
      ASSERT_NE(soon, rows.end());
      EXPECT_GT(soon->row.expire_at_ms, 1000);
      auto copy = dst->OpenBackend(*there);
      ASSERT_TRUE(copy.ok());
      auto reader = (*copy)->OpenReader();
      ASSERT_TRUE(reader.ok() && (*reader)->Begin().ok());
      std::vector<Entry> read;
      ASSERT_TRUE(
          (*reader)
              ->Scan(ReadRange{Key("soon", 1), Key("soon", 2), 10, false}, NowUnixMs(), &read)
              .ok());
      (*reader)->End();
      ASSERT_EQ(read.size(), 1u);
      EXPECT_EQ(read[0].expire_at_ms, soon->row.expire_at_ms);
      auto line = service::DumpLine(read[0]);
      ASSERT_TRUE(line.ok());
      EXPECT_NE(
          line->find("\"expires_at\":\"" + codec::ExpiryToJsonTime(soon->row.expire_at_ms) + "\""),
          std::string::npos)
          << *line;
    }
    auto backend = dst->OpenBackend(*there);
    ASSERT_TRUE(backend.ok());
    EXPECT_EQ((*backend)->database_id(), rec.id);
  }
  for (const auto& t : {app_token, revoked_token, def_token, multi_token, all_token}) {
    auto there = dst->catalog().FindToken(t.id);
    ASSERT_TRUE(there.ok());
    EXPECT_EQ(there->hash, t.hash);
    EXPECT_EQ(there->database_ids, t.database_ids);
    EXPECT_EQ(there->all_databases, t.all_databases);
    EXPECT_EQ(there->revoked_ms, t.revoked_ms);
  }
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"server-secret", *secret}, {"access-token", *bootstrap}}) {
    auto there = dst->ReadSecret(name);
    ASSERT_TRUE(there.ok() && there->has_value()) << name;
    EXPECT_EQ(**there, value);
  }

  // Served from the destination: the versionstamped key keeps its versionstamp, and new
  // commits get later ones.
  {
    auto rec = dst->catalog().FindDatabase("app");
    ASSERT_TRUE(rec.ok());
    auto e = OpenEngine(*dst, *rec);
    ASSERT_TRUE(e);
    auto read = testutil::ReadSync(
        *e, {ReadRange{app.versionstamped_key, app.versionstamped_key + '\0', 1, false}});
    ASSERT_TRUE(read.ok());
    ASSERT_EQ(read->ranges.at(0).size(), 1u);
    EXPECT_EQ(read->ranges[0][0].version, app.versionstamped_version);
    AtomicWrite w;
    w.mutations.push_back(testutil::Set(Key("after", 1), "x"));
    auto r = WriteSync(*e, std::move(w));
    ASSERT_TRUE(r.ok() && r->ok);
    EXPECT_GT(r->version, app.version);
    e->Shutdown();
  }

  // Migrating again refuses: the destination has the databases with data now.
  std::stringstream again_log;
  auto again = cli::Migrate(from, to, All(), again_log);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();

  // "app" has a commit the source lacks now; "default" is untouched.
  cli::MigrateOptions verify = All();
  verify.verify_only = true;
  std::stringstream verify_log;
  auto checked = cli::Migrate(from, to, verify, verify_log);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_FALSE(checked->ok());
  EXPECT_TRUE(Find(*checked, "default")->match) << verify_log.str();
  EXPECT_FALSE(Find(*checked, "app")->match);

  // A row of "default" changed in place in the destination (same version): verify fails.
  {
    auto rec = dst->catalog().FindDatabase("default");
    ASSERT_TRUE(rec.ok());
    auto backend = dst->OpenBackend(*rec);
    ASSERT_TRUE(backend.ok());
    auto writer = (*backend)->OpenWriter();
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Begin().ok());
    auto row = (*writer)->Get(Key("k", 17));
    ASSERT_TRUE(row.ok() && row->has_value());
    storage::StoredRow changed = **row;
    changed.value.back() ^= 1;
    ASSERT_TRUE((*writer)->Put(Key("k", 17), changed).ok());
    ASSERT_TRUE((*writer)->Commit().ok());
  }
  verify.all = false;
  verify.dbs = {"default"};
  std::stringstream tampered_log;
  auto tampered = cli::Migrate(from, to, verify, tampered_log);
  ASSERT_TRUE(tampered.ok()) << tampered.status().ToString();
  EXPECT_FALSE(tampered->ok());
  ASSERT_EQ(tampered->databases.size(), 1u);
  const cli::DatabaseMigration& d = tampered->databases[0];
  EXPECT_FALSE(d.match);
  EXPECT_EQ(d.source.keys, d.destination.keys);
  EXPECT_EQ(d.source.version, d.destination.version);
  EXPECT_NE(d.source.sha256, d.destination.sha256);
  EXPECT_NE(tampered_log.str().find("DIFFERS: the contents differ"), std::string::npos)
      << tampered_log.str();

  // A revoked token in the destination only: verify fails on tokens.
  ASSERT_TRUE(dst->catalog().RevokeToken(def_token.id, NowUnixMs()).ok());
  std::stringstream token_log;
  verify.dbs = {"empty"};
  ASSERT_TRUE(cli::Migrate(from, to, verify, token_log)->ok());
  verify.dbs = {"default"};
  auto tokens = cli::Migrate(from, to, verify, token_log);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->databases.at(0).tokens.differing.size(), 1u);
  EXPECT_EQ(tokens->databases[0].tokens.differing[0], def_token.id);
}

// Nothing is copied when one database cannot be: the destination has it with data, or has its
// id under another name, or a server holds the destination.
void RefusesBeforeCopyingAnything(const StorageOptions& from, const StorageOptions& to) {
  auto src = Open(from);
  auto dst = Open(to);
  ASSERT_TRUE(src && dst);
  const Populated app = Populate(*src, "app", 10, false);
  const Populated other = Populate(*src, "other", 10, false);
  Populate(*dst, "other", 1, false);
  std::stringstream log;
  auto r = cli::Migrate(from, to, All(), log);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("'other'"), std::string::npos) << r.status().message();
  EXPECT_EQ(dst->catalog().FindDatabase("app").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dst->catalog().FindDatabase(app.record.id).status().code(), StatusCode::kNotFound);

  // The id is taken by another name.
  auto taken = dst->CreateWithId("renamed", app.record.id);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  ASSERT_TRUE(dst->catalog().AddDatabase(*taken).ok());
  cli::MigrateOptions one = All();
  one.all = false;
  one.dbs = {"app"};
  r = cli::Migrate(from, to, one, log);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("'renamed'"), std::string::npos) << r.status().message();

  // A server (here: this test) holds the destination's writer claim. PostgreSQL storage has no
  // such claim (every node writes; the migration only fills databases no node has yet).
  if (to.kind == "postgres") return;
  auto lock = dst->LockWriters();
  ASSERT_TRUE(lock.ok());
  one.dbs = {other.record.name};
  r = cli::Migrate(from, to, one, log);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  lock->reset();
}

// A server keeps writing the source during the copy: the copy is the one snapshot it started
// from, and the destination matches that snapshot.
void CopiesOneSnapshotWhileTheSourceIsWritten(const StorageOptions& from,
                                              const StorageOptions& to) {
  auto src = Open(from);
  auto dst = Open(to);
  ASSERT_TRUE(src && dst);
  const Populated app = Populate(*src, "app", 200, false);
  auto server = OpenEngine(*src, app.record);  // the running server's engine
  ASSERT_TRUE(server);
  int writes = 0;
  storage::CopyOptions co;
  co.batch_rows = 10;
  co.on_progress = [&](int64_t, int64_t) {
    if (writes >= 3) return;
    AtomicWrite w;
    w.mutations.push_back(testutil::Set(Key("k", 5), "overwritten during the copy"));
    w.mutations.push_back(testutil::Set(Key("new", writes), "new during the copy"));
    auto r = WriteSync(*server, std::move(w));
    EXPECT_TRUE(r.ok() && r->ok);
    ++writes;
  };
  auto lock = dst->LockWriters();
  ASSERT_TRUE(lock.ok());
  auto copy = storage::CopyDatabase(*src, app.record, *dst, co);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(writes, 3);
  // The engine's expiry sweep may have removed the expired row before the copy began.
  EXPECT_GE(copy->copied.version, app.version);
  EXPECT_LE(copy->copied.version, app.version + 1);
  auto dst_backend = dst->OpenBackend(copy->record);
  ASSERT_TRUE(dst_backend.ok());
  auto dst_digest = storage::DigestDatabase(**dst_backend, 100);
  ASSERT_TRUE(dst_digest.ok());
  EXPECT_TRUE(storage::SameContent(copy->copied, *dst_digest));
  auto src_backend = src->OpenBackend(app.record);
  ASSERT_TRUE(src_backend.ok());
  auto src_digest = storage::DigestDatabase(**src_backend, 100);
  ASSERT_TRUE(src_digest.ok());
  EXPECT_GT(src_digest->version, copy->copied.version);
  const auto rows = AllRows(*dst, copy->record);
  EXPECT_EQ(static_cast<int64_t>(rows.size()), dst_digest->keys);
  for (const storage::KeyedRow& r : rows) {
    EXPECT_NE(r.row.value, "overwritten during the copy");
    EXPECT_NE(r.row.value, "new during the copy");
  }
  server->Shutdown();
}

class MigrateTest : public ::testing::TestWithParam<MigrationPair> {
 protected:
  void SetUp() override {
    from_ = GetParam().from.make_fresh();
    to_ = GetParam().to.make_fresh();
  }
  void TearDown() override {
    GetParam().from.remove(from_);
    GetParam().to.remove(to_);
  }

  StorageOptions from_;
  StorageOptions to_;
};

TEST_P(MigrateTest, MigratesEverythingAndVerifies) { MigratesEverythingAndVerifies(from_, to_); }

TEST_P(MigrateTest, RefusesBeforeCopyingAnything) { RefusesBeforeCopyingAnything(from_, to_); }

TEST_P(MigrateTest, CopiesOneSnapshotWhileTheSourceIsWritten) {
  CopiesOneSnapshotWhileTheSourceIsWritten(from_, to_);
}

INSTANTIATE_TEST_SUITE_P(Pairs, MigrateTest, ::testing::ValuesIn(MigrationPairs()),
                         [](const ::testing::TestParamInfo<MigrationPair>& info) {
                           return info.param.from.name + "To" + info.param.to.name;
                         });

// --- SQLite only, and the pieces ------------------------------------------------------------

class MigrateSqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-migrate-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A single Deno KV file as the source: it arrives as the database "default".
TEST_F(MigrateSqliteTest, SingleDenoFileAsSource) {
  const std::string file = (dir_ / "deno.sqlite3").string();
  {
    auto b = storage::SqliteBackend::Open(file, storage::SqliteOptions{});
    ASSERT_TRUE(b.ok());
    auto w = (*b)->OpenWriter();
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Begin().ok());
    for (int i = 0; i < 25; ++i) {
      ASSERT_TRUE((*w)->Put(Key("k", i), {V8String("v"), ValueEncoding::kV8, 3, -1}).ok());
    }
    ASSERT_TRUE((*w)->SetDataVersion(3).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  StorageOptions from;
  from.location = file;
  StorageOptions to;
  to.location = (dir_ / "data").string();
  cli::MigrateOptions o;
  o.dbs = {"default"};
  std::stringstream log;
  auto r = cli::Migrate(from, to, o, log);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << log.str();
  ASSERT_EQ(r->databases.size(), 1u);
  EXPECT_EQ(r->databases[0].destination.keys, 25);
  EXPECT_EQ(r->databases[0].destination.version, 3);
}

TEST_F(MigrateSqliteTest, OptionsAndSpecs) {
  auto s = cli::ParseStorageSpec("sqlite:/data/kv");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, "sqlite");
  EXPECT_EQ(s->location, "/data/kv");
  s = cli::ParseStorageSpec("postgres:host=db dbname=kv");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, "postgres");
  EXPECT_EQ(s->location, "host=db dbname=kv");
  s = cli::ParseStorageSpec("postgresql://u@db/kv");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, "postgres");
  EXPECT_EQ(s->location, "postgresql://u@db/kv");
  EXPECT_EQ(cli::ParseStorageSpec("mysql:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::ParseStorageSpec("sqlite:").status().code(), StatusCode::kInvalidArgument);

  StorageOptions a;
  a.location = (dir_ / "a").string();
  StorageOptions b;
  b.location = (dir_ / "b").string();
  ASSERT_TRUE(Open(a));
  std::stringstream log;
  cli::MigrateOptions none;  // neither --db nor --all
  EXPECT_EQ(cli::Migrate(a, b, none, log).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cli::Migrate(a, a, All(), log).status().code(), StatusCode::kInvalidArgument);
  StorageOptions missing;
  missing.location = (dir_ / "missing").string();
  EXPECT_EQ(cli::Migrate(missing, b, All(), log).status().code(), StatusCode::kNotFound);
  cli::MigrateOptions verify = All();
  verify.verify_only = true;
  EXPECT_EQ(cli::Migrate(a, missing, verify, log).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(missing.location));
}

// The digest is SHA-256 over length-prefixed keys and values and 8-byte big-endian numbers, in
// key order (storage/migration.h): pinned here so digests of different runs compare.
TEST_F(MigrateSqliteTest, DigestFormat) {
  auto b = storage::SqliteBackend::Open((dir_ / "d.sqlite3").string(), storage::SqliteOptions{});
  ASSERT_TRUE(b.ok());
  {
    auto w = (*b)->OpenWriter();
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Begin().ok());
    ASSERT_TRUE((*w)->Put("b", {"xy", ValueEncoding::kLe64, 5, -1}).ok());
    ASSERT_TRUE((*w)->Put("a", {"", ValueEncoding::kBytes, 4, 1000}).ok());
    ASSERT_TRUE((*w)->SetDataVersion(5).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto n = [](uint64_t v) {
    std::string s(8, '\0');
    for (int i = 7; i >= 0; --i, v >>= 8) s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    return s;
  };
  const std::string bytes = n(1) + "a" + n(0) + "" + n(3) + n(4) + n(1000) +  // row "a"
                            n(1) + "b" + n(2) + "xy" + n(2) + n(5) + n(~uint64_t{0});
  unsigned char sha[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), sha);
  auto d = storage::DigestDatabase(**b, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->sha256, HexEncode(std::string(reinterpret_cast<const char*>(sha), sizeof sha)));
  EXPECT_EQ(d->keys, 2);
  EXPECT_EQ(d->bytes, 4);
  EXPECT_EQ(d->version, 5);
}

}  // namespace
}  // namespace kvc
