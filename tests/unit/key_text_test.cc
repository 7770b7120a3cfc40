// The key syntax of the console and the CLI (codec/key_text.h): every form src/console/kv.js
// reads gives the KvKeyJSON of the same key bytes, typed KvKeyJSON passes as it is, and errors
// say where the text went wrong.
#include "codec/key_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"

namespace kvc::codec {
namespace {

std::string BytesOf(std::string_view text) {
  auto json = KeyTextToJson(text);
  EXPECT_TRUE(json.ok()) << text << ": " << json.status().message();
  if (!json.ok()) return "";
  auto bytes = KeyBytesFromJson(*json);
  EXPECT_TRUE(bytes.ok()) << *json;
  return bytes.ok() ? *bytes : "";
}

TEST(KeyText, ReadsDenoLiteralKeys) {
  EXPECT_EQ(BytesOf("[\"users\"]"), EncodeKey({KeyPart::String("users")}));
  EXPECT_EQ(BytesOf(" [ \"users\" , 1n ] "),
            EncodeKey({KeyPart::String("users"), KeyPart::Int(1)}));
  EXPECT_EQ(
      BytesOf("[\"a\", 42, -7n, true, false, 1.5, -0.25e2]"),
      EncodeKey({KeyPart::String("a"), KeyPart::Float(42), KeyPart::Int(-7), KeyPart::Bool(true),
                 KeyPart::Bool(false), KeyPart::Float(1.5), KeyPart::Float(-25)}));
  EXPECT_EQ(BytesOf("[Uint8Array([1, 2, 255]), new Uint8Array([])]"),
            EncodeKey({KeyPart::Bytes(std::string("\x01\x02\xff", 3)), KeyPart::Bytes("")}));
  EXPECT_EQ(BytesOf("[\"tab\\tq\\\"\\u00e9\"]"), EncodeKey({KeyPart::String("tab\tq\"\xc3\xa9")}));
  EXPECT_EQ(BytesOf("[\"x\",]"), EncodeKey({KeyPart::String("x")}));  // a trailing comma
  EXPECT_EQ(BytesOf("[]"), "");
  EXPECT_EQ(BytesOf("[-Infinity, Infinity]"),
            EncodeKey({KeyPart::Float(-HUGE_VAL), KeyPart::Float(HUGE_VAL)}));
  // raw:BASE64 names the stored bytes as they are.
  EXPECT_EQ(BytesOf("[raw:AQI]"), std::string("\x01\x02", 2));
}

TEST(KeyText, TypedJsonIsKeptAsItIs) {
  const std::string typed = R"([{"type":"string","value":"users"},{"type":"bigint","value":"1"}])";
  auto json = KeyTextToJson(typed);
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(*json, typed);
  EXPECT_EQ(BytesOf(typed), BytesOf("[\"users\", 1n]"));
  // A string holding a brace is still key syntax.
  EXPECT_EQ(BytesOf("[\"{x}\"]"), EncodeKey({KeyPart::String("{x}")}));
}

TEST(KeyText, ErrorsSayWhere) {
  for (const char* bad : {"users", "[users]", "['users']", "[\"users\"", "[\"a\" \"b\"]", "[1n 2]",
                          "[Uint8Array([256])]", "[\"a\"] x", "[01]", ""}) {
    auto json = KeyTextToJson(bad);
    EXPECT_FALSE(json.ok()) << bad << " gave " << (json.ok() ? *json : "");
    if (!json.ok()) {
      EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
    }
  }
  auto quotes = KeyTextToJson("['users']");
  ASSERT_FALSE(quotes.ok());
  EXPECT_NE(quotes.status().message().find("strings need double quotes at position 2"),
            std::string::npos)
      << quotes.status().message();
  auto bad_typed = KeyTextToJson(R"([{"type":"nope","value":1}])");
  ASSERT_FALSE(bad_typed.ok());
  EXPECT_NE(bad_typed.status().message().find("nope"), std::string::npos)
      << bad_typed.status().message();
  // A lone surrogate is no UTF-8 key.
  EXPECT_FALSE(KeyTextToJson("[\"\\ud800\"]").ok());
}

}  // namespace
}  // namespace kvc::codec
