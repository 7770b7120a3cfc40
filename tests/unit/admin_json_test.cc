// Admin API request parsing (codec/admin_json.h): schema validation against the embedded
// schemas/admin-api.schema.json, key ranges chosen as Deno.Kv.list chooses them, cursors,
// versionstamp checks, and the entry answers.
#include "codec/admin_json.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"

namespace kvc::codec {
namespace {

std::string Key(const std::vector<KeyPart>& parts) { return EncodeKey(parts); }

TEST(AdminJson, DefinitionsValidate) {
  EXPECT_TRUE(ValidateAdminJson("DatabaseList", R"({"databases":[]})").ok());
  EXPECT_FALSE(ValidateAdminJson("DatabaseList", R"({})").ok());
  EXPECT_TRUE(ValidateAdminJson("Error", R"({"error":"x","code":"not_found"})").ok());
  const Status missing = ValidateAdminJson("NoSuchDefinition", "{}");
  EXPECT_EQ(missing.code(), StatusCode::kInternal);
  const Status bad = ValidateAdminJson("DatabaseList", "{");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

TEST(AdminJson, DatabaseAndTokenRequests) {
  auto db = ParseAdminDatabaseRequest(R"({"name":"sales"})");
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db->name, "sales");
  auto extra = ParseAdminDatabaseRequest(R"({"name":"sales","x":1})");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("additionalProperties"), std::string::npos);
  auto t = ParseAdminTokenRequest(R"({"database":"sales","scope":"read","rate_limit":5})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->expires, "never");
  EXPECT_EQ(t->rate_limit, 5);
  auto unlimited =
      ParseAdminTokenRequest(R"({"database":"sales","scope":"read","rate_limit":null})");
  ASSERT_TRUE(unlimited.ok());
  EXPECT_LT(unlimited->rate_limit, 0);  // null: the server's default
  EXPECT_FALSE(ParseAdminTokenRequest(R"({"database":"sales","scope":"root"})").ok());
  EXPECT_EQ(t->databases, std::vector<std::string>{"sales"});
  EXPECT_FALSE(t->all_databases);
}

// A token's databases: one ("database"), several ("databases") or all ("all_databases": true),
// exactly one of the three.
TEST(AdminJson, TokenRequestForSeveralOrAllDatabases) {
  auto several = ParseAdminTokenRequest(R"({"databases":["a","b"],"scope":"write"})");
  ASSERT_TRUE(several.ok()) << several.status().ToString();
  EXPECT_EQ(several->databases, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(several->all_databases);
  auto all = ParseAdminTokenRequest(R"({"all_databases":true,"scope":"read"})");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->all_databases);
  EXPECT_TRUE(all->databases.empty());
  for (const char* bad : {
           R"({"scope":"read"})",
           R"({"all_databases":false,"scope":"read"})",
           R"({"database":"a","databases":["b"],"scope":"read"})",
           R"({"database":"a","all_databases":true,"scope":"read"})",
           R"({"databases":["a"],"all_databases":true,"scope":"read"})",
           R"({"databases":[],"scope":"read"})",
           R"({"databases":[""],"scope":"read"})",
           R"({"databases":"a","scope":"read"})",
           R"({"databases":[1],"scope":"read"})",
           R"({"all_databases":"yes","scope":"read"})",
       }) {
    auto r = ParseAdminTokenRequest(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(AdminJson, RangesAsDenoList) {
  const std::string a = Key({KeyPart::String("a")});
  auto all = ParseAdminListRequest("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->range.start, std::string(1, '\x00'));
  EXPECT_EQ(all->range.end, std::string(1, '\xff'));
  EXPECT_EQ(all->limit, 100);

  auto prefix = ParseAdminListRequest(R"({"prefix":[{"type":"string","value":"a"}],"limit":5})");
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(prefix->range.start, a + std::string(1, '\x00'));
  EXPECT_EQ(prefix->range.end, a + std::string(1, '\xff'));
  EXPECT_EQ(prefix->limit, 5);

  const std::string a5 = Key({KeyPart::String("a"), KeyPart::Float(5)});
  auto start = ParseAdminListRequest(
      R"({"prefix":[{"type":"string","value":"a"}],"start":[{"type":"string","value":"a"},{"type":"number","value":5}]})");
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->range.start, a5);
  EXPECT_EQ(start->range.end, a + std::string(1, '\xff'));

  auto outside = ParseAdminListRequest(
      R"({"prefix":[{"type":"string","value":"a"}],"end":[{"type":"string","value":"b"}]})");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().message(), "'end' must be inside 'prefix'.");
  EXPECT_FALSE(ParseAdminListRequest(R"({"start":[{"type":"string","value":"a"}]})").ok());
  auto backwards = ParseAdminListRequest(
      R"({"start":[{"type":"string","value":"b"}],"end":[{"type":"string","value":"a"}]})");
  EXPECT_FALSE(backwards.ok());
  EXPECT_FALSE(ParseAdminListRequest(R"({"limit":0})").ok());
  EXPECT_FALSE(ParseAdminListRequest(R"({"limit":1001})").ok());
}

TEST(AdminJson, CursorContinuesInTheListingsDirection) {
  const std::string last = Key({KeyPart::String("a"), KeyPart::Float(2)});
  const std::string cursor = AdminCursor(last);
  const std::string body =
      R"({"prefix":[{"type":"string","value":"a"}],"cursor":")" + cursor + "\"";
  auto fwd = ParseAdminListRequest(body + "}");
  ASSERT_TRUE(fwd.ok());
  EXPECT_EQ(fwd->range.start, last + std::string(1, '\x00'));  // strictly after the last key
  auto rev = ParseAdminListRequest(body + R"(,"reverse":true})");
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(rev->range.end, last);  // strictly before it
  // A cursor outside the range cannot widen it.
  auto wide = ParseAdminListRequest(R"({"prefix":[{"type":"string","value":"a"}],"cursor":")" +
                                    AdminCursor(Key({KeyPart::String("z")})) + "\"}");
  ASSERT_TRUE(wide.ok());
  EXPECT_LE(wide->range.start, wide->range.end);
  EXPECT_FALSE(ParseAdminListRequest(R"({"cursor":"***"})").ok());
}

TEST(AdminJson, SetChecksAndValues) {
  auto set = ParseAdminSetRequest(
      R"({"key":[{"type":"string","value":"k"}],"value":{"type":"KvU64","value":"7"},"versionstamp":"00000000000000010000","expire_in":60000})",
      15);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->value.encoding, ValueEncoding::kLe64);
  ASSERT_TRUE(set->check.has_value());
  EXPECT_EQ(set->check->size(), 10u);
  EXPECT_EQ(set->expire_in_ms, 60000);
  auto create = ParseAdminSetRequest(
      R"({"key":[{"type":"string","value":"k"}],"value":{"type":"string","value":"v"},"versionstamp":null})",
      15);
  ASSERT_TRUE(create.ok());
  ASSERT_TRUE(create->check.has_value());
  EXPECT_TRUE(create->check->empty());  // must not exist
  EXPECT_EQ(create->value.encoding, ValueEncoding::kV8);
  EXPECT_EQ(create->value.data.substr(0, 2), std::string("\xff\x0f", 2));
  auto blind = ParseAdminDeleteRequest(R"({"key":[{"type":"string","value":"k"}]})");
  ASSERT_TRUE(blind.ok());
  EXPECT_FALSE(blind->check.has_value());
  auto upper = ParseAdminDeleteRequest(
      R"({"key":[{"type":"string","value":"k"}],"versionstamp":"0000000000000001000A"})");
  EXPECT_FALSE(upper.ok());
  auto bad_value = ParseAdminSetRequest(
      R"({"key":[{"type":"string","value":"k"}],"value":{"type":"Mystery","value":1}})", 15);
  ASSERT_FALSE(bad_value.ok());
  EXPECT_EQ(bad_value.status().message().rfind("'value': ", 0), 0u);
}

// A set names an absolute expiry (any RFC 3339 offset) or null (never), or a relative one;
// not both. Answers give an entry's expiry as expires_at in UTC with milliseconds.
TEST(AdminJson, ExpiryInSetsAndAnswers) {
  const std::string head =
      R"({"key":[{"type":"string","value":"k"}],"value":{"type":"string","value":"v"})";
  auto at = ParseAdminSetRequest(head + R"(,"expires_at":"2027-01-15T09:01:00.5+01:00"})", 15);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  ASSERT_TRUE(at->expire_at_ms.has_value());
  EXPECT_EQ(*at->expire_at_ms, 1'800'000'060'500);
  EXPECT_EQ(at->expire_in_ms, 0);
  auto cleared = ParseAdminSetRequest(head + R"(,"expires_at":null})", 15);
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_FALSE(cleared->expire_at_ms.has_value());
  auto both = ParseAdminSetRequest(head + R"(,"expires_at":null,"expire_in":5})", 15);
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  auto bad = ParseAdminSetRequest(head + R"(,"expires_at":"soon"})", 15);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("'expires_at': ", 0), 0u) << bad.status().message();

