// The dump format's pure parts: line readers, the batcher (batch bounds, line-numbered errors,
// the prefix rule) and query strings.
#include "service/admin/dump.h"

#include <gtest/gtest.h>

#include <sstream>

#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "service/query.h"

namespace kvc::service {
namespace {

// The import's clock for the batcher: a fixed time, so expiry tests need no real clock.
constexpr int64_t kNow = 1'800'000'000'000;

std::string Line(const std::string& key, const std::string& value_json) {
  return R"({"key":[{"type":"string","value":")" + key + R"("}],"value":)" + value_json +
         R"(,"versionstamp":"00000000000000010000"})";
}

std::vector<std::string> ReadAll(DumpReader& r) {
  std::vector<std::string> out;
  for (;;) {
    auto line = r.Next();
    EXPECT_TRUE(line.ok()) << line.status().ToString();
    if (!line.ok() || !line->has_value()) return out;
    out.emplace_back(**line);
  }
}

TEST(DumpReader, SplitsLinesFromStringsAndStreams) {
  const std::string text = "a\nbb\r\n\nlast";
  auto s = StringDumpReader(text);
  EXPECT_EQ(ReadAll(*s), (std::vector<std::string>{"a", "bb", "", "last"}));
  std::istringstream in(text);
  auto r = StreamDumpReader(&in, 100);
  EXPECT_EQ(ReadAll(*r), (std::vector<std::string>{"a", "bb", "", "last"}));
  std::istringstream ends_in_newline("x\ny\n");
  auto r2 = StreamDumpReader(&ends_in_newline, 100);
  EXPECT_EQ(ReadAll(*r2), (std::vector<std::string>{"x", "y"}));
}

TEST(DumpReader, StreamReadsLongLinesInPiecesAndCapsThem) {
  const std::string long_line(200000, 'x');
  std::istringstream in(long_line + "\nshort\n");
  auto r = StreamDumpReader(&in, 300000);
  EXPECT_EQ(ReadAll(*r), (std::vector<std::string>{long_line, "short"}));
  std::istringstream too_long(long_line + "\n");
  auto capped = StreamDumpReader(&too_long, 100000);
  auto line = capped->Next();
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(line.status().message().find("longer than 100000 bytes"), std::string::npos);
}

TEST(DumpBatcher, ClosesBatchesByCountAndBytes) {
  engine::Limits limits;
  DumpBatchOptions o;
  o.max_entries = 3;
  DumpBatcher b(o, limits);
  for (int i = 1; i <= 7; ++i) {
    ASSERT_TRUE(
        b.Add(Line("k" + std::to_string(i), R"({"type":"number","value":1})"), i, kNow).ok());
  }
  b.Finish();
  std::vector<int64_t> sizes;
  while (b.has_ready()) {
    DumpBatch batch = b.TakeReady();
    sizes.push_back(batch.entries);
    EXPECT_EQ(batch.write.mutations.size(), static_cast<size_t>(batch.entries));
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 1}));

  // 10 values of ~30 KB: the engine's 819,200-byte write limit caps a batch below max_bytes.
  DumpBatchOptions big;
  big.max_bytes = 10u << 20;
  DumpBatcher by_bytes(big, limits);
  const std::string value = R"({"type":"string","value":")" + std::string(30000, 'v') + "\"}";
  for (int i = 1; i <= 60; ++i)
    ASSERT_TRUE(by_bytes.Add(Line(std::to_string(i), value), i, kNow).ok());
  by_bytes.Finish();
  int batches = 0;
  int64_t entries = 0;
  while (by_bytes.has_ready()) {
    DumpBatch batch = by_bytes.TakeReady();
    size_t bytes = 0;
    for (const Mutation& m : batch.write.mutations) bytes += m.key.size() + m.value.data.size();
    EXPECT_LE(bytes, limits.max_total_mutation_bytes);
    EXPECT_TRUE(engine::ValidateAtomicWrite(batch.write, limits, 0).ok());
    entries += batch.entries;
    ++batches;
  }
  EXPECT_EQ(entries, 60);
  EXPECT_GE(batches, 3);
}

