#include "codec/v8/v8_value.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/v8/v8_wire.h"
#include "testutil/hex.h"

namespace kvc::codec {
namespace {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

using testutil::FromHex;
using testutil::ToHex;

BigInt FromInt128(int128 v) {
  BigInt result;
  result.negative = v < 0;
  uint128 magnitude = v < 0 ? ~static_cast<uint128>(v) + 1 : static_cast<uint128>(v);
  for (; magnitude != 0; magnitude >>= 8) result.magnitude.push_back(uint8_t(magnitude));
  return result;
}

// REQUIRES: |v| < 2^127.
int128 ToInt128(const BigInt& v) {
  EXPECT_LE(v.magnitude.size(), 16u);
  uint128 magnitude = 0;
  for (size_t i = v.magnitude.size(); i-- > 0;) magnitude = (magnitude << 8) | v.magnitude[i];
  return v.negative ? -static_cast<int128>(magnitude) : static_cast<int128>(magnitude);
}

bool IsNormalised(const BigInt& v) {
  if (v.magnitude.empty()) return !v.negative;
  return v.magnitude.back() != 0;
}

std::string HexOf(const BigInt& v) {
  return std::string(v.negative ? "-" : "+") +
         ToHex(std::string(v.magnitude.rbegin(), v.magnitude.rend()));
}

void ExpectNumber(std::string_view hex, double expected) {
  Result<V8Numeric> value = ParseV8Numeric(FromHex(hex));
  ASSERT_TRUE(value.ok()) << hex << ": " << value.status().ToString();
  ASSERT_EQ(value->kind, V8Numeric::Kind::kNumber) << hex;
  EXPECT_EQ(std::bit_cast<uint64_t>(value->number), std::bit_cast<uint64_t>(expected))
      << hex << " gave " << value->number;
}

void ExpectBigInt(std::string_view hex, const BigInt& expected) {
  Result<V8Numeric> value = ParseV8Numeric(FromHex(hex));
  ASSERT_TRUE(value.ok()) << hex << ": " << value.status().ToString();
  ASSERT_EQ(value->kind, V8Numeric::Kind::kBigInt) << hex;
  EXPECT_EQ(value->bigint, expected) << hex << " gave " << HexOf(value->bigint);
}

void ExpectError(std::string_view bytes, std::string_view message) {
  Result<V8Numeric> value = ParseV8Numeric(bytes);
  ASSERT_FALSE(value.ok()) << ToHex(bytes);
  EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(value.status().message(), message) << ToHex(bytes);
}

// The reference vectors, written with header version 15 as in the reference document.
const char* const kValidVectors[] = {
    "FF 0F 49 54",                          // 42
    "FF 0F 49 01",                          // -1
    "FF 0F 4E 00 00 00 00 00 00 F8 3F",     // 1.5
    "FF 0F 5A 10 01 00 00 00 00 00 00 00",  // 1n
    "FF 0F 5A 11 01 00 00 00 00 00 00 00",  // -1n
    "FF 0F 5A 00",                          // 0n
    "FF 0F 55 FF FF FF FF 0F",              // 4294967295 (uint32)
    "FF 0F 00 49 54",                       // padded 42
    "FF 0F 3F 02 49 54",                    // verify-object-count, then 42
    "FF 10 5A 10 01 00 00 00 00 00 00 00",  // 1n, version 16
};

TEST(V8ValueTest, ReferenceNumbers) {
  for (const char* header : {"FF 0F", "FF 10", "FF 0D", "FF 0E", "FF 90 00"}) {
    const std::string h = header;
    ExpectNumber(h + " 49 54", 42);
    ExpectNumber(h + " 49 01", -1);
    ExpectNumber(h + " 49 00", 0);
    ExpectNumber(h + " 4E 00 00 00 00 00 00 F8 3F", 1.5);
    ExpectNumber(h + " 4E 00 00 00 00 00 00 00 80", -0.0);
    ExpectNumber(h + " 4E 00 00 00 00 00 00 F0 7F", std::numeric_limits<double>::infinity());
  }
  ExpectNumber("FF 0F 49 FE FF FF FF 0F", std::numeric_limits<int32_t>::max());
  ExpectNumber("FF 0F 49 FF FF FF FF 0F", std::numeric_limits<int32_t>::min());
  ExpectNumber("FF 0F 55 00", 0);
  ExpectNumber("FF 0F 55 FF FF FF FF 0F", 4294967295.0);
  ExpectNumber("FF 0F 55 80 01", 128);
  // NaN keeps its bits.
  ExpectNumber("FF 0F 4E 00 00 00 00 00 00 F8 7F", std::numeric_limits<double>::quiet_NaN());
}

TEST(V8ValueTest, ReferenceBigInts) {
  for (const char* header : {"FF 0F", "FF 10", "FF 0D"}) {
    const std::string h = header;
    ExpectBigInt(h + " 5A 10 01 00 00 00 00 00 00 00", BigInt::FromU64(1));
    ExpectBigInt(h + " 5A 11 01 00 00 00 00 00 00 00", BigInt::FromI64(-1));
    ExpectBigInt(h + " 5A 00", BigInt{});
  }
  // Lengths that are not a multiple of 8 (denokv writes minimal lengths).
  ExpectBigInt("FF 0F 5A 02 01", BigInt::FromU64(1));
  ExpectBigInt("FF 0F 5A 07 FF FF FF", BigInt::FromI64(-0xFFFFFF));
  ExpectBigInt("FF 0F 5A 01", BigInt{});  // "-0n" normalises to 0n
  ExpectBigInt("FF 0F 5A 06 00 00 00", BigInt{});
  // 2^64 and -(2^64 + 2).
  ExpectBigInt("FF 0F 5A 20 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00",
               BigInt{false, {0, 0, 0, 0, 0, 0, 0, 0, 1}});
  ExpectBigInt("FF 0F 5A 21 02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00",
               BigInt{true, {2, 0, 0, 0, 0, 0, 0, 0, 1}});
  // Padding before the tag, version 16.
  ExpectBigInt("FF 10 00 00 5A 10 2A 00 00 00 00 00 00 00", BigInt::FromU64(42));
}

TEST(V8ValueTest, EncodeReferenceVectors) {
  EXPECT_EQ(ToHex(EncodeV8Number(1.5)), "FF 0F 4E 00 00 00 00 00 00 F8 3F");
  EXPECT_EQ(ToHex(EncodeV8Number(42)), "FF 0F 4E 00 00 00 00 00 00 45 40");
  EXPECT_EQ(ToHex(EncodeV8Number(-0.0)), "FF 0F 4E 00 00 00 00 00 00 00 80");
  EXPECT_EQ(ToHex(EncodeV8BigInt(BigInt::FromU64(1))), "FF 0F 5A 10 01 00 00 00 00 00 00 00");
  EXPECT_EQ(ToHex(EncodeV8BigInt(BigInt::FromI64(-1))), "FF 0F 5A 11 01 00 00 00 00 00 00 00");
  EXPECT_EQ(ToHex(EncodeV8BigInt(BigInt{})), "FF 0F 5A 00");
  EXPECT_EQ(ToHex(EncodeV8BigInt(BigInt::FromU64(std::numeric_limits<uint64_t>::max()))),
            "FF 0F 5A 10 FF FF FF FF FF FF FF FF");
  EXPECT_EQ(ToHex(EncodeV8BigInt(BigInt{true, {0, 0, 0, 0, 0, 0, 0, 0, 1}})),
            "FF 0F 5A 21 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00");
  // 8 digits = 64 bytes: bitfield 128 needs a two-byte varint.
  BigInt big{false, std::vector<uint8_t>(64, 0x11)};
  const std::string encoded = EncodeV8BigInt(big);
  EXPECT_EQ(ToHex(encoded.substr(0, 5)), "FF 0F 5A 80 01");
  EXPECT_EQ(encoded.size(), 5u + 64u);
  EXPECT_EQ(EncodeV8Numeric(V8Numeric::Number(1.5)), EncodeV8Number(1.5));
  EXPECT_EQ(EncodeV8Numeric(V8Numeric::FromBigInt(big)), encoded);
}

TEST(V8ValueTest, RoundTrip) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000; ++i) {
    const double d = std::bit_cast<double>(rng());
    ExpectNumber(ToHex(EncodeV8Number(d)), d);

    BigInt b;
    b.negative = rng() % 2 == 1;
    b.magnitude.resize(rng() % 70);
    for (uint8_t& byte : b.magnitude) byte = static_cast<uint8_t>(rng());
    b.Normalize();
    const std::string encoded = EncodeV8BigInt(b);
    Result<V8Numeric> parsed = ParseV8Numeric(encoded);
    ASSERT_TRUE(parsed.ok()) << ToHex(encoded);
    ASSERT_EQ(parsed->kind, V8Numeric::Kind::kBigInt);
    ASSERT_EQ(parsed->bigint, b) << ToHex(encoded);
  }
}