  Entry e{Key({KeyPart::String("k")}), "v", ValueEncoding::kBytes, 1, 1'800'000'060'500};
  for (bool raw : {false, true}) {
    auto json = AdminEntryJson(e, raw);
    ASSERT_TRUE(json.ok());
    EXPECT_NE(json->find(R"("expires_at":"2027-01-15T08:01:00.500Z")"), std::string::npos) << *json;
    EXPECT_TRUE(ValidateAdminJson("ListedEntry", *json).ok()) << *json;
    EXPECT_TRUE(ValidateAdminJson("Entry", *json).ok()) << *json;
  }
  auto item = AdminWatchItemJson(e.key, &e);
  ASSERT_TRUE(item.ok());
  EXPECT_TRUE(ValidateAdminJson("WatchEvent", R"({"entries":[)" + *item + "]}").ok()) << *item;
  // The schema holds answers to its form: a time that is not UTC with milliseconds is refused.
  EXPECT_FALSE(
      ValidateAdminJson(
          "ListedEntry",
          R"({"key":[],"value":{"type":"null","value":null},"versionstamp":"00000000000000010000","expires_at":"2027-01-15T08:01:00Z"})")
          .ok());
  // Past the year 9999 as JavaScript writes it; past Date's range, Date's last time; both read
  // back (a client may store any expiry over KV Connect).
  EXPECT_EQ(ExpiryToJsonTime(253'402'300'800'000), "+010000-01-01T00:00:00.000Z");
  EXPECT_EQ(ExpiryToJsonTime(INT64_MAX), "+275760-09-13T00:00:00.000Z");
  EXPECT_EQ(*ExpiryFromJsonTime("+275760-09-13T00:00:00.000Z"), 8'640'000'000'000'000);
  Entry far{Key({KeyPart::String("k")}), "v", ValueEncoding::kBytes, 1, INT64_MAX};
  auto far_json = AdminEntryJson(far, false);
  ASSERT_TRUE(far_json.ok());
  EXPECT_TRUE(ValidateAdminJson("ListedEntry", *far_json).ok()) << *far_json;
  EXPECT_FALSE(ExpiryFromJsonTime("2027-02-30T00:00:00Z").ok());
  Entry never{Key({KeyPart::String("k")}), "v", ValueEncoding::kBytes, 1};
  auto plain = AdminEntryJson(never, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("expires_at"), std::string::npos) << *plain;
}

TEST(AdminJson, WatchKeysOrPrefix) {
  auto keys = ParseAdminWatchRequest(R"({"keys":[[{"type":"string","value":"a"}],[]]})");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->keys.size(), 2u);
  EXPECT_FALSE(keys->prefix.has_value());
  auto prefix = ParseAdminWatchRequest(R"({"prefix":[{"type":"string","value":"a"}]})");
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(*prefix->prefix, Key({KeyPart::String("a")}));
  EXPECT_FALSE(ParseAdminWatchRequest(R"({})").ok());
  EXPECT_FALSE(ParseAdminWatchRequest(R"({"keys":[[]],"prefix":[]})").ok());
}

