// The one JSON entry point (codec/json_parse.h): the nesting cap is enforced while parsing, on
// every body we parse with RapidJSON, with a readable text; other errors keep their texts; and no
// file of src/ parses JSON with RapidJSON any other way.
#include "codec/json_parse.h"

#include <gtest/gtest.h>
#include <rapidjson/error/en.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "codec/admin_json.h"
#include "codec/backup_manifest.h"
#include "codec/config_json.h"
#include "codec/metadata_json.h"

namespace kvc::codec {
namespace {
namespace fs = std::filesystem;

// `depth` arrays, each holding the next: valid JSON when `closed`, else only the '['.
std::string Nested(size_t depth, bool closed) {
  std::string s(depth, '[');
  if (closed) s.append(depth, ']');
  return s;
}

// {"a":{"a":...{}...}}, `depth` objects.
std::string NestedObjects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "{}";
  for (size_t i = 0; i < depth; ++i) s += "}";
  return s;
}

constexpr size_t kHostile = 1000000;  // far beyond any thread's stack for a recursive parser

TEST(JsonParse, TheCapHoldsAtItsLevelAndStopsAtTheNext) {
  rapidjson::Document d;
  EXPECT_TRUE(ParseJsonText(Nested(64, true), "The body", &d, 64).ok());
  EXPECT_TRUE(d.IsArray());
  const Status deep = ParseJsonText(Nested(65, true), "The body", &d, 64);
  EXPECT_EQ(deep.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.message(), "The body is nested deeper than 64 levels.");
  EXPECT_TRUE(d.IsNull());
  // Objects count the same; siblings do not add up.
  EXPECT_TRUE(ParseJsonText(NestedObjects(63), "x", &d, 64).ok());
  EXPECT_FALSE(ParseJsonText(NestedObjects(64), "x", &d, 64).ok());
  EXPECT_TRUE(
      ParseJsonText("[" + Nested(63, true) + "," + Nested(63, true) + "]", "x", &d, 64).ok());
  // Scalars are no level.
  EXPECT_TRUE(ParseJsonText("7", "x", &d, 1).ok());
  EXPECT_TRUE(ParseJsonText("[7]", "x", &d, 1).ok());
  EXPECT_FALSE(ParseJsonText("[[7]]", "x", &d, 1).ok());
}

TEST(JsonParse, AMillionLevelsAreRefusedWithoutRecursion) {
  rapidjson::Document d;
  for (const std::string& text :
       {Nested(kHostile, false), Nested(kHostile, true), NestedObjects(kHostile)}) {
    const Status s = ParseJsonText(text, "The request body", &d);
    EXPECT_EQ(s.message(), "The request body is nested deeper than 64 levels.");
  }
}

TEST(JsonParse, SyntaxErrorsReadAsRapidJsonsRecursiveParserWroteThem) {
  for (const char* text : {"", "{", "[1,", "{\"a\" 1}", "[1] x", "\"\xff\"", "[tru]", "{\"a\":}",
                           "[1,]", "nul", "[\"\\ud800\"]", "01"}) {
    rapidjson::Document recursive;
    recursive.Parse<rapidjson::kParseValidateEncodingFlag>(text, std::strlen(text));
    ASSERT_TRUE(recursive.HasParseError()) << text;
    rapidjson::Document d;
    JsonParseFailure failure;
    ASSERT_FALSE(ParseJsonDocument(text, 64, &d, &failure)) << text;
    EXPECT_FALSE(failure.too_deep);
    EXPECT_EQ(failure.reason, rapidjson::GetParseError_En(recursive.GetParseError())) << text;
    EXPECT_EQ(failure.offset, recursive.GetErrorOffset()) << text;
  }
  rapidjson::Document d;
  EXPECT_EQ(ParseJsonText("[1,", "The request body", &d).message(),
            "The request body is not valid JSON: Invalid value. (at byte 3).");
}

TEST(JsonParse, TheConfiguredCapAppliesToRequestBodies) {
  SetMaxJsonDepth(3);
  EXPECT_EQ(MaxJsonDepth(), 3u);
  auto shallow = ParseAdminListRequest(R"({"prefix":[]})");
  auto deep = ParseAdminListRequest(R"({"prefix":[[[]]]})");
  SetMaxJsonDepth(0);  // clamped
  EXPECT_EQ(MaxJsonDepth(), 1u);
  SetMaxJsonDepth(kDefaultMaxJsonDepth);
  EXPECT_TRUE(shallow.ok()) << shallow.status().ToString();
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "The request body is nested deeper than 3 levels.");
}

