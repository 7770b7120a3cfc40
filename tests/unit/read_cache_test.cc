// ReadCache's coherence rules in isolation: fills that may predate a write are refused, a
// pending write hides the key, expired rows read as absent, and memory stays within bounds.
#include "engine/read_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kvc::engine {
namespace {

storage::StoredRow Row(std::string v, int64_t version, int64_t expire_at_ms = -1) {
  return storage::StoredRow{std::move(v), ValueEncoding::kBytes, version, expire_at_ms};
}

TEST(ReadCache, FillThenHitAndNegativeEntries) {
  ReadCache c(1 << 20);
  storage::StoredRow out;
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  c.Fill("a", c.FillTicket("a"), Row("x", 7));
  ASSERT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "x");
  EXPECT_EQ(out.version, 7);
  c.Fill("b", c.FillTicket("b"), std::nullopt);
  EXPECT_EQ(c.Get("b", 0, &out), ReadCache::Lookup::kAbsent);
}

TEST(ReadCache, ExpiredRowsReadAsAbsent) {
  ReadCache c(1 << 20);
  c.Fill("a", c.FillTicket("a"), Row("x", 1, /*expire_at_ms=*/1000));
  storage::StoredRow out;
  EXPECT_EQ(c.Get("a", 999, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(c.Get("a", 1000, &out), ReadCache::Lookup::kAbsent);
}

TEST(ReadCache, AWriteHidesTheKeyUntilItEndsAndRefusesFillsThatMayPredateIt) {
  ReadCache c(1 << 20);
  storage::StoredRow out;
  c.Fill("a", c.FillTicket("a"), Row("old", 1));
  const uint64_t before = c.FillTicket("a");  // a reader about to take its snapshot

  c.BeginWrite({"a"});
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);  // pending: never the old row
  c.Fill("a", c.FillTicket("a"), Row("old", 1));             // a fill during the write
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  c.EndWrite({"a"});

  c.Fill("a", before, Row("old", 1));  // its snapshot may predate the commit: refused
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  c.Fill("a", c.FillTicket("a"), Row("new", 2));
  ASSERT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "new");
}

TEST(ReadCache, OverlappingWritesOnOneKeyKeepItHiddenUntilTheLastEnds) {
  ReadCache c(1 << 20);
  storage::StoredRow out;
  c.BeginWrite({"a", "a"});  // duplicates allowed
  c.BeginWrite({"a"});
  c.EndWrite({"a", "a"});
  c.Fill("a", c.FillTicket("a"), Row("x", 1));
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  c.EndWrite({"a"});
  c.Fill("a", c.FillTicket("a"), Row("x", 1));
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(c.writes_ended(), 2u);
}

// EndWrite with the committed rows caches them; the last row of a key written twice wins, a
// deleted key reads as absent, and a failed commit leaves its keys uncached.
TEST(ReadCache, ACommittedWriteStoresItsRowsAndAFailedOneLeavesItsKeysUncached) {
  ReadCache c(1 << 20);
  storage::StoredRow out;
  c.Fill("a", c.FillTicket("a"), Row("old", 1));
  const std::vector<std::string> keys = {"a", "b", "a"};
  const std::optional<storage::StoredRow> first = Row("x", 2), gone, last = Row("y", 3);
  const std::vector<const std::optional<storage::StoredRow>*> rows = {&first, &gone, &last};
  const uint64_t ticket = c.FillTicket("a");  // a reader's, before the write
  c.BeginWrite(keys);
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  c.EndWrite(keys, &rows);
  ASSERT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "y");
  EXPECT_EQ(out.version, 3);
  EXPECT_EQ(c.Get("b", 0, &out), ReadCache::Lookup::kAbsent);
  c.Fill("a", ticket, Row("old", 1));  // from a snapshot before the write: refused
  ASSERT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "y");

  c.BeginWrite({"a", "c"});
  c.EndWrite({"a", "c"});  // the commit failed
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.Get("c", 0, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.entry_count(), 1u);  // "b" alone
}

TEST(ReadCache, StaysWithinItsCapacityAndEvictsTheLeastRecentlyUsed) {
  const size_t capacity = 64 * 4096;  // 4 KiB per shard
  ReadCache c(capacity);
  const std::string value(200, 'v');
  for (int i = 0; i < 20000; ++i) {
    const std::string k = "key" + std::to_string(i);
    c.Fill(k, c.FillTicket(k), Row(value, i));
    c.Fill(k, c.FillTicket(k), Row(value, i));  // a second miss is admitted once full
    ASSERT_LE(c.charged_bytes(), capacity);
  }
  EXPECT_GT(c.entry_count(), 100u);
  EXPECT_LT(c.entry_count(), 20000u);
  storage::StoredRow out;
  EXPECT_EQ(c.Get("key19999", 0, &out), ReadCache::Lookup::kPresent);  // the newest stays
  EXPECT_EQ(c.Get("key0", 0, &out), ReadCache::Lookup::kMiss);         // the oldest went
}

