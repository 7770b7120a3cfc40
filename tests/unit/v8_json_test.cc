#include "codec/v8/v8_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "codec/key_codec.h"
#include "testutil/hex.h"

namespace kvc::codec {
namespace {

using testutil::FromHex;
using testutil::ToHex;

// JSON -> tree -> JSON.
std::string Normalize(std::string_view json, const V8JsonOptions& options = {}) {
  Result<V8Value> value = V8ValueFromJson(json, options);
  if (!value.ok()) return value.status().message();
  Result<std::string> out = V8ValueToJson(*value, options);
  return out.ok() ? *out : out.status().message();
}

// JSON -> V8 bytes (format 15) as hex, or the error.
std::string ToV8(std::string_view json) {
  Result<KvValue> value = KvValueFromJson(json);
  if (!value.ok()) return value.status().message();
  return ToHex(value->data);
}

// V8 bytes -> JSON.
std::string FromV8(std::string_view hex, const V8JsonOptions& options = {}) {
  Result<V8Value> value = DecodeV8Value(FromHex(hex));
  if (!value.ok()) return value.status().message();
  Result<std::string> json = V8ValueToJson(*value, options);
  return json.ok() ? *json : json.status().message();
}

TEST(V8JsonTest, EveryTypeRoundTripsThroughItsJsonView) {
  const std::vector<std::string> views = {
      R"({"type":"undefined"})",
      R"({"type":"null","value":null})",
      R"({"type":"boolean","value":true})",
      R"({"type":"number","value":42})",
      R"({"type":"number","value":-0})",
      R"({"type":"number","value":1.5e-7})",
      R"({"type":"number","value":"NaN"})",
      R"({"type":"number","value":"-Infinity"})",
      R"({"type":"bigint","value":"-1267650600228229401496703205376"})",
      "{\"type\":\"string\",\"value\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
      R"({"type":"string","value":"lone \ud800 and \udc00"})",
      R"({"type":"string","value":"\"q\" \\ \n\t\u0001"})",
      R"({"type":"object","value":{"0":{"type":"number","value":1},"a":{"type":"object","value":{}}}})",
      R"({"type":"Array","value":[{"type":"number","value":1},null,{"type":"string","value":"x"}]})",
      R"({"type":"Array","value":[],"length":4})",
      R"({"type":"Array","value":[{"type":"number","value":1}],"properties":{"x":{"type":"boolean","value":false}}})",
      R"({"type":"Map","value":[[{"type":"number","value":1},{"type":"string","value":"a"}]]})",
      R"({"type":"Set","value":[{"type":"null","value":null}]})",
      R"({"type":"Date","value":"2023-11-14T22:13:20.123Z"})",
      R"({"type":"Date","value":"+275760-09-13T00:00:00.000Z"})",
      R"({"type":"Date","value":"-000001-01-01T00:00:00.000Z"})",
      R"({"type":"Date","value":null})",
      R"({"type":"RegExp","value":"/a\\/b/dgimsy"})",
      R"({"type":"RegExp","value":"/[a]/v"})",
      R"({"type":"ArrayBuffer","value":"AQID"})",
      R"({"type":"ArrayBuffer","value":"AQID","maxByteLength":8})",
      R"({"type":"Uint8Array","value":"AQIDBAUG","byteOffset":2,"byteLength":3})",
      R"({"type":"Float64Array","value":"AAAAAAAA-D8"})",
      R"({"type":"Float16Array","value":"AD4"})",
      R"({"type":"DataView","value":"AQI"})",
      R"({"type":"BigUint64Array","value":"__________8"})",
      R"({"type":"Uint8Array","value":"AAAAAA","maxByteLength":8,"lengthTracking":true})",
      R"({"type":"BooleanObject","value":false})",
      R"({"type":"NumberObject","value":"Infinity"})",
      R"({"type":"BigIntObject","value":"5"})",
      R"({"type":"StringObject","value":"s"})",
      R"({"type":"Error","value":{}})",
      R"({"type":"TypeError","value":{"message":"bad","cause":{"type":"number","value":42},"stack":"TypeError: bad"}})",
      R"({"type":"URIError","value":{"message":"m"}})",
      R"({"type":"HostObject","value":{"type":"object","value":{}}})",
      R"({"type":"object","value":{"self":{"type":"ref","value":0}}})",
  };
  for (const std::string& json : views) {
    EXPECT_EQ(Normalize(json), json);
    Result<KvValue> bytes = KvValueFromJson(json);
    ASSERT_TRUE(bytes.ok()) << json << ": " << bytes.status().ToString();
    EXPECT_EQ(*KvValueToJson(*bytes), json);
  }
}

