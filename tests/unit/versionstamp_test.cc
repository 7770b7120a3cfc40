#include "codec/versionstamp.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "codec/key_codec.h"

namespace kvc::codec {
namespace {

TEST(VersionstampTest, Layout) {
  EXPECT_EQ(VersionToVersionstamp(0), (Versionstamp{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(VersionToVersionstamp(1), (Versionstamp{0, 0, 0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(VersionToVersionstamp(0x0102030405060708),
            (Versionstamp{1, 2, 3, 4, 5, 6, 7, 8, 0, 0}));
  EXPECT_EQ(VersionToVersionstamp(-1),
            (Versionstamp{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0}));
}

TEST(VersionstampTest, RoundTrip) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> versions = {
      0, 1, 9, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), -1};
  for (int i = 0; i < 1000; ++i) versions.push_back(static_cast<int64_t>(rng()));
  for (int64_t v : versions) {
    const Versionstamp stamp = VersionToVersionstamp(v);
    EXPECT_EQ(VersionstampToVersion(stamp), v);
    Result<Versionstamp> parsed = VersionstampFromBytes(VersionstampToBytes(stamp));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, stamp);
  }
}

TEST(VersionstampTest, ToVersionIgnoresTrailingBytes) {
  EXPECT_EQ(VersionstampToVersion(Versionstamp{0, 0, 0, 0, 0, 0, 1, 0, 0xAB, 0xCD}), 256);
}

TEST(VersionstampTest, FromBytesRequiresTenBytes) {
  for (size_t len : {0, 1, 9, 11, 20}) {
    Result<Versionstamp> stamp = VersionstampFromBytes(std::string(len, '\x01'));
    ASSERT_FALSE(stamp.ok()) << len;
    EXPECT_EQ(stamp.status().code(), StatusCode::kInvalidArgument);
  }
  Result<Versionstamp> stamp =
      VersionstampFromBytes(std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08\xFF", 10));
  ASSERT_TRUE(stamp.ok());
  EXPECT_EQ(*stamp, (Versionstamp{0, 1, 2, 3, 4, 5, 6, 7, 8, 0xFF}));
}

TEST(VersionstampTest, Hex) {
  EXPECT_EQ(VersionstampToHex(VersionToVersionstamp(1)), "00000000000000010000");
  EXPECT_EQ(VersionstampToHex(VersionToVersionstamp(0x0123456789ABCDEF)), "0123456789abcdef0000");
  EXPECT_EQ(VersionToHex(0x0123456789ABCDEF), "0123456789abcdef0000");
  EXPECT_EQ(VersionstampToHex(Versionstamp{0xFF, 0xEE, 0, 0, 0, 0, 0, 0, 0x0A, 0xB0}),
            "ffee0000000000000ab0");
}

TEST(VersionstampTest, Suffix) {
  const Versionstamp stamp = VersionToVersionstamp(0x0123456789ABCDEF);
  const std::string suffix = VersionstampSuffix(stamp);
  ASSERT_EQ(suffix.size(), kVersionstampSuffixSize);
  EXPECT_EQ(suffix, std::string("\x02") + "0123456789abcdef0000" + std::string(1, '\0'));
  // The suffix is exactly one encoded string key part.
  EXPECT_EQ(suffix, EncodeKey({KeyPart::String(VersionstampToHex(stamp))}));
  const std::string key = EncodeKey({KeyPart::String("log")}) + suffix;
  EXPECT_EQ(KeyToString(key), R"(["log","0123456789abcdef0000"])");
}

TEST(VersionstampTest, OrderMatchesVersionOrder) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 1000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() >> 1);
    const int64_t b = static_cast<int64_t>(rng() >> (1 + rng() % 63));
    const Versionstamp sa = VersionToVersionstamp(a);
    const Versionstamp sb = VersionToVersionstamp(b);
    EXPECT_EQ(sa < sb, a < b);  // std::array compares bytes as unsigned
    EXPECT_EQ(VersionstampSuffix(sa) < VersionstampSuffix(sb), a < b);
  }
}

}  // namespace
}  // namespace kvc::codec
