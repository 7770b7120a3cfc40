#include "codec/key_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "testutil/hex.h"

namespace kvc::codec {
namespace {

using Key = std::vector<KeyPart>;
using namespace std::string_literals;

using testutil::FromHex;
using testutil::ToHex;

KeyPart Big(bool negative, std::vector<uint8_t> magnitude_be) {
  Result<KeyPart> part = KeyPart::BigIntFromMagnitude(negative, std::move(magnitude_be));
  EXPECT_TRUE(part.ok()) << part.status().ToString();
  return part.ok() ? *part : KeyPart::Int(0);
}

// 2^(8 * zero_bytes) as a big-endian magnitude: 01 followed by zero_bytes zeros.
std::vector<uint8_t> PowerOf256(size_t zero_bytes) {
  std::vector<uint8_t> magnitude(zero_bytes + 1, 0);
  magnitude[0] = 1;
  return magnitude;
}

int Sign(int v) { return (v > 0) - (v < 0); }

int CompareBytes(std::string_view a, std::string_view b) { return Sign(a.compare(b)); }

// Numeric comparison of two bigint parts (independent of the encoding).
int CompareBigInt(const KeyPart& a, const KeyPart& b) {
  if (a.negative() != b.negative()) return a.negative() ? -1 : 1;
  int order;
  if (a.magnitude().size() != b.magnitude().size()) {
    order = a.magnitude().size() < b.magnitude().size() ? -1 : 1;
  } else {
    order = Sign(std::lexicographical_compare(a.magnitude().begin(), a.magnitude().end(),
                                              b.magnitude().begin(), b.magnitude().end())
                     ? -1
                     : (a.magnitude() == b.magnitude() ? 0 : 1));
  }
  return a.negative() ? -order : order;
}

// Documented float order: -NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < NaN.
int CompareFloat(double a, double b) {
  auto rank = [](double d) { return std::isnan(d) ? (std::signbit(d) ? 0 : 2) : 1; };
  if (rank(a) != rank(b)) return rank(a) < rank(b) ? -1 : 1;
  if (rank(a) != 1) return 0;
  if (a < b) return -1;
  if (a > b) return 1;
  if (std::signbit(a) != std::signbit(b)) return std::signbit(a) ? -1 : 1;
  return 0;
}

// Reference order of parts, per the documented semantics.
int ComparePart(const KeyPart& a, const KeyPart& b) {
  if (a.type() != b.type()) return a.type() < b.type() ? -1 : 1;
  switch (a.type()) {
    case KeyPart::Type::kBytes:
    case KeyPart::Type::kString:
      return CompareBytes(a.data(), b.data());
    case KeyPart::Type::kBigInt:
      return CompareBigInt(a, b);
    case KeyPart::Type::kFloat:
      return CompareFloat(a.number(), b.number());
    default:
      return 0;
  }
}

int CompareKey(const Key& a, const Key& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (int c = ComparePart(a[i], b[i]); c != 0) return c;
  }
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

void ExpectVector(const Key& key, std::string_view hex) {
  const std::string expected = FromHex(hex);
  EXPECT_EQ(ToHex(EncodeKey(key)), ToHex(expected)) << KeyToString(expected);
  Result<Key> decoded = DecodeKey(expected);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(*decoded == key) << KeyToString(expected);
}

TEST(KeyCodecTest, ReferenceVectors) {
  ExpectVector({KeyPart::String("users"), KeyPart::Float(1)},
               "02 75 73 65 72 73 00 21 BF F0 00 00 00 00 00 00");
  ExpectVector({KeyPart::Int(1)}, "15 01");
  ExpectVector({KeyPart::Int(256)}, "16 01 00");
  ExpectVector({KeyPart::Int(0)}, "14");
  ExpectVector({KeyPart::Int(-1)}, "13 FE");
  ExpectVector({KeyPart::Int(-256)}, "12 FE FF");
  ExpectVector({Big(false, PowerOf256(8))}, "1D 09 01 00 00 00 00 00 00 00 00");
  ExpectVector({Big(true, PowerOf256(8))}, "0B F6 FE FF FF FF FF FF FF FF FF");
  ExpectVector({KeyPart::Float(0.0)}, "21 80 00 00 00 00 00 00 00");
  ExpectVector({KeyPart::Float(-0.0)}, "21 7F FF FF FF FF FF FF FF");
  ExpectVector({KeyPart::Float(-1.0)}, "21 40 0F FF FF FF FF FF FF");
  ExpectVector({KeyPart::Float(std::numeric_limits<double>::quiet_NaN())},
               "21 FF F8 00 00 00 00 00 00");
  ExpectVector({KeyPart::Bytes(std::vector<uint8_t>{0, 1})}, "01 00 FF 01 00");
  ExpectVector({KeyPart::Bool(true)}, "27");
}

TEST(KeyCodecTest, MoreVectors) {
  ExpectVector({}, "");
  ExpectVector({KeyPart::Bool(false)}, "26");
  ExpectVector({KeyPart::String("")}, "02 00");
  ExpectVector({KeyPart::Bytes(std::vector<uint8_t>{})}, "01 00");
  ExpectVector({KeyPart::Bytes(std::vector<uint8_t>{0, 0, 0xFF})}, "01 00 FF 00 FF FF 00");
  ExpectVector({KeyPart::Int(255)}, "15 FF");
  ExpectVector({KeyPart::Int(-255)}, "13 00");
  ExpectVector({KeyPart::Int(std::numeric_limits<int64_t>::max())}, "1C 7F FF FF FF FF FF FF FF");
  ExpectVector({KeyPart::Int(std::numeric_limits<int64_t>::min())}, "0C 7F FF FF FF FF FF FF FF");
  ExpectVector({Big(false, std::vector<uint8_t>(8, 0xFF))}, "1C FF FF FF FF FF FF FF FF");
  ExpectVector({Big(true, std::vector<uint8_t>(8, 0xFF))}, "0C 00 00 00 00 00 00 00 00");
  ExpectVector({KeyPart::Float(1.0)}, "21 BF F0 00 00 00 00 00 00");
  ExpectVector({KeyPart::Float(-std::numeric_limits<double>::quiet_NaN())},
               "21 00 07 FF FF FF FF FF FF");
  ExpectVector({KeyPart::Float(std::numeric_limits<double>::infinity())},
               "21 FF F0 00 00 00 00 00 00");
  ExpectVector({KeyPart::Float(-std::numeric_limits<double>::infinity())},
               "21 00 0F FF FF FF FF FF FF");
  // The largest representable bigint: 255 bytes of FF.
  std::string max_hex = "1D FF";
  std::string min_hex = "0B 00";
  for (int i = 0; i < 255; ++i) {
    max_hex += " FF";
    min_hex += " 00";
  }
  ExpectVector({Big(false, std::vector<uint8_t>(255, 0xFF))}, max_hex);
  ExpectVector({Big(true, std::vector<uint8_t>(255, 0xFF))}, min_hex);
}

TEST(KeyCodecTest, NanIsCanonicalised) {
  const double payload_nan = std::bit_cast<double>(uint64_t{0x7FF0000000000123});
  const double negative_payload_nan = std::bit_cast<double>(uint64_t{0xFFF4000000000001});
  ASSERT_TRUE(std::isnan(payload_nan));
  ASSERT_TRUE(std::isnan(negative_payload_nan));
  EXPECT_EQ(ToHex(EncodeKey({KeyPart::Float(payload_nan)})), "21 FF F8 00 00 00 00 00 00");
  EXPECT_EQ(ToHex(EncodeKey({KeyPart::Float(negative_payload_nan)})), "21 00 07 FF FF FF FF FF FF");
  EXPECT_TRUE(KeyPart::Float(payload_nan) ==
              KeyPart::Float(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(KeyPart::Float(0.0) == KeyPart::Float(-0.0));
}

TEST(KeyCodecTest, IntAndFloatAreDistinct) {
  EXPECT_NE(EncodeKey({KeyPart::Int(1)}), EncodeKey({KeyPart::Float(1)}));
  EXPECT_FALSE(KeyPart::Int(1) == KeyPart::Float(1));
  EXPECT_FALSE(KeyPart::Bytes("a") == KeyPart::String("a"));
}

TEST(KeyCodecTest, Accessors) {
  EXPECT_EQ(KeyPart::Int(0).magnitude().size(), 0u);
  EXPECT_FALSE(KeyPart::Int(0).negative());
  EXPECT_EQ(KeyPart::Int(-258).magnitude(), (std::vector<uint8_t>{1, 2}));
  EXPECT_TRUE(KeyPart::Int(-258).negative());
  EXPECT_EQ(KeyPart::String("x").data(), "x");
  EXPECT_TRUE(KeyPart::Bool(true).boolean());
  EXPECT_FALSE(KeyPart::Bool(false).boolean());
  EXPECT_EQ(KeyPart::Float(2.5).number(), 2.5);
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min(), int64_t{-256}, int64_t{1} << 40}) {
    EXPECT_EQ(KeyPart::Int(v).ToInt64(), v);
  }
  EXPECT_EQ(Big(false, PowerOf256(8)).ToInt64(), std::nullopt);
  EXPECT_EQ(Big(false, {0x80, 0, 0, 0, 0, 0, 0, 0}).ToInt64(), std::nullopt);  // 2^63
  EXPECT_EQ(Big(true, {0x80, 0, 0, 0, 0, 0, 0, 1}).ToInt64(), std::nullopt);   // -(2^63+1)
  EXPECT_EQ(KeyPart::Float(1).ToInt64(), std::nullopt);
}

TEST(KeyCodecTest, BigIntFromMagnitudeNormalisesAndLimits) {
  KeyPart zero = Big(true, {0, 0, 0});
  EXPECT_FALSE(zero.negative());
  EXPECT_TRUE(zero.magnitude().empty());
  EXPECT_TRUE(zero == KeyPart::Int(0));
  EXPECT_TRUE(Big(false, {0, 0, 1, 0}) == KeyPart::Int(256));

  std::vector<uint8_t> padded(300, 0);
  padded.back() = 7;
  EXPECT_TRUE(Big(false, padded) == KeyPart::Int(7));

  Result<KeyPart> too_big = KeyPart::BigIntFromMagnitude(false, std::vector<uint8_t>(256, 1));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(KeyPart::BigIntFromMagnitude(true, std::vector<uint8_t>(255, 1)).ok());
}

TEST(KeyCodecTest, NonMinimalIntegersDecodeNormalised) {
  Result<Key> key = DecodeKey(FromHex("15 00"));
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE((*key)[0] == KeyPart::Int(0));
  key = DecodeKey(FromHex("13 FF"));  // "-0"
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE((*key)[0] == KeyPart::Int(0));
  key = DecodeKey(FromHex("1D 02 00 05"));
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE((*key)[0] == KeyPart::Int(5));
  key = DecodeKey(FromHex("1D 00"));
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE((*key)[0] == KeyPart::Int(0));
}

TEST(KeyCodecTest, CanonicalPrefixStopsWhereTheBytesAreNoDenoKey) {
  const std::string users = EncodeKey({KeyPart::String("users"), KeyPart::Int(7)});
  size_t consumed = 0;
  // A key Deno writes is all canonical.
  Key parts = DecodeCanonicalKeyPrefix(users, &consumed);
  EXPECT_EQ(consumed, users.size());
  EXPECT_EQ(parts.size(), 2u);
  // An unknown tag, at the start and after a typed part.
  parts = DecodeCanonicalKeyPrefix(FromHex("99 61 62 63"), &consumed);
  EXPECT_TRUE(parts.empty());
  EXPECT_EQ(consumed, 0u);
  parts = DecodeCanonicalKeyPrefix(users + FromHex("99 00"), &consumed);
  EXPECT_EQ(parts.size(), 2u);
  EXPECT_EQ(consumed, users.size());
  // Parts that decode but encode differently stop it too: a non-minimal integer, a NaN with
  // other payload bits, "-0" as an integer; and a string that is not UTF-8, a truncated part.
  for (const char* hex :
       {"1D 02 00 05", "21 FF F8 00 00 00 00 00 01", "13 FF", "02 C3 28 00", "02 61 62", "21 80"}) {
    parts = DecodeCanonicalKeyPrefix(users + FromHex(hex), &consumed);
    EXPECT_EQ(consumed, users.size()) << hex;
    EXPECT_EQ(EncodeKey(parts), users) << hex;
  }
  // Whatever the bytes, the parts encode to exactly the bytes they consumed.
  std::mt19937 rng(20);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes(rng() % 12, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 3 == 0 ? 0 : rng() % 0x30);
    parts = DecodeCanonicalKeyPrefix(bytes, &consumed);
    ASSERT_LE(consumed, bytes.size());
    ASSERT_EQ(EncodeKey(parts), bytes.substr(0, consumed)) << ToHex(bytes);
  }
}

TEST(KeyCodecTest, KeyToString) {
  const std::string key =
      EncodeKey({KeyPart::String("users"), KeyPart::Int(1), KeyPart::Float(2.5),
                 KeyPart::Bool(true), KeyPart::Bytes(std::vector<uint8_t>{0x00, 0xFF})});
  EXPECT_EQ(KeyToString(key), R"(["users",1n,2.5,true,Uint8Array(00ff)])");
  EXPECT_EQ(KeyToString(""), "[]");
  EXPECT_EQ(KeyToString(EncodeKey({KeyPart::Bool(false), KeyPart::Int(-42), KeyPart::Float(1),
                                   KeyPart::Float(-0.0)})),
            "[false,-42n,1,-0]");
  EXPECT_EQ(KeyToString(EncodeKey({Big(false, PowerOf256(8)), Big(true, PowerOf256(8))})),
            "[18446744073709551616n,-18446744073709551616n]");
  EXPECT_EQ(KeyToString(EncodeKey({KeyPart::Int(std::numeric_limits<int64_t>::min())})),
            "[-9223372036854775808n]");
  EXPECT_EQ(KeyToString(EncodeKey({KeyPart::Float(std::numeric_limits<double>::quiet_NaN()),
                                   KeyPart::Float(std::numeric_limits<double>::infinity()),
                                   KeyPart::Float(-std::numeric_limits<double>::infinity())})),
            "[NaN,Infinity,-Infinity]");
  EXPECT_EQ(KeyToString(EncodeKey({KeyPart::String("a\"b\\c\n\x01"), KeyPart::String("€")})),
            "[\"a\\\"b\\\\c\\n\\u0001\",\"€\"]");
  EXPECT_EQ(KeyToString(EncodeKey({KeyPart::Bytes(std::vector<uint8_t>{})})), "[Uint8Array()]");
  // Decode failures fall back to hex.
  EXPECT_EQ(KeyToString(FromHex("02 61")), "<invalid key: 0261>");
  EXPECT_EQ(KeyToString(FromHex("FF 00")), "<invalid key: ff00>");
}

TEST(KeyCodecTest, UnknownTagsAreRejected) {
  for (int tag = 0; tag < 256; ++tag) {
    const bool known = tag == 0x01 || tag == 0x02 || (tag >= 0x0B && tag <= 0x1D) || tag == 0x21 ||
                       tag == 0x26 || tag == 0x27;
    if (known) continue;
    Result<Key> key = DecodeKey(std::string(1, static_cast<char>(tag)) + "\x15\x01");
    ASSERT_FALSE(key.ok()) << tag;
    EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(key.status().message().find("unknown tag"), std::string::npos)
        << key.status().message();
  }
  // The error names the offending tag and offset.
  Result<Key> key = DecodeKey(FromHex("15 01 30"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().message(), "invalid key: unknown tag 0x30 at offset 2");
}

TEST(KeyCodecTest, InvalidUtf8StringIsRejected) {
  for (std::string_view bad : {"02 FF 00", "02 C0 80 00", "02 ED A0 80 00", "02 F4 90 80 80 00",
                               "02 E2 82 00", "02 80 00", "02 F0 8F BF BF 00"}) {
    Result<Key> key = DecodeKey(FromHex(bad));
    ASSERT_FALSE(key.ok()) << bad;
    EXPECT_NE(key.status().message().find("UTF-8"), std::string::npos);
  }
  // Invalid UTF-8 is fine inside a bytes part.
  EXPECT_TRUE(DecodeKey(FromHex("01 FF C0 80 00")).ok());
  EXPECT_TRUE(DecodeKey(FromHex("02 F0 9F 98 80 E2 82 AC C3 A9 00")).ok());
}

TEST(KeyCodecTest, TruncatedPartsAreRejected) {
  const std::vector<Key> single_parts = {
      {KeyPart::String("users")},
      {KeyPart::Bytes(std::vector<uint8_t>{1, 2, 0xFF})},
      {KeyPart::Int(1)},
      {KeyPart::Int(-256)},
      {KeyPart::Int(std::numeric_limits<int64_t>::min())},
      {Big(false, PowerOf256(8))},
      {Big(true, PowerOf256(8))},
      {Big(false, std::vector<uint8_t>(255, 0xAB))},
      {KeyPart::Float(1.0)},
      {KeyPart::Float(-0.0)},
  };
  for (const Key& key : single_parts) {
    const std::string encoded = EncodeKey(key);
    for (size_t len = 1; len < encoded.size(); ++len) {
      Result<Key> decoded = DecodeKey(std::string_view(encoded).substr(0, len));
      ASSERT_FALSE(decoded.ok()) << ToHex(encoded) << " prefix " << len;
      EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(decoded.status().message().find("truncated"), std::string::npos)
          << decoded.status().message();
    }
  }
}

// Builds a random key from small pools so that equal parts and shared prefixes are common.
class RandomKeys {
 public:
  explicit RandomKeys(uint64_t seed) : rng_(seed) {}

  KeyPart Part() {
    static const std::vector<std::string> kStrings = {
        "", "a", "a\0"s, "a\0b"s, "ab", "b", "\xFF", "\0"s, "é", "z\xF0\x9F\x98\x80"};
    switch (Uniform(6)) {
      case 0:
        return KeyPart::Bytes(kStrings[Uniform(kStrings.size())]);
      case 1: {
        const std::string& s = kStrings[Uniform(kStrings.size())];
        return KeyPart::String(s == "\xFF" ? std::string("y") : s);
      }
      case 2:
        return IntPart();
      case 3:
        return KeyPart::Float(FloatValue());
      default:
        return KeyPart::Bool(Uniform(2) == 1);
    }
  }

  Key MakeKey() {
    Key key;
    const size_t n = Uniform(5);
    for (size_t i = 0; i < n; ++i) key.push_back(Part());
    return key;
  }

  KeyPart IntPart() {
    switch (Uniform(3)) {
      case 0:
        return KeyPart::Int(static_cast<int64_t>(Uniform(7)) - 3);
      case 1:
        return KeyPart::Int(static_cast<int64_t>(rng_()));
      default: {
        std::vector<uint8_t> magnitude(1 + Uniform(40));
        for (uint8_t& b : magnitude) b = static_cast<uint8_t>(rng_());
        return Big(Uniform(2) == 1, std::move(magnitude));
      }
    }
  }

  double FloatValue() {
    static const double kSpecial[] = {0.0,
                                      -0.0,
                                      1.0,
                                      -1.0,
                                      0.5,
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(),
                                      std::numeric_limits<double>::quiet_NaN(),
                                      -std::numeric_limits<double>::quiet_NaN(),
                                      std::numeric_limits<double>::denorm_min(),
                                      -std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::lowest()};
    if (Uniform(3) == 0) return kSpecial[Uniform(std::size(kSpecial))];
    if (Uniform(2) == 0) return static_cast<double>(static_cast<int64_t>(rng_() >> 40)) / 8;
    return std::bit_cast<double>(rng_());  // any bit pattern, including NaN payloads
  }

  size_t Uniform(size_t n) { return static_cast<size_t>(rng_() % n); }

 private:
  std::mt19937_64 rng_;
};

TEST(KeyCodecTest, RandomRoundTrip) {
  RandomKeys random(1);
  for (int i = 0; i < 5000; ++i) {
    const Key key = random.MakeKey();
    const std::string encoded = EncodeKey(key);
    Result<Key> decoded = DecodeKey(encoded);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString() << " " << ToHex(encoded);
    ASSERT_TRUE(*decoded == key) << KeyToString(encoded);
    ASSERT_EQ(EncodeKey(*decoded), encoded);
  }
}

TEST(KeyCodecTest, CrossTypeOrder) {
  const std::vector<Key> ordered = {
      {KeyPart::Bytes(std::vector<uint8_t>{})},
      {KeyPart::Bytes(std::vector<uint8_t>{0})},
      {KeyPart::Bytes(std::vector<uint8_t>{0xFF, 0xFF})},
      {KeyPart::String("")},
      {KeyPart::String("\0"s)},
      {KeyPart::String("a")},
      {KeyPart::String("\xF4\x8F\xBF\xBF")},
      {Big(true, std::vector<uint8_t>(255, 0xFF))},
      {Big(true, PowerOf256(8))},
      {KeyPart::Int(std::numeric_limits<int64_t>::min())},
      {KeyPart::Int(-1)},
      {KeyPart::Int(0)},
      {KeyPart::Int(1)},
      {KeyPart::Int(std::numeric_limits<int64_t>::max())},
      {Big(false, PowerOf256(8))},
      {Big(false, std::vector<uint8_t>(255, 0xFF))},
      {KeyPart::Float(-std::numeric_limits<double>::quiet_NaN())},
      {KeyPart::Float(-std::numeric_limits<double>::infinity())},
      {KeyPart::Float(std::numeric_limits<double>::lowest())},
      {KeyPart::Float(-1)},
      {KeyPart::Float(-std::numeric_limits<double>::denorm_min())},
      {KeyPart::Float(-0.0)},
      {KeyPart::Float(0.0)},
      {KeyPart::Float(std::numeric_limits<double>::denorm_min())},
      {KeyPart::Float(1)},
      {KeyPart::Float(std::numeric_limits<double>::max())},
      {KeyPart::Float(std::numeric_limits<double>::infinity())},
      {KeyPart::Float(std::numeric_limits<double>::quiet_NaN())},
      {KeyPart::Bool(false)},
      {KeyPart::Bool(true)},
  };
  for (size_t i = 0; i + 1 < ordered.size(); ++i) {
    EXPECT_LT(EncodeKey(ordered[i]), EncodeKey(ordered[i + 1]))
        << KeyToString(EncodeKey(ordered[i])) << " vs " << KeyToString(EncodeKey(ordered[i + 1]));
    EXPECT_EQ(CompareKey(ordered[i], ordered[i + 1]), -1);  // sanity check of the oracle
  }
}

TEST(KeyCodecTest, RandomInt64SortNumerically) {
  std::mt19937_64 rng(2);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> values = {0, 1, -1, 255, 256, -255, -256, 65535, 65536, -65536, kMin, kMax};
  for (int i = 0; i < 2000; ++i) {
    // Vary the magnitude so every encoded length 0..8 is well covered.
    values.push_back(static_cast<int64_t>(rng()) >> (rng() % 64));
  }
  std::vector<std::pair<std::string, int64_t>> encoded;
  for (int64_t v : values) encoded.emplace_back(EncodeKey({KeyPart::Int(v)}), v);
  std::sort(encoded.begin(), encoded.end());
  for (size_t i = 0; i + 1 < encoded.size(); ++i) {
    ASSERT_LE(encoded[i].second, encoded[i + 1].second);
    ASSERT_EQ(encoded[i].first == encoded[i + 1].first, encoded[i].second == encoded[i + 1].second);
  }
}

TEST(KeyCodecTest, BigIntsSortNumerically) {
  // +-(2^k - 1), +-2^k, +-(2^k + 1) for every bit length the encoding allows, plus random ones.
  std::vector<KeyPart> parts;
  std::mt19937_64 rng(3);
  for (size_t k = 0; k < 8 * kMaxKeyBigIntBytes; ++k) {
    std::vector<uint8_t> power(k / 8 + 1, 0);
    power[0] = static_cast<uint8_t>(1u << (k % 8));
    std::vector<uint8_t> below = power;  // power - 1
    for (size_t i = below.size(); i-- > 0;) {
      if (below[i]-- != 0) break;
    }
    std::vector<uint8_t> above = power;
    above.back() |= 1;  // power + 1 (or power itself when k == 0)
    for (bool negative : {false, true}) {
      parts.push_back(Big(negative, power));
      parts.push_back(Big(negative, below));
      parts.push_back(Big(negative, above));
    }
  }
  for (int i = 0; i < 1000; ++i) {
    std::vector<uint8_t> magnitude(1 + rng() % kMaxKeyBigIntBytes);
    for (uint8_t& b : magnitude) b = static_cast<uint8_t>(rng());
    parts.push_back(Big(rng() % 2 == 1, std::move(magnitude)));
  }
  std::vector<std::pair<std::string, size_t>> encoded;
  for (size_t i = 0; i < parts.size(); ++i) encoded.emplace_back(EncodeKey({parts[i]}), i);
  std::sort(encoded.begin(), encoded.end());
  for (size_t i = 0; i + 1 < encoded.size(); ++i) {
    const KeyPart& a = parts[encoded[i].second];
    const KeyPart& b = parts[encoded[i + 1].second];
    const int expected = CompareBigInt(a, b);
    ASSERT_LE(expected, 0) << a.ToString() << " vs " << b.ToString();
    ASSERT_EQ(encoded[i].first == encoded[i + 1].first, expected == 0);
  }
}

TEST(KeyCodecTest, RandomFloatsSortNumerically) {
  RandomKeys random(4);
  std::vector<std::pair<std::string, double>> encoded;
  for (int i = 0; i < 5000; ++i) {
    const double d = random.FloatValue();
    encoded.emplace_back(EncodeKey({KeyPart::Float(d)}), d);
  }
  std::sort(encoded.begin(), encoded.end());
  for (size_t i = 0; i + 1 < encoded.size(); ++i) {
    const int expected = CompareFloat(encoded[i].second, encoded[i + 1].second);
    ASSERT_LE(expected, 0) << encoded[i].second << " vs " << encoded[i + 1].second;
    ASSERT_EQ(encoded[i].first == encoded[i + 1].first, expected == 0);
  }
}

TEST(KeyCodecTest, RandomKeysSortPartwise) {
  RandomKeys random(5);
  std::vector<Key> keys;
  for (int i = 0; i < 600; ++i) keys.push_back(random.MakeKey());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string a = EncodeKey(keys[i]);
    for (size_t j = 0; j < keys.size(); ++j) {
      const std::string b = EncodeKey(keys[j]);
      ASSERT_EQ(CompareBytes(a, b), CompareKey(keys[i], keys[j]))
          << KeyToString(a) << " vs " << KeyToString(b);
    }
  }
}

TEST(KeyCodecTest, ArbitraryBytesNeverCrash) {
  std::mt19937_64 rng(6);
  const uint8_t kInteresting[] = {0x00, 0x01, 0x02, 0x0B, 0x0C, 0x13, 0x14, 0x15,
                                  0x1C, 0x1D, 0x21, 0x26, 0x27, 0xFF, 0xFE, 0x80};
  for (int i = 0; i < 20000; ++i) {
    std::string input(rng() % 40, '\0');
    for (char& c : input) {
      c = static_cast<char>(rng() % 2 ? kInteresting[rng() % std::size(kInteresting)] : rng());
    }
    Result<Key> key = DecodeKey(input);
    if (key.ok()) {
      // Whatever decodes must re-decode to the same parts after re-encoding.
      Result<Key> again = DecodeKey(EncodeKey(*key));
      ASSERT_TRUE(again.ok());
      ASSERT_TRUE(*again == *key);
    } else {
      ASSERT_EQ(key.status().code(), StatusCode::kInvalidArgument);
    }
    (void)KeyToString(input);
  }
  // Every prefix of a valid multi-part key decodes or fails cleanly.
  RandomKeys random(7);
  for (int i = 0; i < 300; ++i) {
    const std::string encoded = EncodeKey(random.MakeKey());
    for (size_t len = 0; len <= encoded.size(); ++len) {
      (void)DecodeKey(std::string_view(encoded).substr(0, len));
    }
  }
}

}  // namespace
}  // namespace kvc::codec