TEST(V8JsonTest, WritesTheBytesDenoWrites) {
  EXPECT_EQ(ToV8(R"({"type":"object","value":{"a":{"type":"number","value":1}}})"),
            "FF 0F 6F 22 01 61 49 02 7B 01");
  EXPECT_EQ(
      ToV8(R"({"type":"Array","value":[{"type":"number","value":1},{"type":"number","value":2}]})"),
      "FF 0F 41 02 49 02 49 04 24 00 02");
  EXPECT_EQ(ToV8(R"({"type":"Array","value":[null,{"type":"number","value":1}]})"),
            "FF 0F 61 02 49 02 49 02 40 01 02");
  // Index keys first, as numbers, whatever the JSON order.
  EXPECT_EQ(
      ToV8(
          R"({"type":"object","value":{"b":{"type":"null","value":null},"1":{"type":"null","value":null}}})"),
      "FF 0F 6F 49 02 30 22 01 62 30 7B 02");
  EXPECT_EQ(ToV8(R"({"type":"object","value":{"u":{"type":"Uint8Array","value":"AQID"}}})"),
            "FF 0F 6F 22 01 75 42 03 01 02 03 56 42 00 03 00 7B 01");
  EXPECT_EQ(
      ToV8(R"({"type":"Array","value":[{"type":"object","value":{}},{"type":"ref","value":1}]})"),
      "FF 0F 41 02 6F 7B 00 5E 01 24 00 02");
  EXPECT_EQ(ToV8(R"({"type":"RegExp","value":"/ab/gi"})"), "FF 0F 52 22 02 61 62 03");
  EXPECT_EQ(ToV8(R"({"type":"Date","value":"1970-01-01T00:00:00.000Z"})"),
            "FF 0F 44 00 00 00 00 00 00 00 00");
  EXPECT_EQ(ToV8(R"({"type":"bigint","value":"1"})"), "FF 0F 5A 10 01 00 00 00 00 00 00 00");
  EXPECT_EQ(
      ToV8(
          R"({"type":"TypeError","value":{"message":"m","cause":{"type":"null","value":null},"stack":"s"}})"),
      "FF 0F 72 54 6D 22 01 6D 73 22 01 73 63 30 2E");
  // A view over an earlier buffer.
  EXPECT_EQ(
      ToV8(
          R"({"type":"Array","value":[{"type":"Uint8Array","value":"AQID"},{"type":"Uint8Array","buffer":{"type":"ref","value":1},"byteOffset":1,"byteLength":2}]})"),
      "FF 0F 41 02 42 03 01 02 03 56 42 00 03 00 5E 01 56 42 01 02 00 24 00 02");
}