// Every RapidJSON parse of ours refuses a million levels with its own readable text (before the
// one entry point, each of these overflowed the stack).
TEST(JsonParse, EveryBodyWeParseRefusesDeepNesting) {
  const std::string brackets = Nested(kHostile, false);
  const std::string valid = Nested(kHostile, true);
  for (const std::string* text : {&brackets, &valid}) {
    auto metadata = ParseMetadataRequest(*text);
    ASSERT_FALSE(metadata.ok());
    EXPECT_EQ(metadata.status().message(),
              "The metadata exchange request body is nested deeper than 64 levels.");
    auto answer = ParseMetadataResponse(*text);
    EXPECT_EQ(answer.status().message(),
              "The metadata exchange response is nested deeper than 64 levels.");
    EXPECT_EQ(ParseAdminListRequest(*text).status().message(),
              "The request body is nested deeper than 64 levels.");
    EXPECT_EQ(ParseAdminSetRequest(*text, 15).status().message(),
              "The request body is nested deeper than 64 levels.");
    EXPECT_EQ(ParseQueueEnqueueRequest(*text, 15, 0).status().message(),
              "The request body is nested deeper than 64 levels.");
    EXPECT_EQ(ParseQueuePullRequest(*text).status().message(),
              "The request body is nested deeper than 64 levels.");
    EXPECT_EQ(ValidateAdminJson("DatabaseList", *text).message(),
              "The document is nested deeper than 64 levels.");
    EXPECT_EQ(ValidateJsonAgainstSchema("metadata-exchange-request.schema.json", *text).message(),
              "The document is nested deeper than 64 levels.");
    auto config = ParseConfigFile(*text);
    EXPECT_EQ(config.status().message(), "the configuration is nested deeper than 64 levels.");
    auto manifest = DecodeSnapshotManifest(*text);
    EXPECT_EQ(manifest.status().code(), StatusCode::kCorruption);
    EXPECT_EQ(manifest.status().message(), "snapshot manifest is nested deeper than 64 levels.");
  }
}

TEST(JsonParse, ValuesInsideABodyCountTowardsTheCap) {
  // {"key":[...],"value":{"type":"Array","value":[ ... ]}}: two levels per array of the value.
  std::string value = "{\"type\":\"null\",\"value\":null}";
  for (int i = 0; i < 40; ++i) value = "{\"type\":\"Array\",\"value\":[" + value + "]}";
  const std::string body = R"({"key":[{"type":"string","value":"k"}],"value":)" + value + "}";
  auto refused = ParseAdminSetRequest(body, 15);
  EXPECT_EQ(refused.status().message(), "The request body is nested deeper than 64 levels.");
  SetMaxJsonDepth(200);
  auto taken = ParseAdminSetRequest(body, 15);
  SetMaxJsonDepth(kDefaultMaxJsonDepth);
  EXPECT_TRUE(taken.ok()) << taken.status().ToString();
}

