// ReadCache's coherence rules in isolation: fills that may predate a write are refused, a
// pending write hides the key, expired rows read as absent, and memory stays within bounds.
#include "engine/read_cache.h"

#include <gtest/gtest.h>

#include <string>

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
