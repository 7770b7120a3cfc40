// The shared UTF-8 helpers (codec/utf8.h) and the one JSON string escaper (codec/json_text.h).
#include "codec/json_text.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "codec/metadata_json.h"
#include "codec/utf8.h"

namespace kvc::codec {
namespace {

using namespace std::string_literals;

TEST(Utf8, DecodesEveryLength) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  size_t pos = 0;
  EXPECT_EQ(NextCodePoint(s, &pos), 0x61u);
  EXPECT_EQ(NextCodePoint(s, &pos), 0xE9u);
  EXPECT_EQ(NextCodePoint(s, &pos), 0x20ACu);
  EXPECT_EQ(NextCodePoint(s, &pos), 0x1F600u);
  EXPECT_EQ(pos, s.size());
  EXPECT_TRUE(IsValidUtf8(s));
}

TEST(Utf8, MalformedSequencesConsumeOneByte) {
  for (const std::string& bad : {
           "\x80"s,              // lone continuation byte
           "\xC3"s,              // truncated
           "\xC0\xAF"s,          // overlong '/'
           "\xE0\x80\xAF"s,      // overlong, three bytes
           "\xED\xA0\x80"s,      // surrogate U+D800
           "\xF4\x90\x80\x80"s,  // above U+10FFFF
           "\xF8\x88\x80\x80\x80"s,
           "\xE2\x28\xA1"s,  // bad continuation
       }) {
    size_t pos = 0;
    EXPECT_FALSE(NextCodePoint(bad, &pos).has_value()) << testing::PrintToString(bad);
    EXPECT_EQ(pos, 1u);
    EXPECT_FALSE(IsValidUtf8(bad));
  }
}

TEST(Utf8, EncodesWhatItDecodes) {
  for (uint32_t cp :
       {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    size_t pos = 0;
    EXPECT_EQ(NextCodePoint(s, &pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

TEST(JsonQuote, EscapesQuotesBackslashAndControlCharacters) {
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("plain text"), "\"plain text\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonQuote("\n\r\t"), R"("\n\r\t")");
  EXPECT_EQ(JsonQuote("\x01\x1f\x7f"s + '\0'), R"("\u0001\u001f\u007f\u0000")");
  EXPECT_EQ(JsonQuote("\b\f/"), R"("\u0008\u000c/")");
}

TEST(JsonQuote, KeepsValidUtf8) {
  EXPECT_EQ(JsonQuote("é€😀"), "\"é€😀\"");
  EXPECT_EQ(JsonQuote("\xEF\xBF\xBD"), "\"\xEF\xBF\xBD\"");  // a real U+FFFD stays as it is
}

TEST(JsonQuote, ReplacesEachInvalidByteWithFffd) {
  EXPECT_EQ(JsonQuote("a\xFF"
                      "b"),
            R"("a\ufffdb")");
  EXPECT_EQ(JsonQuote("\xC3"), R"("\ufffd")");            // truncated at the end
  EXPECT_EQ(JsonQuote("\xC0\xAF"), R"("\ufffd\ufffd")");  // overlong: two bad bytes
  EXPECT_EQ(JsonQuote("\xE2\x82"
                      "x"),
            R"("\ufffd\ufffdx")");
}

TEST(JsonQuote, AppendsToWhatIsThere) {
  std::string out = "[";
  AppendJsonQuoted("x", &out);
  EXPECT_EQ(out, "[\"x\"");
}

TEST(JsonQuote, EveryByteGivesValidJson) {
  // Each single byte and each pair of bytes, inside an object the schema validator parses with
  // UTF-8 validation on.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += 17) {
      const std::string s{static_cast<char>(a), static_cast<char>(b)};
      const std::string quoted = JsonQuote(s);
      ASSERT_TRUE(IsValidUtf8(quoted)) << a << " " << b;
      const std::string doc = "{\"supportedVersions\":[3],\"x\":" + quoted + "}";
      EXPECT_TRUE(ParseMetadataRequest(doc).ok()) << a << " " << b << " " << quoted;
    }
  }
}

}  // namespace
}  // namespace kvc::codec