TEST(V8ValueTest, EncodedBigIntMagnitudeIsWholeDigits) {
  for (size_t len = 0; len <= 40; ++len) {
    BigInt b{false, std::vector<uint8_t>(len, 0x5A)};
    const std::string encoded = EncodeV8BigInt(b);
    Result<V8Numeric> parsed = ParseV8Numeric(encoded);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed->bigint, b);
    const size_t digits_bytes = (len + 7) / 8 * 8;
    // Header (2) + tag (1) + varint bitfield + magnitude.
    const size_t varint_bytes = (digits_bytes << 1) < 0x80 ? 1 : 2;
    EXPECT_EQ(encoded.size(), 3 + varint_bytes + digits_bytes) << len;
  }
}

TEST(V8ValueTest, UnsupportedTypes) {
  for (const char* hex : {
           "FF 0F 22 05 68 65 6C 6C 6F",           // "hello"
           "FF 0F 63 02 AC 20",                    // "€"
           "FF 0F 22 00",                          // ""
           "FF 0F 54",                             // true
           "FF 0F 46",                             // false
           "FF 0F 30",                             // null
           "FF 0F 5F",                             // undefined
           "FF 0F 6F 22 01 61 49 02 7B 01",        // {a:1}
           "FF 0F 41 02 49 02 49 04 24 00 02",     // [1,2]
           "FF 0F 44 00 00 00 00 00 00 00 00",     // new Date(0)
           "FF 0F 6E 00 00 00 00 00 00 F8 3F",     // new Number(1.5)
           "FF 0F 7A 10 01 00 00 00 00 00 00 00",  // Object(1n)
           "FF 10 42 03 01 02 03",                 // ArrayBuffer
           "FF 0F FF",                             // stray version tag
       }) {
    ExpectError(FromHex(hex), "unsupported value type");
  }
}