// RapidJSON 1.1 hashes every value under an `enum` rule, casting a double to a 64-bit integer: a
// number beyond that range was undefined behaviour (the admin_json fuzzer's find; UBSan halts on
// it in the sanitizer tree). Each such number now gets the rule's readable refusal.
TEST(JsonSchema, NumbersBeyondSixtyFourBitsUnderAnEnumAreRefusedByTheRule) {
  for (const char* number : {"2888888888888888888888888888880000", "-1e300",
                             "1.8446744073709552e19", "-9223372036854777856"}) {
    SCOPED_TRACE(number);
    const std::string pull = std::string(R"({"max_messages":10,"format":)") + number + "}";
    EXPECT_EQ(ParseQueuePullRequest(pull).status().message(),
              "The request body does not match the expected schema at #/format (rule 'enum').");
    const std::string config = std::string(R"({"queue_push_format":)") + number + "}";
    const std::string refused = ParseConfigFile(config).status().message();
    EXPECT_NE(refused.find("invalid value for 'queue_push_format'"), std::string::npos) << refused;
    EXPECT_NE(refused.find("(schema rule 'enum')"), std::string::npos) << refused;
  }
  // The members themselves still match, and numbers in range still fail as before.
  EXPECT_TRUE(ParseQueuePullRequest(R"({"format":"v8"})").ok());
  EXPECT_EQ(ParseQueuePullRequest(R"({"format":1e18})").status().message(),
            "The request body does not match the expected schema at #/format (rule 'enum').");
}

// Every schema validation in src/ goes through AcceptsJson (codec/json_schema.h); a bare
// value.Accept(validator) would bring back the undefined behaviour above.
TEST(JsonSchema, NoValidatorIsFedWithoutAcceptsJson) {
  const fs::path src = fs::path(KVC_SOURCE_DIR) / "src";
  const std::regex declared(R"(SchemaValidator\s+(\w+)\s*[({])");
  int validators = 0;
  for (const auto& file : fs::recursive_directory_iterator(src)) {
    if (!file.is_regular_file() || file.path().filename() == "json_schema.cc") continue;
    std::ifstream in(file.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string content = text.str();
    for (std::sregex_iterator it(content.begin(), content.end(), declared), end; it != end; ++it) {
      ++validators;
      const std::string name = (*it)[1];
      EXPECT_EQ(content.find(".Accept(" + name + ")"), std::string::npos)
          << fs::relative(file.path(), src) << " feeds " << name << " without AcceptsJson";
      EXPECT_NE(content.find("AcceptsJson(&" + name), std::string::npos)
          << fs::relative(file.path(), src) << " declares " << name << " and never uses it";
    }
  }
  EXPECT_GE(validators, 1) << "the scan no longer matches";
}

// Like tests/unit/layering_test.cc: a RapidJSON parse anywhere else in src/ would bypass the cap.
TEST(JsonParse, NoOtherRapidJsonParseInSrc) {
  const fs::path src = fs::path(KVC_SOURCE_DIR) / "src";
  const fs::path entry = src / "codec" / "json_parse.cc";
  const char* const kParses[] = {".Parse(",   ".Parse<",     "->Parse(",
                                 "->Parse<",  "ParseStream", "ParseInsitu",
                                 "Populate(", "Reader",      "IterativeParse"};
  int scanned = 0;
  bool entry_seen = false;
  for (const auto& file : fs::recursive_directory_iterator(src)) {
    if (!file.is_regular_file()) continue;
    std::ifstream in(file.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string content = text.str();
    // Only files that can see RapidJSON (directly or through one of codec's headers) can parse.
    if (content.find("rapidjson") == std::string::npos) continue;
    ++scanned;
    if (file.path() == entry) {
      entry_seen = true;
      EXPECT_NE(content.find("Populate("), std::string::npos) << "the scan no longer matches";
      continue;
    }
    for (const char* p : kParses) {
      EXPECT_EQ(content.find(p), std::string::npos)
          << fs::relative(file.path(), src) << " contains '" << p
          << "': parse JSON with codec/json_parse.h instead";
    }
  }
  EXPECT_TRUE(entry_seen);
  EXPECT_GE(scanned, 6);
}

}  // namespace
}  // namespace kvc::codec
