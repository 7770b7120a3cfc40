// Stack-depth regressions: every decoder of untrusted bytes, fed about a million levels of nesting
// built here, answers a clean error (no stack overflow, no crash). The JSON request bodies parsed
// with RapidJSON are in json_parse_test.cc; these are the other parsers: the V8 JSON views (admin
// values and keys, NDJSON import lines), the V8 wire format, protobuf (KV Connect messages, both
// directions), the key codec and the S3 XML reader.
#include <gtest/gtest.h>

#include <string>

#include "backup/s3_xml.h"
#include "codec/client_codec.h"
#include "codec/datapath_codec.h"
#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "codec/v8/v8_portable.h"
#include "codec/v8/v8_tree.h"
#include "codec/v8/v8_wire.h"
#include "engine/limits.h"
#include "service/admin/dump.h"

namespace kvc {
namespace {

constexpr size_t kLevels = 1000000;

std::string Repeat(std::string_view unit, size_t n) {
  std::string out;
  out.reserve(unit.size() * n);
  for (size_t i = 0; i < n; ++i) out.append(unit);
  return out;
}

// The V8 JSON view of an Array holding an Array ... `levels` deep, around `inner`.
std::string DeepArrayView(size_t levels, const std::string& inner) {
  return Repeat("{\"type\":\"Array\",\"value\":[", levels) + inner + Repeat("]}", levels);
}

TEST(DeepInput, V8JsonViewsRefuseAMillionLevels) {
  const std::string brackets(kLevels, '[');
  const std::string valid = std::string(kLevels, '[') + std::string(kLevels, ']');
  const std::string view = DeepArrayView(kLevels, "{\"type\":\"null\",\"value\":null}");
  for (const std::string* text : {&brackets, &valid, &view}) {
    EXPECT_FALSE(codec::KvValueFromJson(*text, 15).ok());
    EXPECT_FALSE(codec::V8ValueFromJson(*text).ok());
    EXPECT_FALSE(codec::KeyFromJson(*text).ok());
    auto entry = codec::EntryFromJson("{\"key\":[],\"value\":" + *text + ",\"versionstamp\":\"" +
                                      std::string(20, '0') + "\"}");
    ASSERT_FALSE(entry.ok());
    EXPECT_NE(entry.status().message().find("too deep"), std::string::npos)
        << entry.status().message().substr(0, 200);
  }
}

TEST(DeepInput, ImportLinesRefuseAMillionLevels) {
  service::DumpBatcher batcher(service::DumpBatchOptions{}, engine::Limits{});
  const std::string line =
      "{\"key\":[{\"type\":\"string\",\"value\":\"k\"}],\"value\":" + std::string(kLevels, '[') +
      std::string(kLevels, ']') + ",\"versionstamp\":\"" + std::string(20, '0') + "\"}";
  const Status s = batcher.Add(line, 1, /*now_ms=*/0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("line 1: ", 0), 0u) << s.message();
}

TEST(DeepInput, V8WireValuesRefuseAMillionLevels) {
  for (const char* unit : {"A\x01", "o", "a\x01", ";", "'"}) {
    std::string bytes;
    codec::AppendV8Header(15, &bytes);
    bytes += Repeat(unit, kLevels);
    auto tree = codec::DecodeV8Value(bytes);
    ASSERT_FALSE(tree.ok()) << unit;
    EXPECT_EQ(tree.status().code(), StatusCode::kInvalidArgument);
    // The views and conversions built on the decoder fall back instead of failing.
    codec::V8PortableOutcome outcome;
    EXPECT_FALSE(codec::PortableV8(bytes, &outcome).has_value());
    auto json = codec::KvValueToJson(KvValue{bytes, ValueEncoding::kV8});
    ASSERT_TRUE(json.ok());
    EXPECT_EQ(json->rfind("{\"type\":\"v8\"", 0), 0u);
  }
}

TEST(DeepInput, ProtobufMessagesRefuseAMillionNestedGroups) {
  // Field 15 as a start-group tag, a million times: unknown groups nest, and protobuf's recursion
  // limit refuses them.
  const std::string groups(kLevels, '\x7b');
  EXPECT_FALSE(codec::DecodeSnapshotRead(groups).ok());
  EXPECT_FALSE(codec::DecodeAtomicWrite(groups).ok());
  EXPECT_FALSE(codec::DecodeWatch(groups).ok());
  EXPECT_FALSE(codec::DecodeSnapshotReadOutput(groups).ok());
  EXPECT_FALSE(codec::DecodeAtomicWriteOutput(groups).ok());
  EXPECT_FALSE(codec::DecodeWatchOutput(groups).ok());
  // Known message fields nested as deep as the schema allows, then a million unknown groups
  // inside: AtomicWrite.checks (1) holding a Check.
  std::string check_with_groups = "\x0a";
  const size_t n = groups.size();
  for (size_t v = n; v != 0; v >>= 7) {
    check_with_groups.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
  }
  check_with_groups += groups;
  EXPECT_FALSE(codec::DecodeAtomicWrite(check_with_groups).ok());
}

TEST(DeepInput, KeyCodecTakesAMillionPartsOrRefusesThem) {
  // Keys have no nesting: a million parts decode in one pass (or are refused), and a million
  // bytes of the nested-tuple code that Deno never writes are refused.
  const std::string parts(kLevels, '\x26');  // false
  auto key = codec::DecodeKey(parts);
  if (key.ok()) {
    EXPECT_EQ(key->size(), kLevels);
  }
  EXPECT_FALSE(codec::DecodeKey(std::string(kLevels, '\x05')).ok());
}

TEST(DeepInput, S3XmlRefusesAMillionLevels) {
  const std::string open = Repeat("<a>", kLevels);
  const std::string closed = open + Repeat("</a>", kLevels);
  for (const std::string* xml : {&open, &closed}) {
    auto listing = backup::ParseListObjectsV2(*xml);
    ASSERT_FALSE(listing.ok());
    EXPECT_EQ(listing.status().code(), StatusCode::kCorruption);
    EXPECT_FALSE(backup::ParseS3Error(*xml).ok());
  }
  const std::string listing = "<ListBucketResult>" + Repeat("<Contents>", kLevels);
  EXPECT_NE(backup::ParseListObjectsV2(listing).status().message().find("nested too deeply"),
            std::string::npos);
}

}  // namespace
}  // namespace kvc
