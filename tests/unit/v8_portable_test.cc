// codec::PortableV8 over the corpus of tests/fixtures/v8 (bytes the real Deno 2.9.6 and Node 20
// wrote) and over odd cases made by hand: every Deno value comes back in format 15 with its
// other bytes unchanged, every Node v8.serialize value with typed arrays comes back with V8's
// own views (the bytes Node's raw Serializer writes where the values are the same), and what
// cannot be proven exact stays as it is.
#include "codec/v8/v8_portable.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "codec/v8/v8_json.h"
#include "codec/v8/v8_tree.h"
#include "testutil/hex.h"
#include "testutil/v8_corpus.h"

namespace kvc::codec {
namespace {

using testutil::FromHex;
using testutil::ToHex;

using Sample = testutil::V8Sample;
using testutil::ReadFile;

std::vector<Sample> LoadCorpus() { return testutil::LoadV8Corpus(); }

// Runs PortableV8 and returns its outcome; *out gets the bytes (or stays untouched).
V8PortableOutcome Convert(std::string_view bytes, std::optional<std::string>* out) {
  V8PortableOutcome outcome = V8PortableOutcome::kUnchanged;
  *out = PortableV8(bytes, &outcome);
  EXPECT_EQ(out->has_value(),
            outcome == V8PortableOutcome::kReheaded || outcome == V8PortableOutcome::kRewritten)
      << V8PortableOutcomeName(outcome);
  return outcome;
}

// The JSON view (@deno/kv-utils form) of V8 bytes: what a reader sees.
std::string JsonOf(const std::string& bytes) {
  Result<std::string> json = KvValueToJson(KvValue{bytes, ValueEncoding::kV8});
  EXPECT_TRUE(json.ok()) << json.status().ToString();
  return json.ok() ? *json : "";
}

TEST(V8PortableTest, EveryDenoValueIsReheadedTo15) {
  size_t checked = 0;
  for (const Sample& s : LoadCorpus()) {
    if (s.dir != "deno" || s.encoding != ValueEncoding::kV8) continue;
    SCOPED_TRACE(s.file);
    ASSERT_TRUE(IsV8Format16(s.bytes));
    std::optional<std::string> out;
    ASSERT_EQ(Convert(s.bytes, &out), V8PortableOutcome::kReheaded);
    EXPECT_EQ(ToHex(*out), ToHex("\xFF\x0F" + s.bytes.substr(2)));
    EXPECT_FALSE(IsV8Format16(*out));
    Result<V8Value> before = DecodeV8Value(s.bytes);
    Result<V8Value> after = DecodeV8Value(*out);
    ASSERT_TRUE(before.ok() && after.ok());
    EXPECT_TRUE(V8ValueEquals(*before, *after, /*compare_wire_forms=*/true));
    // Converting again changes nothing.
    std::optional<std::string> again;
    EXPECT_EQ(Convert(*out, &again), V8PortableOutcome::kUnchanged);
    ++checked;
  }
  EXPECT_GE(checked, 100u);
}

// Lone strings and constants in format 16 skip the tree (v8_portable.cc), so for them PortableV8
// must answer exactly what the decoder decides: re-headed when the bytes decode, kept when not.
TEST(V8PortableTest, LoneStringsAndConstantsAnswerWhatTheDecoderDecides) {
  std::vector<std::string> bodies = {"_", "0", "T", "F", "I\x02"};
  for (size_t n : {0, 1, 2, 15, 127, 128, 300}) {
    std::string latin(n, 'v');
    std::string varint;
    for (size_t v = n;; v >>= 7) {
      varint.push_back(static_cast<char>((v & 0x7F) | (v >= 0x80 ? 0x80 : 0)));
      if (v < 0x80) break;
    }
    bodies.push_back("\"" + varint + latin);                         // one-byte
    bodies.push_back("S" + varint + latin);                          // UTF-8
    bodies.push_back("c" + varint + latin);                          // two-byte (odd n: malformed)
    bodies.push_back(std::string(1, '\0') + "\"" + varint + latin);  // padding before the tag
  }
  bodies.push_back(std::string("\"\x80\x00", 3));  // a length of 0 in two bytes
  bodies.push_back("S\x02\xC3");                   // shorter than its length
  bodies.push_back("S\x01\xC3");                   // a malformed UTF-8 sequence, one byte
  size_t reheaded = 0;
  size_t kept = 0;
  for (const std::string& body : bodies) {
    std::vector<std::string> variants = {body, body + std::string(1, '\0'), body + "x"};
    if (body.size() > 1) variants.push_back(body.substr(0, body.size() - 1));
    for (const std::string& b : variants) {
      const std::string bytes = "\xFF\x10" + b;
      SCOPED_TRACE(ToHex(bytes));
      std::optional<std::string> out;
      const V8PortableOutcome outcome = Convert(bytes, &out);
      if (DecodeV8Value(bytes).ok()) {
        ASSERT_EQ(outcome, V8PortableOutcome::kReheaded);
        EXPECT_EQ(ToHex(*out), ToHex("\xFF\x0F" + b));
        ++reheaded;
      } else {
        EXPECT_EQ(outcome, V8PortableOutcome::kKept);
        ++kept;
      }
    }
  }
  EXPECT_GT(reheaded, 30u);
  EXPECT_GT(kept, 40u);
}

TEST(V8PortableTest, NodeTypedArraysBecomeV8Views) {
  const std::vector<Sample> samples = LoadCorpus();
  std::map<std::string, std::string> raw;  // what Node's raw v8.Serializer wrote, by name
  for (const Sample& s : samples) {
    if (s.dir == "node_raw") raw[s.name] = s.bytes;
  }
  size_t rewritten = 0;
  size_t same_as_raw = 0;
  for (const Sample& s : samples) {
    if (s.dir != "node_v8") continue;
    SCOPED_TRACE(s.file);
    V8DecodeInfo info;
    Result<V8Value> before = DecodeV8Value(s.bytes, {}, &info);
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    std::optional<std::string> out;
    const V8PortableOutcome outcome = Convert(s.bytes, &out);
    if (info.node_host_views == 0) {
      // Node 20 writes a TypeError's cause before its stack, which current V8 refuses.
      EXPECT_EQ(outcome, s.name == "error_type_cause" ? V8PortableOutcome::kRewritten
                                                      : V8PortableOutcome::kUnchanged);
      continue;
    }
    if (s.name == "node_buffer") {
      // A Buffer would reach Node as a plain Uint8Array: not exact, kept.
      EXPECT_EQ(info.node_buffers, 1u);
      EXPECT_EQ(outcome, V8PortableOutcome::kKept);
      continue;
    }
    ASSERT_EQ(outcome, V8PortableOutcome::kRewritten);
    EXPECT_EQ(static_cast<uint8_t>((*out)[1]), 15);
    V8DecodeInfo after_info;
    Result<V8Value> after = DecodeV8Value(*out, {}, &after_info);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    EXPECT_EQ(after_info.node_host_views, 0u);
    EXPECT_EQ(JsonOf(*out), JsonOf(s.bytes));
    ++rewritten;
    // Where V8 itself wrote the same value (views over their whole buffer), the same bytes.
    auto it = raw.find(s.name);
    if (it != raw.end() && V8ValueEqualsRenumbered(*DecodeV8Value(it->second), *before)) {
      EXPECT_EQ(ToHex(*out), ToHex(it->second));
      ++same_as_raw;
    }
    std::optional<std::string> again;
    EXPECT_EQ(Convert(*out, &again), V8PortableOutcome::kUnchanged);
  }
  std::cout << "[ portable ] " << rewritten << " Node values rewritten, " << same_as_raw
            << " byte for byte as Node's raw v8.Serializer writes them\n";
  EXPECT_GE(rewritten, 15u);
  EXPECT_GE(same_as_raw, 13u);
}

TEST(V8PortableTest, ErrorFieldsComeInTheOrderV8Reads) {
  std::optional<std::string> out;
  // Node 20's TypeError with a cause and a stack: prototype, message, cause, stack.
  const std::string node =
      ReadFile(std::string(KVC_FIXTURES_DIR) + "/v8/node_v8/error_type_cause.bin");
  Result<V8Value> before = DecodeV8Value(node);
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->error_layout, "Tmcs");
  ASSERT_EQ(Convert(node, &out), V8PortableOutcome::kRewritten);
  Result<V8Value> after = DecodeV8Value(*out);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->error_layout, "Tmsc");
  EXPECT_TRUE(V8ValueEquals(*before, *after));
  EXPECT_EQ(node.size(), out->size());
  // By hand: {message "x", cause 42, stack "s"} -> message, stack, cause; also in format 16,
  // and inside other values.
  ASSERT_EQ(Convert(FromHex("FF 0F 72 6D 22 01 78 63 49 54 73 22 01 73 2E"), &out),
            V8PortableOutcome::kRewritten);
  EXPECT_EQ(ToHex(*out), "FF 0F 72 6D 22 01 78 73 22 01 73 63 49 54 2E");
  ASSERT_EQ(Convert(FromHex("FF 10 41 01 72 63 49 54 6D 22 01 78 2E 24 00 01"), &out),
            V8PortableOutcome::kRewritten);
  EXPECT_EQ(ToHex(*out), "FF 0F 41 01 72 6D 22 01 78 63 49 54 2E 24 00 01");
  // Orders current V8 reads stay as they are.
  for (const char* hex : {"FF 0F 72 6D 22 01 78 73 22 01 73 63 49 54 2E", "FF 0F 72 63 49 54 2E",
                          "FF 0F 72 54 6D 22 01 78 2E", "FF 0F 72 2E"}) {
    SCOPED_TRACE(hex);
    EXPECT_EQ(Convert(FromHex(hex), &out), V8PortableOutcome::kUnchanged);
  }
}