TEST(V8ValueTest, EmptyOperand) { ExpectError("", "operand cannot be empty"); }

TEST(V8ValueTest, InvalidValues) {
  for (const char* hex : {
           "49 54",                                   // no header
           "00 0F 49 54",                             // wrong header tag
           "FF",                                      // header only
           "FF 0F",                                   // no value
           "FF 0F 00 00",                             // only padding
           "FF 0C 49 54",                             // version 12
           "FF 11 49 54",                             // version 17
           "FF 8F",                                   // truncated version varint
           "FF 0F 49 54 00",                          // trailing byte
           "FF 0F 49 54 49 54",                       // two values
           "FF 0F 4E 00 00 00 00 00 00 F8 3F 00",     // trailing byte after double
           "FF 0F 5A 00 00",                          // trailing byte after 0n
           "FF 0F 5A 10 01 00 00 00 00 00 00 00 00",  // trailing byte after 1n
           "FF 0F 49 FF FF FF FF 1F",                 // varint over 32 bits
           "FF 0F 49 80 80 80 80 80 00",              // varint longer than 5 bytes
           "FF 0F 55 FF FF FF FF 10",                 // uint32 overflow
           "FF 0F 5A FE FF FF FF 07",                 // BigInt of 2^30-1 bytes, none given
           "FF 0F 5A FF FF FF FF 0F",                 // bitfield 2^32-1
           "FF 0F 5A 12 01 00 00 00 00 00 00 00",     // length 9, 8 given
           "FF 0F 3F",                                // verify count without count
           "FF 0F 3F 01",                             // verify count without value
       }) {
    ExpectError(FromHex(hex), "invalid v8 value");
  }
}

