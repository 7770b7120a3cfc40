// The JSON reader of the JSON views (codec/v8/v8_json_reader.h): strings as UTF-16 units with lone
// surrogates kept, members in document order with duplicates refused, nesting bounded.
#include "codec/v8/v8_json_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace kvc::codec {
namespace {

TEST(V8JsonReader, ReadsValuesAndKeepsLoneSurrogates) {
  auto node = ReadJsonNode(
      " {\"s\": \"a\\ud800\\u00e9\xe2\x82\xac\", \"n\": -1.5e2, \"l\": [true, false, null]} ", 10);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_EQ(node->type, JsonNode::Type::kObject);
  ASSERT_EQ(node->members.size(), 3u);
  EXPECT_EQ(node->members[0].first, u"s");
  EXPECT_EQ(node->Find(u"s")->string, std::u16string(u"a\xD800\u00E9\u20AC"));
  EXPECT_EQ(node->Find(u"n")->number, -150);
  const JsonNode* list = node->Find(u"l");
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_EQ(list->items[0].type, JsonNode::Type::kTrue);
  EXPECT_EQ(list->items[2].type, JsonNode::Type::kNull);
  EXPECT_EQ(node->Find(u"missing"), nullptr);
}

TEST(V8JsonReader, RefusesMalformedTextDuplicatesAndDepth) {
  EXPECT_EQ(ReadJsonNode(R"({"a":1,"a":2})", 10).status().message(),
            "invalid JSON: duplicate member a at offset 10");
  for (const char* bad : {"", "01", "1.", "[1,]", "{\"a\"}", "\"\\x\"", "\"a", "tru", "1 2",
                          "\"\x01\"", "\"\xff\"", "1e999"}) {
    auto r = ReadJsonNode(bad, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("invalid JSON: ", 0), 0u) << r.status().message();
  }
  EXPECT_TRUE(ReadJsonNode("[[[]]]", 2).ok());
  EXPECT_EQ(ReadJsonNode("[[[[]]]]", 2).status().message(), "JSON too deep");
}

}  // namespace
}  // namespace kvc::codec