TEST(DumpBatcher, TracksLinesAndBytesAndSkipsBlankLines) {
  DumpBatcher b(DumpBatchOptions{}, engine::Limits{});
  const std::string l1 = Line("a", R"({"type":"null","value":null})");
  ASSERT_TRUE(b.Add(l1, 1, kNow).ok());
  ASSERT_TRUE(b.Add("", 2, kNow).ok());
  ASSERT_TRUE(b.Add("  \t", 3, kNow).ok());
  ASSERT_TRUE(b.Add(l1, 4, kNow).ok());
  b.Finish();
  ASSERT_TRUE(b.has_ready());
  DumpBatch batch = b.TakeReady();
  EXPECT_EQ(batch.entries, 2);
  EXPECT_EQ(batch.first_line, 1);
  EXPECT_EQ(batch.last_line, 4);
  EXPECT_EQ(batch.bytes, static_cast<int64_t>(2 * (l1.size() + 1)));
  EXPECT_FALSE(b.has_ready());
}

TEST(DumpBatcher, ErrorsNameTheLine) {
  DumpBatcher b(DumpBatchOptions{}, engine::Limits{});
  struct Case {
    std::string line;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"not json", "line 17: "},
      {R"({"key":[],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000"})",
       "line 17: Keys must not be empty"},
      {Line("k", R"({"type":"nope","value":1})"), "line 17: "},
      {Line("k", R"({"type":"Uint8Array","value":")" + std::string(90000, 'A') + "\"}"),
       "line 17: A value exceeds"},
      {R"({"key":[{"type":"string","value":"k"}]})", "line 17: "},
  };
  for (const Case& c : cases) {
    Status s = b.Add(c.line, 17, kNow);
    ASSERT_FALSE(s.ok()) << c.line.substr(0, 80);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(c.expect, 0), 0u) << s.message();
  }
  b.Finish();
  EXPECT_FALSE(b.has_ready());  // nothing of a refused line was added
}

TEST(DumpBatcher, PrefixRequiresKeysStrictlyUnderIt) {
  DumpBatchOptions o;
  o.prefix = codec::EncodeKey({codec::KeyPart::String("users")});
  DumpBatcher b(o, engine::Limits{});
  const std::string under =
      R"({"key":[{"type":"string","value":"users"},{"type":"number","value":1}],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000"})";
  EXPECT_TRUE(b.Add(under, 1, kNow).ok());
  Status exact = b.Add(Line("users", R"({"type":"null","value":null})"), 2, kNow);
  EXPECT_NE(exact.message().find("line 2: the key is not under the prefix"), std::string::npos);
  Status other = b.Add(Line("orders", R"({"type":"null","value":null})"), 3, kNow);
  EXPECT_FALSE(other.ok());
}

TEST(DumpLine, RoundTripsThroughTheBatcher) {
  const std::vector<std::string> values = {
      R"({"type":"KvU64","value":"18446744073709551615"})",
      R"({"type":"Uint8Array","value":"AAEC_w"})",
      R"({"type":"Map","value":[[{"type":"string","value":"a"},{"type":"bigint","value":"-5"}]]})",
      R"({"type":"Date","value":"2024-02-29T12:34:56.789Z"})",
  };
  DumpBatcher b(DumpBatchOptions{}, engine::Limits{});
  std::vector<Entry> entries;
  for (size_t i = 0; i < values.size(); ++i) {
    auto v = codec::KvValueFromJson(values[i]);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    Entry e{codec::EncodeKey({codec::KeyPart::Int(static_cast<int64_t>(i))}), v->data, v->encoding,
            7};
    auto line = DumpLine(e);
    ASSERT_TRUE(line.ok());
    ASSERT_EQ(line->back(), '\n');
    ASSERT_TRUE(b.Add(std::string_view(*line).substr(0, line->size() - 1), 1, kNow).ok());
    entries.push_back(std::move(e));
  }
  b.Finish();
  DumpBatch batch = b.TakeReady();
  ASSERT_EQ(batch.write.mutations.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const Mutation& m = batch.write.mutations[i];
    EXPECT_EQ(m.key, entries[i].key);
    EXPECT_EQ(m.value.encoding, entries[i].encoding);
    EXPECT_EQ(m.value.data, entries[i].value);
  }
}