TEST(V8ValueTest, EveryTruncationIsAnError) {
  std::vector<std::string> valid;
  for (const char* hex : kValidVectors) valid.push_back(FromHex(hex));
  valid.push_back(EncodeV8BigInt(BigInt{true, std::vector<uint8_t>(70, 0xEE)}));
  valid.push_back(EncodeV8Number(-123.456));
  for (const std::string& full : valid) {
    ASSERT_TRUE(ParseV8Numeric(full).ok()) << ToHex(full);
    ExpectError(std::string_view(full).substr(0, 0), "operand cannot be empty");
    for (size_t len = 1; len < full.size(); ++len) {
      ExpectError(std::string_view(full).substr(0, len), "invalid v8 value");
    }
  }
}

TEST(V8ValueTest, ArbitraryBytesNeverCrash) {
  std::mt19937_64 rng(2);
  const uint8_t kInteresting[] = {0xFF, 0x0F, 0x10, 0x00, 'I', 'U', 'N', 'Z', '?', 0x80, 0x7F};
  for (int i = 0; i < 50000; ++i) {
    std::string input;
    if (rng() % 4 != 0) input = rng() % 2 ? "\xFF\x0F" : "\xFF\x10";
    const size_t extra = rng() % 24;
    for (size_t k = 0; k < extra; ++k) {
      input.push_back(
          static_cast<char>(rng() % 2 ? kInteresting[rng() % std::size(kInteresting)] : rng()));
    }
    Result<V8Numeric> value = ParseV8Numeric(input);
    if (value.ok()) {
      if (value->kind == V8Numeric::Kind::kBigInt) {
        ASSERT_TRUE(IsNormalised(value->bigint));
      }
      continue;
    }
    const std::string& message = value.status().message();
    ASSERT_TRUE(message == "invalid v8 value" || message == "unsupported value type" ||
                message == "operand cannot be empty")
        << message;
  }
}

TEST(V8ReaderTest, Varint32Limits) {
  for (const auto& [hex, expected] : std::vector<std::pair<std::string, uint32_t>>{
           {"00", 0}, {"7F", 127}, {"80 01", 128}, {"FF FF FF FF 0F", 0xFFFFFFFFu}}) {
    const std::string bytes = FromHex(hex);  // the reader views it: keep it alive
    V8Reader reader(bytes);
    uint32_t value = 0;
    EXPECT_TRUE(reader.ReadVarint32(&value)) << hex;
    EXPECT_EQ(value, expected) << hex;
    EXPECT_TRUE(reader.done()) << hex;
    std::string written;
    AppendVarint32(expected, &written);
    EXPECT_EQ(ToHex(written), hex);
    EXPECT_EQ(Varint32Size(expected), written.size());
  }
  for (const char* hex : {"", "80", "FF FF FF FF 1F", "80 80 80 80 80 00"}) {
    const std::string bytes = FromHex(hex);
    V8Reader reader(bytes);
    uint32_t value = 0;
    EXPECT_FALSE(reader.ReadVarint32(&value)) << hex;
  }
}

