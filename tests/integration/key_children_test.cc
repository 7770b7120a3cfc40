// service::ListKeyChildren on a real SQLite engine against a model computed from a std::map:
// random keys of every part type (and a key that is no Deno key), every prefix, small pages
// chained by their cursor, small caps and scan budgets. Whatever the cap and budget, the pages
// list every child exactly once, in order; a count is exact unless marked capped, and then a
// lower bound of at least min(cap, ...) rows; the entry at prefix + part is reported.
#include "service/admin/key_children.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <set>

#include "codec/key_codec.h"
#include "common/random.h"
#include "engine/engine.h"
#include "storage/sqlite/sqlite_backend.h"
#include "testutil/engine_sync.h"

namespace kvc::service {
namespace {

namespace fs = std::filesystem;
using codec::KeyPart;

struct ModelChild {
  int64_t count = 0;
  bool has_value = false;
};

class KeyChildrenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvc-children-" + HexEncode(RandomBytes(6)));
    fs::create_directories(dir_);
    auto b = storage::SqliteBackend::Open((dir_ / "db.sqlite3").string(), {});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    auto e = engine::Engine::Open(std::unique_ptr<storage::Backend>(std::move(*b)), {});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(*e);
  }
  void TearDown() override {
    // A finished walk may still hold the engine on a reader thread for a moment: stop the
    // threads here, so the last reference is never dropped on one of them.
    if (engine_) engine_->Shutdown();
    engine_.reset();
    fs::remove_all(dir_);
  }

  // Writes are gathered and committed in batches by Flush().
  void Put(const std::string& key) {
    pending_.mutations.push_back(testutil::Set(key, "v"));
    keys_.insert(key);
    if (pending_.mutations.size() == 500) Flush();
  }
  void Flush() {
    if (pending_.mutations.empty()) return;
    auto r = testutil::WriteSync(*engine_, std::move(pending_));
    pending_ = AtomicWrite();
    ASSERT_TRUE(r.ok() && r->ok) << (r.ok() ? "check" : r.status().ToString());
  }