TEST(AdminJson, EntryAnswers) {
  Entry e{Key({KeyPart::String("k")}), std::string("\x01\x02", 2), ValueEncoding::kBytes, 1};
  auto json = AdminEntryJson(e, /*raw=*/true);
  ASSERT_TRUE(json.ok());
  EXPECT_TRUE(ValidateAdminJson("ListedEntry", *json).ok()) << *json;
  EXPECT_NE(json->find(R"("raw":{"encoding":"bytes","bytes":"AQI"})"), std::string::npos) << *json;
  auto list = AdminEntryListJson({e, e}, /*more=*/true, false);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(ValidateAdminJson("EntryList", *list).ok()) << *list;
  EXPECT_NE(list->find(R"("cursor":")" + AdminCursor(e.key) + "\""), std::string::npos);
  auto absent = AdminWatchItemJson(e.key, nullptr);
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, R"({"key":[{"type":"string","value":"k"}],"value":null,"versionstamp":null})");
  Entry broken{"\x7f", std::string(3, 'x'), ValueEncoding::kLe64, 1};  // the data path refuses it
  EXPECT_EQ(AdminEntryJson(broken, false).status().code(), StatusCode::kCorruption);
}

// A client may store any bytes as a key (KV Connect keys are opaque): listing, reading,
// watching and deleting such a key works through its raw part, never as "damaged data".
TEST(AdminJson, KeysThatAreNoDenoKeyAreShownAndAccepted) {
  const std::string poison =
      "\x99"
      "abc";
  const std::string raw_key = R"([{"type":"raw","value":"mWFiYw"}])";
  Entry e{poison, "v", ValueEncoding::kBytes, 1};
  auto json = AdminEntryJson(e, /*raw=*/true);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->rfind(R"({"key":)" + raw_key + ",", 0), 0u) << *json;
  EXPECT_TRUE(ValidateAdminJson("ListedEntry", *json).ok()) << *json;
  const Entry good{Key({KeyPart::String("k")}), "v", ValueEncoding::kBytes, 1};
  auto list = AdminEntryListJson({good, e}, /*more=*/true, false);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(ValidateAdminJson("EntryList", *list).ok()) << *list;
  auto absent = AdminWatchItemJson(poison, nullptr);
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, R"({"key":)" + raw_key + R"(,"value":null,"versionstamp":null})");

  auto get = ParseAdminGetRequest(R"({"key":)" + raw_key + "}");
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->key, poison);
  auto del = ParseAdminDeleteRequest(R"({"key":)" + raw_key + R"(,"versionstamp":null})");
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(del->key, poison);
  auto set = ParseAdminSetRequest(
      R"({"key":)" + raw_key + R"(,"value":{"type":"null","value":null}})", 15);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->key, poison);
  auto watch = ParseAdminWatchRequest(R"({"keys":[)" + raw_key + "]}");
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_EQ(watch->keys, std::vector<std::string>{poison});
  // A raw part in a selector names bytes too; every key starting with 0x99 is under it.
  auto prefix = ParseAdminListRequest(R"({"prefix":[{"type":"raw","value":"mQ"}]})");
  ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
  EXPECT_LT(prefix->range.start, poison);
  EXPECT_GT(prefix->range.end, poison);
  auto bad = ParseAdminGetRequest(R"({"key":[{"type":"raw","value":"@@"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("'key': ", 0), 0u) << bad.status().message();
}

TEST(AdminJsonTest, GetManyKeepsTheOrderAndNamesTheBadKey) {
  auto many = ParseAdminGetManyRequest(
      R"({"keys":[[{"type":"string","value":"b"}],[{"type":"raw","value":"mQ"}],)"
      R"([{"type":"string","value":"a"}]],"raw":true})");
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  ASSERT_EQ(many->keys.size(), 3u);
  EXPECT_EQ(many->keys[1], std::string("\x99"));
  EXPECT_GT(many->keys[0], many->keys[2]);  // "b" before "a", as asked
  EXPECT_TRUE(many->raw);
  // The bad key is named by its place in the list.
  auto bad = ParseAdminGetManyRequest(
      R"({"keys":[[{"type":"string","value":"a"}],[{"type":"raw","value":"@@"}]]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("'keys[1]': ", 0), 0u) << bad.status().message();
  // No keys, or keys that are no list: refused by the schema.
  for (const char* body :
       {R"({"keys":[]})", R"({"keys":{"a":1}})", R"({})", R"({"keys":[[]],"extra":1})"}) {
    auto r = ParseAdminGetManyRequest(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  }
}

}  // namespace
}  // namespace kvc::codec