TEST(V8ReaderTest, ZigZagDoubleHeaderAndTags) {
  const std::string bytes = FromHex("FF 0F 00 00 49 01 03 00 00 00 00 00 00 F8 3F");
  V8Reader reader(bytes);
  uint8_t tag = 0;
  int32_t i = 0;
  double d = 0;
  ASSERT_TRUE(reader.ReadHeader());
  ASSERT_TRUE(reader.ReadTag(&tag));  // skips the two padding bytes
  EXPECT_EQ(tag, v8tag::kInt32);
  ASSERT_TRUE(reader.ReadZigZag32(&i));
  EXPECT_EQ(i, -1);
  ASSERT_TRUE(reader.ReadZigZag32(&i));
  EXPECT_EQ(i, -2);
  EXPECT_EQ(reader.remaining(), 8u);
  ASSERT_TRUE(reader.ReadDouble(&d));
  EXPECT_EQ(d, 1.5);
  EXPECT_TRUE(reader.done());
  EXPECT_FALSE(reader.ReadTag(&tag));
  EXPECT_FALSE(reader.ReadDouble(&d));

  for (const char* hex : {"", "FF", "FE 0F", "FF 0C", "FF 11", "FF 80"}) {
    const std::string bad_bytes = FromHex(hex);
    V8Reader bad(bad_bytes);
    EXPECT_FALSE(bad.ReadHeader()) << hex;
  }
  std::string header;
  AppendV8Header(&header);
  EXPECT_EQ(ToHex(header), "FF 0F");
}

TEST(BigIntTest, FromAndToU64) {
  EXPECT_TRUE(BigInt::FromU64(0).magnitude.empty());
  EXPECT_FALSE(BigInt::FromU64(0).negative);
  EXPECT_EQ(BigInt::FromU64(0x0102).magnitude, (std::vector<uint8_t>{2, 1}));
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256},
                     std::numeric_limits<uint64_t>::max()}) {
    EXPECT_EQ(BigInt::FromU64(v).ToU64(), v);
  }
  EXPECT_EQ(BigInt::FromI64(-1).ToU64(), std::nullopt);
  EXPECT_EQ((BigInt{false, {0, 0, 0, 0, 0, 0, 0, 0, 1}}).ToU64(), std::nullopt);  // 2^64
  const BigInt min = BigInt::FromI64(std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(min.negative);
  EXPECT_EQ(min.magnitude, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0x80}));
  EXPECT_EQ(BigInt::FromI64(0), BigInt{});
}

TEST(BigIntTest, Normalize) {
  BigInt v{true, {0, 0, 0}};
  v.Normalize();
  EXPECT_EQ(v, BigInt{});
  BigInt w{true, {5, 0, 0}};
  w.Normalize();
  EXPECT_EQ(w, BigInt::FromI64(-5));
}

TEST(BigIntTest, RandomAgainstInt128) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    // Mix full-width values with small ones so equal values and sign flips are common.
    auto draw = [&]() -> int128 {
      switch (rng() % 4) {
        case 0:
          return static_cast<int64_t>(rng());
        case 1:
          return static_cast<int128>(rng());  // unsigned 64-bit
        case 2:
          return -static_cast<int128>(rng());
        default:
          return static_cast<int64_t>(rng() % 7) - 3;
      }
    };
    const int128 a = draw();
    const int128 b = draw();
    const BigInt ba = FromInt128(a);
    const BigInt bb = FromInt128(b);
    ASSERT_EQ(ToInt128(ba), a);
    const BigInt sum = BigInt::Add(ba, bb);
    ASSERT_TRUE(IsNormalised(sum)) << HexOf(sum);
    ASSERT_EQ(ToInt128(sum), a + b) << HexOf(ba) << " + " << HexOf(bb) << " = " << HexOf(sum);
    ASSERT_EQ(sum, FromInt128(a + b));
    ASSERT_EQ(BigInt::Compare(ba, bb), (a > b) - (a < b)) << HexOf(ba) << " vs " << HexOf(bb);
    ASSERT_EQ(BigInt::Compare(bb, ba), (b > a) - (b < a));
    ASSERT_EQ(BigInt::Compare(ba, ba), 0);
    const std::optional<uint64_t> u = sum.ToU64();
    const bool fits = a + b >= 0 && a + b <= static_cast<int128>(~uint64_t{0});
    ASSERT_EQ(u.has_value(), fits);
    if (fits) {
      ASSERT_EQ(*u, static_cast<uint64_t>(a + b));
    }
  }
}

