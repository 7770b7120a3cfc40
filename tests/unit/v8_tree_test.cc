#include "codec/v8/v8_tree.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codec/v8/v8_wire.h"
#include "testutil/hex.h"

namespace kvc::codec {
namespace {

using testutil::FromHex;
using testutil::ToHex;

// Decodes hex, re-encodes with the same format version and returns the hex (or the error).
std::string RoundTrip(std::string_view hex) {
  const std::string bytes = FromHex(hex);
  Result<V8Value> value = DecodeV8Value(bytes);
  if (!value.ok()) return value.status().message();
  Result<std::string> again = EncodeV8Value(*value, static_cast<uint8_t>(bytes[1]));
  if (!again.ok()) return again.status().message();
  return ToHex(*again);
}

std::string DecodeError(std::string_view hex, const V8DecodeLimits& limits = {}) {
  Result<V8Value> value = DecodeV8Value(FromHex(hex), limits);
  return value.ok() ? "ok" : value.status().message();
}

TEST(V8TreeTest, EveryTagDecodesAndReencodesToTheSameBytes) {
  const std::vector<std::string> vectors = {
      "FF 0F 5F",                                                     // undefined
      "FF 0F 30",                                                     // null
      "FF 0F 54",                                                     // true
      "FF 0F 46",                                                     // false
      "FF 0F 49 54",                                                  // 42 (I)
      "FF 0F 49 FF FF FF FF 0F",                                      // int32 min
      "FF 0F 55 FF FF FF FF 0F",                                      // 2^32-1 (U)
      "FF 0F 4E 00 00 00 00 00 00 F8 3F",                             // 1.5 (N)
      "FF 0F 4E 00 00 00 00 00 00 00 40",                             // 2 held as a double
      "FF 0F 4E 00 00 00 00 00 00 00 80",                             // -0
      "FF 0F 4E 01 00 00 00 00 00 F8 7F",                             // a NaN with payload bits
      "FF 0F 5A 00",                                                  // 0n
      "FF 0F 5A 11 01 00 00 00 00 00 00 00",                          // -1n
      "FF 0F 5A 20 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00",  // 2^64
      "FF 0F 22 05 68 65 6C 6C 6F",                                   // "hello"
      "FF 0F 22 00",                                                  // ""
      "FF 0F 63 02 AC 20",                                            // "€"
      "FF 0F 63 02 61 00",                                            // "a" held two-byte
      "FF 0F 63 02 00 D8",                                            // a lone surrogate
      "FF 0F 6F 22 01 61 49 02 7B 01",                                // {a:1}
      "FF 0F 6F 22 02 61 62 00 63 02 AC 20 7B 01",              // {ab:"€"}: padding before c
      "FF 0F 6F 49 00 22 01 7A 22 01 62 49 04 7B 02",           // {0:"z", b:2}
      "FF 0F 41 02 49 02 49 04 24 00 02",                       // [1,2]
      "FF 0F 41 03 2D 49 02 2D 24 00 03",                       // dense with holes
      "FF 0F 61 02 49 02 49 02 40 01 02",                       // [,1]
      "FF 0F 61 04 40 00 04",                                   // new Array(4)
      "FF 0F 41 01 49 02 22 01 78 54 24 01 01",                 // [1] with x:true
      "FF 0F 44 00 00 00 00 00 00 00 00",                       // new Date(0)
      "FF 0F 52 22 02 61 62 03",                                // /ab/gi
      "FF 0F 52 00 63 02 AC 20 10",                             // /€/u (padded)
      "FF 0F 3B 49 02 49 04 3A 02",                             // Map {1 => 2}
      "FF 0F 27 49 02 2C 01",                                   // Set {1}
      "FF 0F 42 03 01 02 03",                                   // ArrayBuffer
      "FF 0F 7E 02 08 01 02",                                   // resizable ArrayBuffer
      "FF 0F 6F 22 01 75 42 03 01 02 03 56 42 00 03 00 7B 01",  // {u: Uint8Array}
      "FF 0F 42 04 01 02 03 04 56 77 02 02 00",                 // Int16Array at offset 2
      "FF 0F 42 08 00 00 00 00 00 00 00 00 56 3F 00 08 00",     // DataView
      "FF 0F 42 02 00 3E 56 68 00 02 00",                       // Float16Array
      "FF 0F 7E 04 08 00 00 00 00 56 42 00 00 03",              // length-tracking view
      "FF 0F 6F 22 01 61 42 02 01 02 56 42 00 02 00 22 01 62 5E 01 56 42 01 01 00 7B 02",
      "FF 0F 41 02 6F 7B 00 5E 01 24 00 02",  // [o, o]
      "FF 0F 6F 22 01 73 5E 00 7B 01",        // o.s = o
      "FF 0F 79",
      "FF 0F 78",                                               // new Boolean(true/false)
      "FF 0F 6E 00 00 00 00 00 00 F8 3F",                       // new Number(1.5)
      "FF 0F 7A 10 05 00 00 00 00 00 00 00",                    // Object(5n)
      "FF 0F 73 22 01 73",                                      // new String("s")
      "FF 0F 72 2E",                                            // new Error() without message/stack
      "FF 0F 72 54 6D 22 03 62 61 64 73 22 01 53 63 49 54 2E",  // Deno 2.9 order
      "FF 0F 72 54 6D 22 03 62 61 64 63 49 54 73 22 01 53 2E",  // Node 20 order
      "FF 0F 72 45 2E",
      "FF 0F 72 52 2E",
      "FF 0F 72 46 2E",
      "FF 0F 72 53 2E",
      "FF 0F 72 55 2E",
      "FF 0F 5C FF FF FF FF 0F 6F 7B 00",  // Deno host object
      "FF 10 6F 22 01 61 49 02 7B 01",     // format 16
      "FF 0E 42 01 07 56 42 00 01 00",     // format 14
      "FF 0D 42 01 07 56 42 00 01",        // format 13: no view flags
  };
  for (const std::string& hex : vectors) EXPECT_EQ(RoundTrip(hex), hex) << hex;
}

TEST(V8TreeTest, DecodesIntoTheExpectedTree) {
  Result<V8Value> v = DecodeV8Value(FromHex("FF 0F 6F 22 01 61 41 02 49 02 2D 24 00 02 7B 01"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind, V8Kind::kObject);
  EXPECT_EQ(v->id, 0u);
  ASSERT_EQ(v->properties.size(), 1u);
  EXPECT_EQ(v->properties[0].key.string.ToUtf8(), "a");
  const V8Value& array = v->properties[0].value;
  EXPECT_EQ(array.kind, V8Kind::kArray);
  EXPECT_EQ(array.id, 1u);
  EXPECT_TRUE(array.dense);
  EXPECT_EQ(array.length, 2u);
  EXPECT_EQ(array.items[0].number, 1);
  EXPECT_EQ(array.items[0].number_form, V8NumberForm::kInt32);
  EXPECT_EQ(array.items[1].kind, V8Kind::kHole);

  Result<V8Value> view = DecodeV8Value(FromHex("FF 0F 42 04 01 02 03 04 56 77 02 02 00"));
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->kind, V8Kind::kArrayBufferView);
  EXPECT_EQ(view->view_type, V8ViewType::kInt16Array);
  EXPECT_EQ(view->byte_offset, 2u);
  EXPECT_EQ(view->byte_length, 2u);
  EXPECT_EQ(view->id, 1u);  // after its buffer
  EXPECT_EQ(view->items[0].id, 0u);
  EXPECT_EQ(view->items[0].bytes, FromHex("01 02 03 04"));

  Result<V8Value> error = DecodeV8Value(FromHex("FF 0F 72 54 6D 22 01 6D 63 49 02 2E"));
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error_type, V8ErrorType::kTypeError);
  EXPECT_EQ(error->message->ToUtf8(), "m");
  EXPECT_FALSE(error->stack.has_value());
  EXPECT_TRUE(error->has_cause);
  EXPECT_EQ(error->items[0].number, 1);
  EXPECT_EQ(error->error_layout, "Tmc");
}

TEST(V8TreeTest, Utf8StringsAndVerifyCountAreReadButNotWritten) {
  Result<V8Value> v = DecodeV8Value(FromHex("FF 0F 3F 02 53 03 E2 82 AC"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->string.ToUtf8(), "\xe2\x82\xac");
  EXPECT_EQ(ToHex(*EncodeV8Value(*v)), "FF 0F 63 02 AC 20");
  // Malformed UTF-8 in `S` becomes U+FFFD, as V8 reads it.
  EXPECT_EQ(DecodeV8Value(FromHex("FF 0F 53 01 FF"))->string.units, u"\uFFFD");
}

TEST(V8TreeTest, NodeHostObjectViewsBecomeViews) {
  // v8.serialize(new Uint16Array([1])) and a Node Buffer (type 10).
  Result<V8Value> v = DecodeV8Value(FromHex("FF 0F 5C 04 02 01 00"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->kind, V8Kind::kArrayBufferView);
  EXPECT_EQ(v->view_type, V8ViewType::kUint16Array);
  EXPECT_EQ(v->id, 0u);
  EXPECT_EQ(v->items[0].id, kV8NoId);
  EXPECT_EQ(ToHex(*EncodeV8Value(*v)), "FF 0F 42 02 01 00 56 57 00 02 00");
  EXPECT_EQ(DecodeV8Value(FromHex("FF 0F 5C 0A 01 07"))->view_type, V8ViewType::kUint8Array);
  // A reference after a host view counts the view once, as Node numbers it.
  EXPECT_EQ(RoundTrip("FF 0F 41 02 5C 01 01 07 5E 01 24 00 02"),
            "FF 0F 41 02 42 01 07 56 42 00 01 00 5E 02 24 00 02");
  EXPECT_EQ(DecodeError("FF 0F 5C 03 03 01 02 03"),
            "invalid v8 value: misaligned typed array at byte 8");
  EXPECT_NE(DecodeError("FF 0F 5C 63 00").find("unsupported v8 value: host object"),
            std::string::npos);
}

TEST(V8TreeTest, VersionsThirteenToSixteen) {
  const std::string object_view = "6F 22 01 75 42 03 01 02 03 56 42 00 03 00 7B 01";
  // Version 13 has no view flags; data an old V8 wrote with flags under version 13 is read on
  // a second try, as V8 does.
  EXPECT_EQ(DecodeError("FF 0D 6F 22 01 75 42 03 01 02 03 56 42 00 03 7B 01"), "ok");
  EXPECT_EQ(DecodeError("FF 0D " + object_view), "ok");
  for (const char* header : {"FF 0E ", "FF 0F ", "FF 10 "}) {
    EXPECT_EQ(RoundTrip(header + object_view), header + object_view);
  }
  EXPECT_NE(DecodeError("FF 0C 5F"), "ok");
  EXPECT_NE(DecodeError("FF 11 5F"), "ok");
  EXPECT_NE(DecodeError("5F"), "ok");
  // Writing format 13 drops the flags, and refuses flags it cannot express.
  Result<V8Value> plain = DecodeV8Value(FromHex("FF 0F " + object_view));
  EXPECT_EQ(ToHex(*EncodeV8Value(*plain, 13)),
            "FF 0D 6F 22 01 75 42 03 01 02 03 56 42 00 03 7B 01");
  Result<V8Value> tracking = DecodeV8Value(FromHex("FF 0F 7E 04 08 00 00 00 00 56 42 00 00 03"));
  EXPECT_FALSE(EncodeV8Value(*tracking, 13).ok());
  EXPECT_FALSE(EncodeV8Value(*plain, 12).ok());
  EXPECT_FALSE(EncodeV8Value(*plain, 17).ok());
  // Format 16 lengths are 64-bit varints; below 2^32 they are the same bytes.
  EXPECT_EQ(DecodeError("FF 10 42 81 80 80 80 80 01"),
            "invalid v8 value: truncated or malformed data at byte 9");
  EXPECT_NE(DecodeError("FF 0F 42 81 80 80 80 80 01"), "ok");
}

TEST(V8TreeTest, RejectsMalformedInput) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "invalid v8 value: bad or unsupported header at byte 0"},
      {"FF 0F", "invalid v8 value: truncated or malformed data at byte 2"},
      {"FF 0F 5F 5F", "invalid v8 value: trailing bytes after the value at byte 3"},
      {"FF 0F 01", "invalid v8 value: unknown tag 1 at byte 3"},
      {"FF 0F 2D", "invalid v8 value: a hole outside a dense array at byte 3"},
      {"FF 0F 5E 00", "invalid v8 value: reference to unknown object 0 at byte 4"},
      {"FF 0F 6F 22 01 61 49 02 22 01 61 49 04 7B 02",
       "invalid v8 value: duplicate property a at byte 11"},
      {"FF 0F 6F 22 01 31 49 02 49 02 49 04 7B 02",
       "invalid v8 value: duplicate property 1 at byte 10"},
      {"FF 0F 41 00 22 06 6C 65 6E 67 74 68 49 02 24 01 00",
       "invalid v8 value: duplicate property length at byte 12"},
      {"FF 0F 41 01 49 02 49 00 49 04 24 01 01",
       "invalid v8 value: duplicate property 0 at byte 8"},
      {"FF 0F 6F 5A 00 49 02 7B 01",
       "invalid v8 value: a property key that is not a string or number at byte 5"},
      {"FF 0F 6F 22 01 61 49 02 7B 02",
       "invalid v8 value: object property count mismatch at byte 10"},
      {"FF 0F 61 02 40 00 03",
       "invalid v8 value: array property count or length mismatch at byte 7"},
      {"FF 0F 41 09 49 02", "invalid v8 value: dense array too long at byte 4"},
      {"FF 0F 3B 49 02 3A 02", "invalid v8 value: unknown tag 58 at byte 6"},
      {"FF 0F 3B 49 02 49 02 3A 04", "invalid v8 value: map or set length mismatch at byte 9"},
      {"FF 0F 42 02 01 02 56 42 01 02 00", "invalid v8 value: view outside its buffer at byte 10"},
      {"FF 0F 42 03 01 02 03 56 77 01 02 00",
       "invalid v8 value: misaligned typed array at byte 12"},
      {"FF 0F 42 02 01 02 56 7A 00 02 00", "invalid v8 value: unknown view type 122 at byte 11"},
      {"FF 0F 42 02 01 02 56 42 00 02 01",
       "invalid v8 value: view flags do not match the buffer at byte 11"},
      {"FF 0F 7E 02 04 01 02 56 42 00 02 00",
       "invalid v8 value: view flags do not match the buffer at byte 12"},
      {"FF 0F 7E 04 02 00 00 00 00",
       "invalid v8 value: resizable buffer longer than its maximum at byte 5"},
      {"FF 0F 52 22 01 61 90 02", "invalid v8 value: bad regexp flags 272 at byte 8"},
      {"FF 0F 52 22 01 61 80 04", "invalid v8 value: bad regexp flags 512 at byte 8"},
      {"FF 0F 52 49 02 01", "invalid v8 value: expected a string at byte 4"},
      {"FF 0F 72 6D 22 01 61 6D 22 01 62 2E", "invalid v8 value: repeated error field at byte 8"},
      {"FF 0F 72 54 45 2E", "invalid v8 value: two error prototypes at byte 5"},
      {"FF 0F 72 7A 2E", "invalid v8 value: unknown error field 122 at byte 4"},
      {"FF 0F 72 63 5E 00 2E", "invalid v8 value: reference to unknown object 0 at byte 6"},
      {"FF 0F 63 01 61", "invalid v8 value: truncated or malformed data at byte 5"},
      {"FF 0F 49 FF FF FF FF 1F", "invalid v8 value: truncated or malformed data at byte 8"},
      {"FF 0F 5A FF FF FF FF 0F", "invalid v8 value: truncated or malformed data at byte 8"},
      {"FF 0F 44 00 00", "invalid v8 value: truncated or malformed data at byte 3"},
  };
  for (const auto& [hex, message] : cases) EXPECT_EQ(DecodeError(hex), message) << hex;
}

