// Little-endian 64-bit helpers for KvU64 values (VE_LE64). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvc {

// REQUIRES: b.size() >= 8; reads the first 8 bytes.
inline uint64_t DecodeLe64(std::string_view b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(i)]);
  return v;
}

inline std::string EncodeLe64(uint64_t v) {
  std::string b(8, '\0');
  for (size_t i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return b;
}

}  // namespace kvc