TEST(V8PortableTest, NodeRawViewsAreAlreadyPortable) {
  for (const Sample& s : LoadCorpus()) {
    if (s.dir != "node_raw") continue;
    SCOPED_TRACE(s.file);
    std::optional<std::string> out;
    EXPECT_EQ(Convert(s.bytes, &out), V8PortableOutcome::kUnchanged);
  }
}

TEST(V8PortableTest, ReheadKeepsWhatFollowsTheHeader) {
  std::optional<std::string> out;
  // Padding bytes and a verify-object-count prefix after the header stay.
  ASSERT_EQ(Convert(FromHex("FF 10 00 00 54"), &out), V8PortableOutcome::kReheaded);
  EXPECT_EQ(ToHex(*out), "FF 0F 00 00 54");
  ASSERT_EQ(Convert(FromHex("FF 10 3F 00 54"), &out), V8PortableOutcome::kReheaded);
  EXPECT_EQ(ToHex(*out), "FF 0F 3F 00 54");
  // A version varint written in two bytes is replaced whole.
  ASSERT_EQ(Convert(FromHex("FF 90 00 49 02"), &out), V8PortableOutcome::kReheaded);
  EXPECT_EQ(ToHex(*out), "FF 0F 49 02");
  // A buffer and a view in format 16: same lengths, same bytes.
  ASSERT_EQ(Convert(FromHex("FF 10 42 02 01 02 56 42 00 02 00"), &out),
            V8PortableOutcome::kReheaded);
  EXPECT_EQ(ToHex(*out), "FF 0F 42 02 01 02 56 42 00 02 00");
}

