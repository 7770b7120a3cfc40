#include "codec/versionstamp.h"

namespace kvc::codec {

Versionstamp VersionToVersionstamp(int64_t version) {
  const auto bits = static_cast<uint64_t>(version);
  Versionstamp stamp{};
  for (size_t i = 0; i < 8; ++i) {
    stamp[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  }
  return stamp;
}

int64_t VersionstampToVersion(const Versionstamp& stamp) {
  uint64_t bits = 0;
  for (size_t i = 0; i < 8; ++i) bits = (bits << 8) | stamp[i];
  return static_cast<int64_t>(bits);
}

Result<Versionstamp> VersionstampFromBytes(std::string_view bytes) {
  Versionstamp stamp{};
  if (bytes.size() != stamp.size()) {
    return InvalidArgument("invalid versionstamp: expected " + std::to_string(stamp.size()) +
                           " bytes, got " + std::to_string(bytes.size()));
  }
  for (size_t i = 0; i < stamp.size(); ++i) stamp[i] = static_cast<uint8_t>(bytes[i]);
  return stamp;
}

std::string VersionstampToBytes(const Versionstamp& stamp) {
  return std::string(stamp.begin(), stamp.end());
}

std::string VersionstampToHex(const Versionstamp& stamp) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * stamp.size());
  for (uint8_t b : stamp) {
    hex.push_back(kHexDigits[b >> 4]);
    hex.push_back(kHexDigits[b & 0x0F]);
  }
  return hex;
}

std::string VersionToHex(int64_t version) {
  return VersionstampToHex(VersionToVersionstamp(version));
}

std::string VersionstampSuffix(const Versionstamp& stamp) {
  std::string suffix;
  suffix.reserve(kVersionstampSuffixSize);
  suffix.push_back('\x02');  // string key-part tag; hex digits never contain 00
  suffix += VersionstampToHex(stamp);
  suffix.push_back('\0');
  return suffix;
}

}  // namespace kvc::codec