  Result<KeyChildrenResult> Children(const std::string& prefix, const std::string& start,
                                     int32_t limit, const KeyChildrenOptions& o) {
    std::promise<Result<KeyChildrenResult>> p;
    ListKeyChildren(engine_, prefix, start, prefix + '\xff', limit, o,
                    [&](Result<KeyChildrenResult> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  // The children of `prefix` by brute force, keyed by the part's bytes (key order).
  std::map<std::string, ModelChild> Model(const std::string& prefix) const {
    std::map<std::string, ModelChild> out;
    for (const std::string& key : keys_) {
      if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) continue;
      bool raw = false;
      const std::string part = NextKeyPart(key, prefix.size(), &raw);
      ModelChild& c = out[part];
      ++c.count;
      if (key.size() == prefix.size() + part.size()) c.has_value = true;
    }
    return out;
  }

  // Every page from the start, checked against the model.
  void Check(const std::string& prefix, int32_t limit, const KeyChildrenOptions& o) {
    const auto model = Model(prefix);
    std::vector<KeyChild> got;
    std::string start = prefix + '\x00';
    for (int pages = 0;; ++pages) {
      ASSERT_LT(pages, 10000) << "no progress";
      auto r = Children(prefix, start, limit, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_LE(r->children.size(), static_cast<size_t>(limit));
      for (KeyChild& c : r->children) got.push_back(std::move(c));
      if (r->next_start.empty()) break;
      ASSERT_GT(r->next_start, start);
      start = r->next_start;
    }
    std::string where = "prefix " + codec::KeyToString(prefix) + " limit " + std::to_string(limit) +
                        " cap " + std::to_string(o.count_cap) + " scan " +
                        std::to_string(o.max_scan_rows);
    ASSERT_EQ(got.size(), model.size()) << where;
    size_t i = 0;
    for (const auto& [part, m] : model) {
      const KeyChild& c = got[i++];
      ASSERT_EQ(c.part, part) << where;
      EXPECT_EQ(c.entry.has_value(), m.has_value) << where;
      if (c.entry) {
        EXPECT_EQ(c.entry->key, prefix + part);
      }
      if (c.capped) {
        EXPECT_LE(c.count, m.count) << where;
        EXPECT_GE(c.count, 1);
      } else {
        EXPECT_EQ(c.count, m.count) << where << " part " << codec::KeyToString(part);
      }
      if (m.count > o.count_cap) {
        EXPECT_TRUE(c.capped) << where;
      }
    }
  }

  fs::path dir_;
  std::shared_ptr<engine::Engine> engine_;
  std::set<std::string> keys_;
  AtomicWrite pending_;
};

TEST_F(KeyChildrenTest, MatchesTheModelForEveryPrefixCapAndBudget) {
  std::mt19937 rng(7);
  const std::vector<KeyPart> firsts = {
      KeyPart::String("users"), KeyPart::String("u"), KeyPart::Int(-3),          KeyPart::Int(42),
      KeyPart::Float(1.5),      KeyPart::Bool(true),  KeyPart::Bytes("\x01\xff")};
  for (int i = 0; i < 400; ++i) {
    std::vector<KeyPart> key = {firsts[rng() % firsts.size()]};
    const int depth = static_cast<int>(rng() % 3);
    for (int d = 0; d < depth; ++d) {
      key.push_back(rng() % 2
                        ? KeyPart::Int(static_cast<int64_t>(rng() % 30))
                        : KeyPart::String(std::string(1, static_cast<char>('a' + rng() % 5))));
    }
    Put(codec::EncodeKey(key));
  }
  // A key that is no Deno key under "users" (an unknown tag), and one at the root.
  Put(codec::EncodeKey({KeyPart::String("users")}) + std::string("\x7a\x01", 2));
  Put(std::string("\x00\x6b\x76", 3));
  Flush();

  const std::vector<std::string> prefixes = {
      "", codec::EncodeKey({KeyPart::String("users")}), codec::EncodeKey({KeyPart::Int(42)}),
      codec::EncodeKey({KeyPart::String("users"), KeyPart::Int(3)}),
      codec::EncodeKey({KeyPart::String("nothing")})};
  for (const std::string& prefix : prefixes) {
    for (int32_t limit : {1, 3, 100}) {
      for (int64_t cap : {1, 2, 5, 1000}) {
        for (int64_t scan : {1, 7, 20000}) {
          KeyChildrenOptions o;
          o.count_cap = cap;
          o.max_scan_rows = scan;
          o.read_page = 4;
          Check(prefix, limit, o);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_F(KeyChildrenTest, ALargeChildIsCountedOnlyToTheCap) {
  for (int i = 0; i < 3000; ++i) {
    Put(codec::EncodeKey({KeyPart::String("big"), KeyPart::Int(i)}));
  }
  Put(codec::EncodeKey({KeyPart::String("small"), KeyPart::Int(1)}));
  Put(codec::EncodeKey({KeyPart::String("small")}));
  Flush();
  KeyChildrenOptions o;
  o.count_cap = 1000;
  auto r = Children("", std::string(1, '\x00'), 100, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->children.size(), 2u);
  EXPECT_EQ(r->children[0].count, 1000);
  EXPECT_TRUE(r->children[0].capped);
  EXPECT_FALSE(r->children[0].entry.has_value());
  EXPECT_EQ(r->children[1].count, 2);
  EXPECT_FALSE(r->children[1].capped);
  ASSERT_TRUE(r->children[1].entry.has_value());
  EXPECT_TRUE(r->next_start.empty());
  // Under "big": a page of 100 single-entry parts, then the cursor.
  const std::string big = codec::EncodeKey({KeyPart::String("big")});
  auto page = Children(big, big + '\x00', 100, o);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->children.size(), 100u);
  EXPECT_EQ(page->children[99].part, codec::EncodeKey({KeyPart::Int(99)}));
  EXPECT_EQ(page->next_start, codec::EncodeKey({KeyPart::String("big"), KeyPart::Int(100)}));
}

}  // namespace
}  // namespace kvc::service