TEST(BigIntTest, CarriesAcrossManyBytes) {
  for (size_t n = 1; n <= 80; ++n) {
    const BigInt all_ones{false, std::vector<uint8_t>(n, 0xFF)};  // 256^n - 1
    std::vector<uint8_t> power(n + 1, 0);
    power[n] = 1;
    const BigInt power_of_256{false, power};  // 256^n
    EXPECT_EQ(BigInt::Add(all_ones, BigInt::FromU64(1)), power_of_256) << n;
    EXPECT_EQ(BigInt::Add(BigInt::FromU64(1), all_ones), power_of_256) << n;
    // Borrow all the way down, and the high byte disappears.
    EXPECT_EQ(BigInt::Add(power_of_256, BigInt::FromI64(-1)), all_ones) << n;
    EXPECT_EQ(BigInt::Add(BigInt::FromI64(-1), power_of_256), all_ones) << n;
    // Negative side: -(256^n - 1) - 1 = -256^n.
    const BigInt neg_ones{true, all_ones.magnitude};
    const BigInt neg_power{true, power};
    EXPECT_EQ(BigInt::Add(neg_ones, BigInt::FromI64(-1)), neg_power) << n;
    EXPECT_EQ(BigInt::Add(neg_power, BigInt::FromU64(1)), neg_ones) << n;
    // (256^n - 1) + (256^n - 1) = 2 * 256^n - 2.
    std::vector<uint8_t> doubled(n + 1, 0xFF);
    doubled[0] = 0xFE;
    doubled[n] = 1;
    EXPECT_EQ(BigInt::Add(all_ones, all_ones), (BigInt{false, doubled})) << n;
    EXPECT_EQ(BigInt::Compare(all_ones, power_of_256), -1);
    EXPECT_EQ(BigInt::Compare(neg_ones, neg_power), 1);
    EXPECT_EQ(BigInt::Compare(neg_power, BigInt::FromU64(0)), -1);
  }
}

TEST(BigIntTest, SignChanges) {
  EXPECT_EQ(BigInt::Add(BigInt::FromI64(5), BigInt::FromI64(-7)), BigInt::FromI64(-2));
  EXPECT_EQ(BigInt::Add(BigInt::FromI64(-5), BigInt::FromI64(7)), BigInt::FromI64(2));
  EXPECT_EQ(BigInt::Add(BigInt::FromI64(-5), BigInt::FromI64(-7)), BigInt::FromI64(-12));
  // x + (-x) is a non-negative zero with an empty magnitude.
  const BigInt big{true, std::vector<uint8_t>(50, 0x33)};
  const BigInt sum = BigInt::Add(big, BigInt{false, big.magnitude});
  EXPECT_FALSE(sum.negative);
  EXPECT_TRUE(sum.magnitude.empty());
  EXPECT_TRUE(sum.IsZero());
  EXPECT_EQ(BigInt::Add(BigInt{}, BigInt{}), BigInt{});
  EXPECT_EQ(BigInt::Add(BigInt{}, big), big);
  EXPECT_EQ(BigInt::Add(big, BigInt{}), big);
  // Crossing 2^64 downwards into the u64 range, as a KvU64 compatibility sum would.
  const BigInt two_64{false, {0, 0, 0, 0, 0, 0, 0, 0, 1}};
  EXPECT_EQ(BigInt::Add(two_64, BigInt::FromI64(-1)).ToU64(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(BigInt::Compare(BigInt{}, BigInt::FromI64(-1)), 1);
  EXPECT_EQ(BigInt::Compare(BigInt::FromI64(-1), BigInt{}), -1);
}

}  // namespace
}  // namespace kvc::codec