TEST(V8JsonTest, SharedObjectsExpandOrBecomeRefs) {
  const std::string shared = "FF 0F 41 02 6F 22 01 78 49 02 7B 01 5E 01 24 00 02";
  EXPECT_EQ(
      FromV8(shared),
      R"({"type":"Array","value":[{"type":"object","value":{"x":{"type":"number","value":1}}},)"
      R"({"type":"object","value":{"x":{"type":"number","value":1}}}]})");
  EXPECT_EQ(
      FromV8(shared, V8JsonOptions{.expand_shared = false}),
      R"({"type":"Array","value":[{"type":"object","value":{"x":{"type":"number","value":1}}},)"
      R"({"type":"ref","value":1}]})");
  // Ids in the expanded view count the copies: the cycle inside the second copy refers to it.
  const std::string cycle_twice = "FF 0F 41 02 6F 22 01 73 5E 01 7B 01 5E 01 24 00 02";
  EXPECT_EQ(FromV8(cycle_twice),
            R"({"type":"Array","value":[{"type":"object","value":{"s":{"type":"ref","value":1}}},)"
            R"({"type":"object","value":{"s":{"type":"ref","value":2}}}]})");
  // Doubling shared arrays would explode: the view stops at its limit and KvValueToJson falls
  // back to refs.
  std::string doubling = "FF 0F";
  for (int i = 0; i < 40; ++i) doubling += " 41 02";
  doubling += " 30 30 24 00 02";
  for (int i = 39; i > 0; --i)
    doubling += " 5E " + ToHex(std::string(1, static_cast<char>(i))) + " 24 00 02";
  Result<V8Value> tree = DecodeV8Value(FromHex(doubling));
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(V8ValueToJson(*tree).status().message(), "JSON view too large");
  Result<std::string> json = KvValueToJson(KvValue{FromHex(doubling), ValueEncoding::kV8});
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find(R"("type":"ref")"), std::string::npos);
  EXPECT_EQ(ToHex(*EncodeV8Value(*V8ValueFromJson(*json))), doubling);
}

TEST(V8JsonTest, AcceptsKvToolboxSpellings) {
  EXPECT_EQ(Normalize(R"({"type":"json_object","value":{"a":{"type":"json_array","value":[]}}})"),
            R"({"type":"object","value":{"a":{"type":"Array","value":[]}}})");
  EXPECT_EQ(Normalize(R"({"type":"json_map","value":[]})"), R"({"type":"Map","value":[]})");
  EXPECT_EQ(Normalize(R"({"type":"json_set","value":[]})"), R"({"type":"Set","value":[]})");
  EXPECT_EQ(Normalize(R"({"type":"Uint8Array","byteLength":3,"value":"AQID"})"),
            R"({"type":"Uint8Array","value":"AQID"})");
  EXPECT_EQ(Normalize(R"({"type":"ArrayBuffer","byteLength":3,"value":"AQID"})"),
            R"({"type":"ArrayBuffer","value":"AQID"})");
  // Standard base64, padded, is read too.
  EXPECT_EQ(Normalize(R"({"type":"ArrayBuffer","value":"+/8="})"),
            R"({"type":"ArrayBuffer","value":"-_8"})");
  EXPECT_EQ(Normalize(R"({"type":"Date","value":"2020-01-01"})"),
            R"({"type":"Date","value":"2020-01-01T00:00:00.000Z"})");
  EXPECT_EQ(Normalize(R"({"type":"Date","value":"2020-01-01T01:30+01:30"})"),
            R"({"type":"Date","value":"2020-01-01T00:00:00.000Z"})");
  EXPECT_EQ(Normalize(R"({"type":"Date","value":"2020-02-29T23:59:59.9999Z"})"),
            R"({"type":"Date","value":"2020-02-29T23:59:59.999Z"})");
}