TEST(V8PortableTest, OddValuesStayAsTheyAre) {
  std::optional<std::string> out;
  // Not V8 bytes, other versions, or nothing to convert.
  for (const char* hex : {"", "FF", "01 02 03", "FF 0E 54", "FF 0F 54", "FF 0F 22 01 5C",
                          "FF 11 54", "FF 0D 5C 63 00"}) {
    SCOPED_TRACE(hex);
    EXPECT_EQ(Convert(FromHex(hex), &out), V8PortableOutcome::kUnchanged);
  }
  // Format 16 that does not decode: kept.
  for (const char* hex : {"FF 10", "FF 10 54 54", "FF 10 6F", "FF 10 5C 01 05 01"}) {
    SCOPED_TRACE(hex);
    EXPECT_EQ(Convert(FromHex(hex), &out), V8PortableOutcome::kKept);
  }
  // A resizable buffer whose maximum is 2^32 or more has no format-15 form.
  V8Value big = V8Value::ArrayBuffer(0, "ab");
  big.max_byte_length = uint64_t{1} << 32;
  Result<std::string> v16 = EncodeV8Value(big, 16);
  ASSERT_TRUE(v16.ok());
  EXPECT_EQ(Convert(*v16, &out), V8PortableOutcome::kKept);
  // A length format 16 can write in 6 bytes (V8 never does) that format 15 cannot read.
  EXPECT_EQ(Convert(FromHex("FF 10 42 81 80 80 80 80 00 07"), &out), V8PortableOutcome::kKept);
  big.max_byte_length = (uint64_t{1} << 32) - 1;
  v16 = EncodeV8Value(big, 16);
  ASSERT_TRUE(v16.ok());
  ASSERT_EQ(Convert(*v16, &out), V8PortableOutcome::kReheaded);
  EXPECT_EQ(ToHex(out->substr(2)), ToHex(v16->substr(2)));
  // A Node Buffer (type index 10) anywhere in the value: kept, also in format 16.
  EXPECT_EQ(Convert(FromHex("FF 0F 41 02 5C 0A 01 07 5C 01 01 07 24 00 02"), &out),
            V8PortableOutcome::kKept);
  EXPECT_EQ(Convert(FromHex("FF 10 5C 0A 01 07"), &out), V8PortableOutcome::kKept);
  // A host object Node does not define (type 13) does not decode: unchanged.
  EXPECT_EQ(Convert(FromHex("FF 0F 5C 0D 01 07"), &out), V8PortableOutcome::kUnchanged);
}