// An export holds every key a client stored, and an import of it writes the same key bytes.
TEST(DumpLine, KeysThatAreNoDenoKeyRoundTrip) {
  const std::string users = codec::EncodeKey({codec::KeyPart::String("users")});
  const std::vector<std::string> keys = {
      "\x99"
      "abc",
      users + "\x99", std::string("\x1d\x02\x00\x05", 4), std::string("\x02\xc3\x28\x00", 4)};
  DumpBatcher b(DumpBatchOptions{}, engine::Limits{});
  for (size_t i = 0; i < keys.size(); ++i) {
    auto line = DumpLine(Entry{keys[i], "v", ValueEncoding::kBytes, 7});
    ASSERT_TRUE(line.ok()) << line.status().ToString();
    EXPECT_NE(line->find(R"({"type":"raw","value":")"), std::string::npos) << *line;
    Status s = b.Add(std::string_view(*line).substr(0, line->size() - 1), 1, kNow);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  b.Finish();
  DumpBatch batch = b.TakeReady();
  ASSERT_EQ(batch.write.mutations.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(batch.write.mutations[i].key, keys[i]);
}

TEST(Query, ParsesDecodesAndEncodes) {
  auto q = ParseQuery("mode=replace&prefix=%5B%7B%22a%22%7D%5D&&flag&sp=a+b");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 4u);
  EXPECT_EQ(*FindParam(*q, "mode"), "replace");
  EXPECT_EQ(*FindParam(*q, "prefix"), R"([{"a"}])");
  EXPECT_EQ(*FindParam(*q, "flag"), "");
  EXPECT_EQ(*FindParam(*q, "sp"), "a b");
  EXPECT_EQ(FindParam(*q, "none"), nullptr);
  EXPECT_FALSE(ParseQuery("a=%2").ok());
  EXPECT_FALSE(ParseQuery("a=%zz").ok());
  const std::string json = R"([{"type":"string","value":"a b&c"}])";
  auto back = ParseQuery("p=" + EncodeQueryValue(json));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*FindParam(*back, "p"), json);
}

// An entry's expiry is on its dump line and comes back from it; an entry already expired when
// its line is read is left out and counted; a line without expires_at never expires.
TEST(DumpLine, CarriesExpiryAndTheBatcherSkipsExpiredEntries) {
  const std::string a = codec::EncodeKey({codec::KeyPart::String("a")});
  const std::string b_key = codec::EncodeKey({codec::KeyPart::String("b")});
  Entry later{a, "v", ValueEncoding::kBytes, 7, kNow + 60'000};
  Entry gone{b_key, "v", ValueEncoding::kBytes, 7, kNow - 1};
  auto later_line = DumpLine(later);
  auto gone_line = DumpLine(gone);
  ASSERT_TRUE(later_line.ok() && gone_line.ok());
  // 1'800'000'060'000 ms is 2027-01-15T08:01:00.000Z.
  EXPECT_NE(later_line->find(R"(,"expires_at":"2027-01-15T08:01:00.000Z"})"), std::string::npos)
      << *later_line;
  auto never = DumpLine(Entry{a, "v", ValueEncoding::kBytes, 7});
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(never->find("expires_at"), std::string::npos) << *never;

  DumpBatcher b(DumpBatchOptions{}, engine::Limits{});
  auto no_newline = [](const std::string& l) {
    return std::string_view(l).substr(0, l.size() - 1);
  };
  ASSERT_TRUE(b.Add(no_newline(*later_line), 1, kNow).ok());
  ASSERT_TRUE(b.Add(no_newline(*gone_line), 2, kNow).ok());
  ASSERT_TRUE(b.Add(Line("c", R"({"type":"null","value":null})"), 3, kNow).ok());  // no field
  // null and any offset are accepted; a time that is none is an error naming the line.
  const std::string with_null =
      R"({"key":[{"type":"string","value":"d"}],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000","expires_at":null})";
  ASSERT_TRUE(b.Add(with_null, 4, kNow).ok());
  const std::string offset =
      R"({"key":[{"type":"string","value":"e"}],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000","expires_at":"2027-01-15T09:01:00+01:00"})";
  ASSERT_TRUE(b.Add(offset, 5, kNow).ok());
  const std::string bad =
      R"({"key":[{"type":"string","value":"f"}],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000","expires_at":"tomorrow"})";
  Status s = b.Add(bad, 6, kNow);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("line 6: bad KvEntryJSON: expires_at", 0), 0u) << s.message();
  EXPECT_EQ(b.skipped_expired(), 1);
  b.Finish();
  DumpBatch batch = b.TakeReady();
  ASSERT_EQ(batch.write.mutations.size(), 4u);
  EXPECT_EQ(batch.write.mutations[0].key, a);
  EXPECT_EQ(batch.write.mutations[0].expire_at_ms, kNow + 60'000);
  EXPECT_LE(batch.write.mutations[1].expire_at_ms, 0);  // never
  EXPECT_LE(batch.write.mutations[2].expire_at_ms, 0);
  EXPECT_EQ(batch.write.mutations[3].expire_at_ms, kNow + 60'000);
}

}  // namespace
}  // namespace kvc::service