TEST(V8JsonTest, RejectsBadJson) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "invalid JSON: unexpected end at offset 0"},
      {R"({"type":"null"} x)", "invalid JSON: unexpected text after the value at offset 16"},
      {R"({"type":"number","value":01})", "invalid JSON: bad number at offset 27"},
      {R"({"type":"number","value":1e999})", "invalid JSON: number out of range at offset 30"},
      {R"({"type":"string","value":"\x"})", "invalid JSON: bad escape at offset 28"},
      {"{\"type\":\"string\",\"value\":\"\x01\"}",
       "invalid JSON: control character in string at offset 26"},
      {"{\"type\":\"string\",\"value\":\"\xff\"}", "invalid JSON: malformed UTF-8 at offset 27"},
      {R"({"type":"null","type":"null"})", "invalid JSON: duplicate member type at offset 21"},
      {R"([1,])", "invalid JSON: bad number at offset 3"},
      {R"({"type":"nope"})", "bad KvValueJSON: unknown type nope"},
      {R"({"value":1})", "bad KvValueJSON: missing type"},
      {R"([])", "bad KvValueJSON: a value is not an object"},
      {R"({"type":"number","value":"1"})", "bad KvValueJSON: not a number"},
      {R"({"type":"bigint","value":"1.5"})", "bad bigint: not a decimal integer"},
      {R"({"type":"bigint","value":"-"})", "bad bigint: no digits"},
      {R"({"type":"Map","value":[[{"type":"null"}]]})",
       "bad KvValueJSON: a Map entry is not a [key, value] pair"},
      {R"({"type":"Date","value":"2020-02-30"})", "bad KvValueJSON: bad date string"},
      {R"({"type":"Date","value":"2020-01-01T00:00"})", "bad KvValueJSON: bad date string"},
      {R"({"type":"Date","value":"+275760-09-13T00:00:00.001Z"})",
       "bad KvValueJSON: date out of range"},
      {R"({"type":"RegExp","value":"ab"})", "bad KvValueJSON: RegExp is not /source/flags"},
      {R"({"type":"RegExp","value":"/a/gg"})", "bad KvValueJSON: bad RegExp flags"},
      {R"({"type":"ArrayBuffer","value":"A"})", "bad KvValueJSON: bad base64"},
      {R"({"type":"ArrayBuffer","value":"AQID","byteLength":2})",
       "bad KvValueJSON: ArrayBuffer byteLength differs from value"},
      {R"({"type":"Uint8Array","value":"AQID","byteOffset":4})",
       "bad KvValueJSON: byteOffset beyond the buffer"},
      {R"({"type":"Array","value":[],"length":-1})",
       "bad KvValueJSON: length is not a non-negative integer"},
      {R"({"type":"Array","value":[],"properties":{"0":{"type":"null"}}})",
       "bad KvValueJSON: Array properties may not hold indices or length"},
      {R"({"type":"ref","value":0})", "bad KvValueJSON: ref to no earlier object"},
      {R"({"type":"Error","value":{"name":"x"}})", "bad KvValueJSON: unknown error member name"},
      {R"({"type":"KvU64","value":"1"})", "bad KvValueJSON: KvU64 can only be a whole KV value"},
  };
  for (const auto& [json, message] : cases) {
    Result<V8Value> value = V8ValueFromJson(json);
    EXPECT_FALSE(value.ok()) << json;
    if (!value.ok()) {
      EXPECT_EQ(value.status().message(), message) << json;
    }
  }
  std::string deep;
  for (int i = 0; i < 1000; ++i) deep += "[";
  EXPECT_EQ(V8ValueFromJson(deep).status().message(), "JSON too deep");
  // A tree can be valid JSON and still not encode (a view longer than its buffer).
  EXPECT_EQ(ToV8(R"({"type":"Int32Array","value":"AQID"})"),
            "cannot encode v8 value: misaligned typed array");
}