TEST(V8TreeTest, ReportsWhatItCannotRepresent) {
  for (const char* hex :
       {"FF 0F 75 00", "FF 0F 74 00", "FF 0F 70 00", "FF 0F 77 00", "FF 0F 6D 00"}) {
    EXPECT_EQ(DecodeError(hex).rfind("unsupported v8 value: tag", 0), 0u) << hex;
  }
  EXPECT_EQ(DecodeError("FF 0F 52 22 01 61 40"),
            "unsupported v8 value: regexp flag l (linear) at byte 7");
}

TEST(V8TreeTest, EveryTruncationFailsCleanly) {
  const std::string full = FromHex(
      "FF 0F 6F 22 01 61 41 02 49 02 2D 24 00 02 22 01 62 3B 63 02 AC 20 5E 01 3A 02 22 01 63 42"
      " 04 01 02 03 04 56 77 02 02 00 22 01 64 72 54 6D 22 01 6D 63 5A 10 05 00 00 00 00 00 00 00"
      " 2E 7B 04");
  ASSERT_TRUE(DecodeV8Value(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(DecodeV8Value(full.substr(0, n)).ok()) << n;
  }
}

TEST(V8TreeTest, EnforcesLimits) {
  std::string deep = "FF 0F";
  for (int i = 0; i < 300; ++i) deep += " 41 01";
  deep += " 5F";
  for (int i = 0; i < 300; ++i) deep += " 24 00 01";
  EXPECT_EQ(DecodeError(deep), "v8 value too deep");
  EXPECT_EQ(DecodeError(deep, V8DecodeLimits{.max_depth = 400}), "ok");
  EXPECT_EQ(DecodeError("FF 0F 41 03 49 02 49 02 49 02 24 00 03", V8DecodeLimits{.max_nodes = 3}),
            "v8 value too large");
  EXPECT_EQ(DecodeError("FF 0F 41 03 49 02 49 02 49 02 24 00 03", V8DecodeLimits{.max_nodes = 4}),
            "ok");
  Result<V8Value> tree = DecodeV8Value(FromHex(deep), V8DecodeLimits{.max_depth = 400});
  EXPECT_FALSE(EncodeV8Value(*tree, kV8WriteVersion, 100).ok());
  EXPECT_TRUE(EncodeV8Value(*tree, kV8WriteVersion, 400).ok());
  // Huge declared lengths cost nothing: they are checked against the input first.
  EXPECT_NE(DecodeError("FF 0F 42 FF FF FF FF 0F"), "ok");
  EXPECT_NE(DecodeError("FF 0F 22 FF FF FF FF 0F"), "ok");
  EXPECT_EQ(DecodeError("FF 0F 61 FE FF FF FF 0F 40 00 FE FF FF FF 0F"), "ok");
}

// Fuzz crash decefefe: a format-16 resizable buffer with a maximum beyond 2^53 was accepted
// and could then not be written.
TEST(V8TreeTest, FuzzRegressionHugeResizableMaximum) {
  EXPECT_NE(DecodeError("FF 10 6F 22 01 76 7E 04 FF FF FF FF FF FF FF FF 08 00 00 00 00 56 42 00"
                        " 00 03 7B 01"),
            "ok");
  // Over 4 GiB is fine in format 16 and cannot be written as 15.
  Result<V8Value> big = DecodeV8Value(FromHex("FF 10 7E 00 80 80 80 80 20"));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(*big->max_byte_length, uint64_t{1} << 33);
  EXPECT_EQ(ToHex(*EncodeV8Value(*big, 16)), "FF 10 7E 00 80 80 80 80 20");
  EXPECT_EQ(EncodeV8Value(*big, 15).status().message(),
            "cannot encode v8 value: buffer over 4 GiB before format 16");
}

// Fuzz crash ebf4e28a: version-13 data read on the second try (with view flags) holds flags
// format 13 cannot write; format 14 can.
TEST(V8TreeTest, FuzzRegressionVersion13WithFlags) {
  Result<V8Value> v =
      DecodeV8Value(FromHex("FF 0D 6F 22 01 76 7E 00 00 00 00 56 42 00 00 03 7B 01"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(EncodeV8Value(*v, 13).ok());
  EXPECT_EQ(ToHex(*EncodeV8Value(*v, 14)), "FF 0E 6F 22 01 76 7E 00 00 56 42 00 00 03 7B 01");
}

TEST(V8TreeTest, EncoderChecksTheTree) {
  const auto error = [](const V8Value& v) {
    Result<std::string> bytes = EncodeV8Value(v);
    return bytes.ok() ? "ok" : bytes.status().message();
  };
  V8Value forward = V8Value::Array(0);
  forward.Push(V8Value::Reference(1)).Push(V8Value::Object(1));
  EXPECT_EQ(error(forward),
            "cannot encode v8 value: a reference to 1, which is no earlier complete object");
  V8Value twice = V8Value::Array(0);
  twice.Push(V8Value::Object(1)).Push(V8Value::Object(1));
  EXPECT_EQ(error(twice), "cannot encode v8 value: duplicate id 1");
  EXPECT_EQ(error(V8Value::Hole()), "cannot encode v8 value: a hole outside a dense array");
  V8Value short_array = V8Value::Array(0);
  short_array.length = 3;
  EXPECT_EQ(error(short_array),
            "cannot encode v8 value: dense array length differs from its items");
  V8Value bad_key = V8Value::Object(0);
  bad_key.Add(V8Value::Null(), V8Value::Null());
  EXPECT_EQ(error(bad_key),
            "cannot encode v8 value: a property key that is not a string or number");
  V8Value view = V8Value::View(0, 1, V8ViewType::kInt32Array, "abc");
  EXPECT_EQ(error(view), "cannot encode v8 value: misaligned typed array");
  view.items[0] = V8Value::Null();
  EXPECT_EQ(error(view), "cannot encode v8 value: a view whose buffer is not a buffer");
  V8Value rab = V8Value::ArrayBuffer(0, "abcd");
  rab.max_byte_length = 2;
  EXPECT_EQ(error(rab), "cannot encode v8 value: resizable buffer longer than its maximum");
  V8Value self_cause;
  self_cause.kind = V8Kind::kError;
  self_cause.id = 0;
  self_cause.has_cause = true;
  self_cause.items.push_back(V8Value::Reference(0));
  EXPECT_EQ(error(self_cause),
            "cannot encode v8 value: a reference to 0, which is no earlier complete object");
  // Ids are labels: any distinct values work, and references follow them.
  V8Value labelled = V8Value::Array(70);
  labelled.Push(V8Value::Object(9)).Push(V8Value::Reference(9)).Push(V8Value::Reference(70));
  EXPECT_EQ(ToHex(*EncodeV8Value(labelled)), "FF 0F 41 03 6F 7B 00 5E 01 5E 00 24 00 03");
}

TEST(V8TreeTest, FactoriesPickTheNumberForm) {
  EXPECT_EQ(ToHex(*EncodeV8Value(V8Value::Number(1))), "FF 0F 49 02");
  EXPECT_EQ(ToHex(*EncodeV8Value(V8Value::Number(-0.0))), "FF 0F 4E 00 00 00 00 00 00 00 80");
  EXPECT_EQ(ToHex(*EncodeV8Value(V8Value::Number(2147483648.0))),
            "FF 0F 4E 00 00 00 00 00 00 E0 41");
  EXPECT_EQ(ToHex(*EncodeV8Value(V8Value::String("\xc3\xa9"))), "FF 0F 22 01 E9");
  V8Value u32 = V8Value::Number(-1);
  u32.number_form = V8NumberForm::kUint32;  // does not fit: written as a double
  EXPECT_EQ(ToHex(*EncodeV8Value(u32)), "FF 0F 4E 00 00 00 00 00 00 F0 BF");
}

TEST(V8TreeTest, EqualityComparesBitsAndOptionallyWireForms) {
  const V8Value a = *DecodeV8Value(FromHex("FF 0F 49 04"));
  const V8Value b = *DecodeV8Value(FromHex("FF 0F 4E 00 00 00 00 00 00 00 40"));
  EXPECT_TRUE(V8ValueEquals(a, b));
  EXPECT_FALSE(V8ValueEquals(a, b, true));
  EXPECT_FALSE(V8ValueEquals(V8Value::Number(0.0), V8Value::Number(-0.0)));
  EXPECT_TRUE(V8ValueEquals(V8Value::Number(std::nan("")), V8Value::Number(std::nan(""))));
  const V8Value one_byte = *DecodeV8Value(FromHex("FF 0F 22 01 61"));
  const V8Value two_byte = *DecodeV8Value(FromHex("FF 0F 63 02 61 00"));
  EXPECT_TRUE(V8ValueEquals(one_byte, two_byte));
  EXPECT_FALSE(V8ValueEquals(one_byte, two_byte, true));
}

TEST(V8TreeTest, NumberToStringMatchesJavaScript) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0, "0"},
      {-0.0, "0"},
      {1, "1"},
      {-2.5, "-2.5"},
      {123.456, "123.456"},
      {1e21, "1e+21"},
      {1e20, "100000000000000000000"},
      {1.5e-7, "1.5e-7"},
      {0.000001, "0.000001"},
      {5e-324, "5e-324"},
      {4294967295, "4294967295"},
      {0.1 + 0.2, "0.30000000000000004"},
      {std::nan(""), "NaN"},
      {-INFINITY, "-Infinity"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
  };
  for (const auto& [value, text] : cases) EXPECT_EQ(V8NumberToString(value), text) << text;
}

}  // namespace
}  // namespace kvc::codec