// A hit marks the entry and eviction gives it a second chance: a key read now and then stays
// while thousands of keys stored after it come and go (without the mark it would be the first
// to go: it is the oldest).
TEST(ReadCache, AKeyReadNowAndThenOutlivesTheKeysStoredAfterIt) {
  const size_t capacity = 64 * 4096;  // 4 KiB per shard: about a dozen of these entries each
  ReadCache c(capacity);
  const std::string value(200, 'v');
  storage::StoredRow out;
  c.Fill("keep", c.FillTicket("keep"), Row(value, 1));
  ASSERT_EQ(c.Get("keep", 0, &out), ReadCache::Lookup::kPresent);
  for (int i = 0; i < 20000; ++i) {
    const std::string k = "key" + std::to_string(i);
    c.Fill(k, c.FillTicket(k), Row(value, i));
    c.Fill(k, c.FillTicket(k), Row(value, i));
    if (i % 4 == 0) {
      ASSERT_EQ(c.Get("keep", 0, &out), ReadCache::Lookup::kPresent) << i;
    }
    ASSERT_LE(c.charged_bytes(), capacity);
  }
  EXPECT_EQ(c.Get("key0", 0, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.Get("key19999", 0, &out), ReadCache::Lookup::kPresent);
}

TEST(ReadCache, OnceFullAKeyReadOnceIsNotAdmitted) {
  const size_t capacity = 64 * 4096;
  ReadCache c(capacity);
  const std::string value(200, 'v');
  for (int i = 0; i < 5000; ++i) {  // more than fits, each read once
    const std::string k = "once" + std::to_string(i);
    c.Fill(k, c.FillTicket(k), Row(value, i));
  }
  const size_t full = c.entry_count();
  EXPECT_GT(full, 100u);
  EXPECT_LT(full, 1000u);  // far fewer than 5000: no churn once full
  storage::StoredRow out;
  c.Fill("hot", c.FillTicket("hot"), Row(value, 1));
  EXPECT_EQ(c.Get("hot", 0, &out), ReadCache::Lookup::kMiss);
  c.Fill("hot", c.FillTicket("hot"), Row(value, 1));
  EXPECT_EQ(c.Get("hot", 0, &out), ReadCache::Lookup::kPresent);
  c.Fill("hot", c.FillTicket("hot"), Row(value, 2));  // present keys are refreshed at once
  ASSERT_EQ(c.Get("hot", 0, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.version, 2);
}

// A differential check of the shards' index (open addressing, erased by shifting entries back):
// thousands of keys filled, re-filled with new rows, written (a committed write stores its row,
// a failed one erases the key's node) and filled again, in a random order, with room for all of
// them so nothing is evicted. After every step of the sequence, each key answers exactly what a
// plain map of the fills since its last write says: its latest row, "no row", or a miss.
TEST(ReadCache, ManyFillsAndWritesAnswerExactlyWhatAModelOfThemSays) {
  ReadCache c(64u << 20);
  constexpr int kKeys = 3000;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back("k" + std::to_string(i * 7919));
  // nullopt: a miss; a row without value: "no row" cached.
  std::map<std::string, std::optional<std::optional<storage::StoredRow>>> model;
  std::mt19937 rng(7);
  int64_t version = 0;
  storage::StoredRow out;
  auto check = [&](const std::string& k) {
    const auto it = model.find(k);
    const ReadCache::Lookup got = c.Get(k, 0, &out);
    if (it == model.end() || !it->second) {
      EXPECT_EQ(got, ReadCache::Lookup::kMiss) << k;
    } else if (!*it->second) {
      EXPECT_EQ(got, ReadCache::Lookup::kAbsent) << k;
    } else {
      ASSERT_EQ(got, ReadCache::Lookup::kPresent) << k;
      EXPECT_EQ(out.value, (*it->second)->value) << k;
      EXPECT_EQ(out.version, (*it->second)->version) << k;
    }
  };
  for (int step = 0; step < 60000; ++step) {
    const std::string& k = keys[rng() % kKeys];
    switch (rng() % 4) {
      case 0:
      case 1: {  // a fill: a row of a length that varies (an entry's block grows and shrinks)
        std::optional<storage::StoredRow> row;  // or "no row"
        const size_t size = rng() % 8 == 0 ? 200 + rng() % 100 : rng() % 40;
        if (rng() % 5) row = Row(std::string(size, 'a' + static_cast<char>(rng() % 26)), ++version);
        c.Fill(k, c.FillTicket(k), row);
        model[k] = row;
        break;
      }
      case 2: {  // a write: committed (its row, or "no row", is stored) or failed (uncached)
        c.BeginWrite({k});
        if (rng() % 2) {
          std::optional<storage::StoredRow> row;
          const size_t size = rng() % 8 == 0 ? 200 + rng() % 100 : rng() % 40;
          if (rng() % 5) row = Row(std::string(size, 'A'), ++version);
          const std::vector<const std::optional<storage::StoredRow>*> rows = {&row};
          c.EndWrite({k}, &rows);
          model[k] = row;
        } else {
          c.EndWrite({k});
          model.erase(k);
        }
        break;
      }
      default:
        check(k);
    }
    if (step % 10000 == 0) {
      for (const std::string& each : keys) check(each);
    }
  }
  size_t cached = 0;
  for (const std::string& each : keys) {
    check(each);
    const auto it = model.find(each);
    cached += it != model.end() && it->second ? 1 : 0;
  }
  EXPECT_EQ(c.entry_count(), cached);
}

// A prewarm stores the rows of a snapshot taken after its tickets: not a row whose shard had a
// write end since (it may predate the commit), not over a cached answer or a pending write, not
// an expired row, and it stops once a shard has no room instead of evicting.
TEST(ReadCache, APrewarmStoresOnlyRowsNoWriteMayHaveChangedAndNeverEvicts) {
  ReadCache c(1 << 20);
  storage::StoredRow out;
  c.Fill("cached", c.FillTicket("cached"), Row("fresh", 5));
  c.BeginWrite({"pending"});
  const std::vector<uint64_t> tickets = c.WarmTickets();  // then the snapshot begins
  c.BeginWrite({"written"});                              // a write that ends after the tickets
  c.EndWrite({"written"});
  const std::vector<storage::KeyedRow> rows = {
      {"cached", Row("stale", 1)},   {"pending", Row("stale", 1)}, {"written", Row("stale", 1)},
      {"expired", Row("x", 1, 500)}, {"plain", Row("p", 3)},
  };
  bool full = true;
  EXPECT_EQ(c.Warm(tickets, rows, /*now_ms=*/1000, &full), 1u);
  EXPECT_FALSE(full);
  ASSERT_EQ(c.Get("plain", 1000, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "p");
  EXPECT_EQ(out.version, 3);
  ASSERT_EQ(c.Get("cached", 1000, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(out.value, "fresh");
  EXPECT_EQ(c.Get("pending", 1000, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.Get("written", 1000, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.Get("expired", 1000, &out), ReadCache::Lookup::kMiss);
  c.EndWrite({"pending"});

  // Filling: rows far beyond the capacity. It says the cache is full once half of the shards had
  // no room, having evicted nothing (the cached key survives) and stayed within the capacity.
  std::vector<storage::KeyedRow> many;
  for (int i = 0; i < 20000; ++i) {
    many.push_back({"k" + std::to_string(i), Row(std::string(100, 'v'), 1)});
  }
  const size_t stored = c.Warm(c.WarmTickets(), many, 1000, &full);
  EXPECT_TRUE(full);
  EXPECT_GT(stored, 0u);
  EXPECT_LT(stored, many.size());
  EXPECT_LE(c.charged_bytes(), size_t{1} << 20);
  EXPECT_GT(c.charged_bytes(), (size_t{1} << 20) * 9 / 10) << "most shards are about full";
  EXPECT_EQ(c.Get("cached", 1000, &out), ReadCache::Lookup::kPresent);
  EXPECT_EQ(c.Get("k0", 1000, &out), ReadCache::Lookup::kPresent);
}

// Offers `n` keys of `prefix` with 200-byte values, each twice (the doorkeeper admits a key on its
// second miss once a shard is full).
void FillMany(ReadCache& c, const std::string& prefix, int n) {
  const std::string value(200, 'v');
  for (int i = 0; i < n; ++i) {
    const std::string k = prefix + std::to_string(i);
    c.Fill(k, c.FillTicket(k), Row(value, i));
    c.Fill(k, c.FillTicket(k), Row(value, i));
  }
}

constexpr size_t kNoCap = std::numeric_limits<size_t>::max();

TEST(CacheBudget, ParsesBytesAndPercentagesOfMemory) {
  EXPECT_EQ(*ParseCacheBudget("4096", 1000), 4096u);
  EXPECT_EQ(*ParseCacheBudget("0", 1000), 0u);
  EXPECT_EQ(*ParseCacheBudget("25%", 1000), 250u);
  EXPECT_EQ(*ParseCacheBudget("12.5%", 800), 100u);
  EXPECT_EQ(*ParseCacheBudget("100%", 800), 800u);
  for (const char* bad : {"", "%", "0%", "0.5%", "101%", "-1", "-5%", "1e3", "25 %", " 25%", "abc",
                          "nan%", "inf%", "4096B", "1.5", "99999999999999999999999"}) {
    const Result<size_t> r = ParseCacheBudget(bad, 1000);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("percentage of the server's memory"), std::string::npos);
  }
}

TEST(ReadCache, ACacheAloneMayTakeTheWholeSharedBudget) {
  const size_t total = 64 * 8192;
  auto budget = std::make_shared<CacheBudget>(total);
  ReadCache c(kNoCap, budget);
  EXPECT_EQ(budget->members(), 1u);
  EXPECT_EQ(c.limit_bytes(), total);
  FillMany(c, "k", 20000);
  EXPECT_LE(c.charged_bytes(), total);
  EXPECT_GT(c.charged_bytes(), total * 9 / 10);
  EXPECT_EQ(budget->used(), c.charged_bytes());
}

// Two databases' caches on one budget: the first, alone, fills all of it; the second then gets
// an equal share at once, the first gives its excess back on Trim (and on its own stores), and
// when the second goes the first may take everything again.
TEST(ReadCache, CachesSharingABudgetEachGetAShareAndGiveBackTheExcess) {
  const size_t total = 64 * 8192;
  auto budget = std::make_shared<CacheBudget>(total);
  ReadCache a(kNoCap, budget);
  FillMany(a, "a", 20000);
  ASSERT_GT(a.charged_bytes(), total * 9 / 10);
  {
    ReadCache b(kNoCap, budget);
    EXPECT_EQ(budget->members(), 2u);
    EXPECT_EQ(b.limit_bytes(), total / 2) << "the other leaves less than an equal share";
    FillMany(b, "b", 20000);
    EXPECT_LE(b.charged_bytes(), total / 2);
    EXPECT_GT(b.charged_bytes(), total / 2 * 9 / 10);
    EXPECT_GT(a.charged_bytes(), total / 2) << "a keeps its excess until it gives it back";
    const size_t a_limit = std::max(total / 2, total - b.charged_bytes());  // what b leaves
    EXPECT_EQ(a.limit_bytes(), a_limit);
    a.Trim();
    EXPECT_LE(a.charged_bytes(), a_limit);
    EXPECT_GT(a.charged_bytes(), total / 2 * 9 / 10);
    EXPECT_LE(budget->used(), total);
    // Both keep storing: together they stay within the budget.
    FillMany(a, "a-again", 5000);
    FillMany(b, "b-again", 5000);
    EXPECT_LE(b.charged_bytes(), total / 2 + total / 64);
    EXPECT_LE(budget->used(), total + total / 32);
    EXPECT_EQ(budget->used(), a.charged_bytes() + b.charged_bytes());

    // A third cache's prewarm takes no more than its share (a third) and says it is full.
    ReadCache c(kNoCap, budget);
    std::vector<storage::KeyedRow> rows;
    for (int i = 0; i < 20000; ++i) rows.push_back({"c" + std::to_string(i), Row("v", 1)});
    bool full = false;
    c.Warm(c.WarmTickets(), rows, 0, &full);
    EXPECT_TRUE(full);
    EXPECT_LE(c.charged_bytes(), total / 3);
    EXPECT_GT(c.charged_bytes(), total / 3 * 8 / 10);
  }
  // b and c are gone: their charges and memberships went with them.
  EXPECT_EQ(budget->members(), 1u);
  EXPECT_EQ(budget->used(), a.charged_bytes());
  EXPECT_EQ(a.limit_bytes(), total);
  FillMany(a, "a-alone", 20000);
  EXPECT_GT(a.charged_bytes(), total * 9 / 10);
}

TEST(ReadCache, ItsOwnCapacityBoundsACacheWithinALargerBudget) {
  const size_t capacity = 64 * 4096;
  auto budget = std::make_shared<CacheBudget>(size_t{1} << 30);
  ReadCache c(capacity, budget);
  EXPECT_EQ(c.limit_bytes(), capacity);
  FillMany(c, "k", 20000);
  EXPECT_LE(c.charged_bytes(), capacity);
  EXPECT_GT(c.charged_bytes(), capacity * 9 / 10);
}

TEST(ReadCache, ABudgetOfNothingTurnsTheCacheOff) {
  auto budget = std::make_shared<CacheBudget>(0);
  ReadCache c(kNoCap, budget);
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(budget->members(), 0u);
  EXPECT_EQ(c.limit_bytes(), 0u);
  FillMany(c, "k", 10);
  storage::StoredRow out;
  EXPECT_EQ(c.Get("k1", 0, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(budget->used(), 0u);
}

TEST(ReadCache, DisabledCacheNeverHits) {
  ReadCache c(0);
  EXPECT_FALSE(c.enabled());
  c.Fill("a", c.FillTicket("a"), Row("x", 1));
  storage::StoredRow out;
  EXPECT_EQ(c.Get("a", 0, &out), ReadCache::Lookup::kMiss);
  EXPECT_EQ(c.entry_count(), 0u);
}

}  // namespace
}  // namespace kvc::engine