TEST(V8JsonTest, KeyParts) {
  const std::vector<KeyPart> key = {KeyPart::String("a\xe2\x82\xac"),
                                    KeyPart::Float(1.5),
                                    KeyPart::Float(-INFINITY),
                                    KeyPart::Int(-5),
                                    KeyPart::Bool(true),
                                    KeyPart::Bytes(FromHex("01 02 FF"))};
  const std::string json =
      R"([{"type":"string","value":"a€"},{"type":"number","value":1.5},)"
      R"({"type":"number","value":"-Infinity"},{"type":"bigint","value":"-5"},)"
      R"({"type":"boolean","value":true},{"type":"Uint8Array","value":"AQL_"}])";
  EXPECT_EQ(KeyToJson(EncodeKey(key)), json);
  Result<std::vector<KeyPart>> back = KeyFromJson(json);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, key);
  EXPECT_EQ(KeyPartToJson(KeyPart::Float(std::nan(""))), R"({"type":"number","value":"NaN"})");
  EXPECT_EQ(KeyPartFromJson(R"({"type":"Uint8Array","value":"AQL/"})")->data(),
            FromHex("01 02 FF"));
  EXPECT_EQ(*KeyPartFromJson(R"({"type":"bigint","value":"18446744073709551616"})"),
            *KeyPart::BigIntFromMagnitude(false, {1, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_FALSE(KeyPartFromJson(R"({"type":"string","value":"\ud800"})").ok());
  EXPECT_FALSE(KeyPartFromJson(R"({"type":"Uint8Array","value":"A"})").ok());
  EXPECT_FALSE(KeyPartFromJson(R"({"type":"undefined"})").ok());
  EXPECT_FALSE(
      KeyPartFromJson(R"({"type":"bigint","value":")" + std::string(700, '9') + "\"}").ok());
  EXPECT_FALSE(KeyFromJson(R"({})").ok());
}

// Keys are opaque bytes on the wire: bytes no Deno client writes still get a view, and the view
// names exactly those bytes again.
TEST(V8JsonTest, KeysThatAreNoDenoKeyHaveARawPart) {
  EXPECT_EQ(KeyToJson(FromHex("99 61 62 63")), R"([{"type":"raw","value":"mWFiYw"}])");
  const std::string users = EncodeKey({KeyPart::String("users")});
  EXPECT_EQ(KeyToJson(users + FromHex("99")),
            R"([{"type":"string","value":"users"},{"type":"raw","value":"mQ"}])");
  // A non-minimal integer decodes, but its typed form would name other bytes.
  EXPECT_EQ(KeyToJson(FromHex("1D 02 00 05")), R"([{"type":"raw","value":"HQIABQ"}])");
  // Keys Deno writes keep their typed view.
  EXPECT_EQ(KeyToJson(users), R"([{"type":"string","value":"users"}])");
  EXPECT_EQ(KeyToJson(""), "[]");

  for (const std::string& bytes : {FromHex("99 61 62 63"), users + FromHex("99"),
                                   FromHex("1D 02 00 05"), FromHex("02 C3 28 00"), FromHex("01 00"),
                                   FromHex("21 FF F8 00 00 00 00 00 01"), users, std::string()}) {
    Result<std::string> back = KeyBytesFromJson(KeyToJson(bytes));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(ToHex(*back), ToHex(bytes));
  }
  // On input a raw part stands for its bytes wherever it is, in either base64 alphabet.
  EXPECT_EQ(*KeyBytesFromJson(R"([{"type":"raw","value":"mQ=="},{"type":"boolean","value":true}])"),
            FromHex("99 27"));
  EXPECT_EQ(*KeyBytesFromJson(R"([{"type":"string","value":"users"},{"type":"raw","value":"mQ"}])"),
            users + FromHex("99"));
  EXPECT_FALSE(KeyBytesFromJson(R"([{"type":"raw","value":"A"}])").ok());
  EXPECT_FALSE(KeyBytesFromJson(R"([{"type":"raw","value":5}])").ok());
  EXPECT_FALSE(KeyBytesFromJson(R"([{"type":"raw"}])").ok());
  EXPECT_FALSE(KeyBytesFromJson(R"({"type":"raw","value":"mQ"})").ok());
  // The typed reader has no KeyPart for it and says so.
  Result<std::vector<KeyPart>> typed = KeyFromJson(R"([{"type":"raw","value":"mQ"}])");
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("raw part"), std::string::npos);

  // An entry with such a key, through its KvEntryJSON and back.
  Entry e{FromHex("99 61 62 63"), "v", ValueEncoding::kBytes, 42};
  Result<std::string> line = EntryToJson(e);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->rfind(R"({"key":[{"type":"raw","value":"mWFiYw"}],)", 0), 0u) << *line;
  Result<Entry> again = EntryFromJson(*line);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->key, e.key);
  EXPECT_EQ(again->value, e.value);
}