TEST(V8PortableTest, ReferencesFollowRewrittenViews) {
  std::optional<std::string> out;
  // [u8, u8]: the second element refers to the host object (id 1). As a V8 view the buffer
  // takes id 1 and the view id 2.
  ASSERT_EQ(Convert(FromHex("FF 0F 41 02 5C 01 02 01 02 5E 01 24 00 02"), &out),
            V8PortableOutcome::kRewritten);
  EXPECT_EQ(ToHex(*out), "FF 0F 41 02 42 02 01 02 56 42 00 02 00 5E 02 24 00 02");
  // {a: Int16Array, b: {}, c: b}: the object after the view moves from id 2 to id 3.
  const std::string node =
      FromHex("FF 0F 6F 22 01 61 5C 03 02 FF 7F 22 01 62 6F 7B 00 22 01 63 5E 02 7B 03");
  ASSERT_EQ(Convert(node, &out), V8PortableOutcome::kRewritten);
  EXPECT_EQ(ToHex(*out),
            "FF 0F 6F 22 01 61 42 02 FF 7F 56 77 00 02 00 22 01 62 6F 7B 00 22 01 63 5E 03 7B 03");
  EXPECT_EQ(JsonOf(*out), JsonOf(node));
  // A format-16 value with a Node view (no runtime writes one yet): both conversions at once.
  ASSERT_EQ(Convert(FromHex("FF 10 5C 01 01 07"), &out), V8PortableOutcome::kRewritten);
  EXPECT_EQ(ToHex(*out), "FF 0F 42 01 07 56 42 00 01 00");
}

}  // namespace
}  // namespace kvc::codec