TEST(V8JsonTest, ValuesOfEveryEncoding) {
  EXPECT_EQ(*KvValueToJson(KvValue{FromHex("D2 0A 1F EB 8C A9 54 AB"), ValueEncoding::kLe64}),
            R"({"type":"KvU64","value":"12345678901234567890"})");
  EXPECT_FALSE(KvValueToJson(KvValue{"1234", ValueEncoding::kLe64}).ok());
  EXPECT_EQ(*KvValueToJson(KvValue{FromHex("01 02 03"), ValueEncoding::kBytes}),
            R"({"type":"Uint8Array","value":"AQID"})");
  // Undecodable V8 bytes fall back to the raw form, which writes back unchanged.
  const std::string odd = FromHex("FF 0F 75 00");
  EXPECT_EQ(*KvValueToJson(KvValue{odd, ValueEncoding::kV8}), R"({"type":"v8","value":"_w91AA"})");
  Result<KvValue> raw = KvValueFromJson(R"({"type":"v8","value":"_w91AA"})");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->data, odd);
  EXPECT_EQ(raw->encoding, ValueEncoding::kV8);
  EXPECT_FALSE(KvValueFromJson(R"({"type":"v8","value":"AQID"})").ok());

  Result<KvValue> u64 = KvValueFromJson(R"({"type":"KvU64","value":"18446744073709551615"})");
  ASSERT_TRUE(u64.ok());
  EXPECT_EQ(u64->encoding, ValueEncoding::kLe64);
  EXPECT_EQ(u64->data, std::string(8, '\xff'));
  EXPECT_FALSE(KvValueFromJson(R"({"type":"KvU64","value":"18446744073709551616"})").ok());
  EXPECT_FALSE(KvValueFromJson(R"({"type":"KvU64","value":"-1"})").ok());

  Result<KvValue> bytes = KvValueFromJson(R"({"type":"Uint8Array","value":"AQID"})");
  EXPECT_EQ(bytes->encoding, ValueEncoding::kBytes);
  Result<KvValue> sub = KvValueFromJson(R"({"type":"Uint8Array","value":"AQID","byteOffset":1})");
  EXPECT_EQ(sub->encoding, ValueEncoding::kV8);
  Result<KvValue> v16 = KvValueFromJson(R"({"type":"null","value":null})", 16);
  EXPECT_EQ(ToHex(v16->data), "FF 10 30");
}

TEST(V8JsonTest, Entries) {
  Entry entry;
  entry.key = EncodeKey({KeyPart::String("users"), KeyPart::Int(7)});
  entry.value = FromHex("FF 0F 22 02 68 69");
  entry.encoding = ValueEncoding::kV8;
  entry.version = 258;
  const std::string json =
      R"({"key":[{"type":"string","value":"users"},{"type":"bigint","value":"7"}],)"
      R"("value":{"type":"string","value":"hi"},"versionstamp":"00000000000001020000"})";
  EXPECT_EQ(*EntryToJson(entry), json);
  Result<Entry> back = EntryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, entry.key);
  EXPECT_EQ(back->value, entry.value);
  EXPECT_EQ(back->encoding, entry.encoding);
  EXPECT_EQ(back->version, 258);
  EXPECT_FALSE(EntryFromJson(R"({"key":[],"value":{"type":"null"},"versionstamp":"0001"})").ok());
  EXPECT_FALSE(
      EntryFromJson(R"({"key":[],"value":{"type":"null"},"versionstamp":"00000000000001020001"})")
          .ok());
  EXPECT_FALSE(EntryFromJson(R"({"key":[],"value":{"type":"null"}})").ok());
  // Only a value can lack a view (a KvU64 that is not 8 bytes); every key has one.
  EXPECT_FALSE(EntryToJson(Entry{"\x99", "", ValueEncoding::kLe64, 1}).ok());
  EXPECT_TRUE(EntryToJson(Entry{"\x99", "", ValueEncoding::kBytes, 1}).ok());
}

TEST(V8JsonTest, BigIntDecimal) {
  BigInt big;
  big.magnitude.assign(25, 0);
  big.magnitude.push_back(1);  // 2^200
  EXPECT_EQ(BigIntToDecimal(big), "1606938044258990275541962092341162602522202993782792835301376");
  EXPECT_EQ(*BigIntFromDecimal("1606938044258990275541962092341162602522202993782792835301376"),
            big);
  EXPECT_EQ(BigIntToDecimal(BigInt{}), "0");
  EXPECT_EQ(BigIntToDecimal(*BigIntFromDecimal("-0")), "0");
  EXPECT_EQ(BigIntToDecimal(*BigIntFromDecimal("-000123")), "-123");
  EXPECT_FALSE(BigIntFromDecimal("").ok());
  EXPECT_FALSE(BigIntFromDecimal("12a").ok());
}

}  // namespace
}  // namespace kvc::codec
