// Hex helpers for readable test vectors. Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace kvc::testutil {

// "02 75 FF" -> the bytes 02 75 FF. Spaces are ignored.
inline std::string FromHex(std::string_view hex) {
  std::string out;
  int nibbles = 0;
  unsigned cur = 0;
  for (char c : hex) {
    if (c == ' ') continue;
    const unsigned v = (c >= '0' && c <= '9') ? c - '0' : (c | 0x20) - 'a' + 10;
    cur = (cur << 4) | v;
    if (++nibbles % 2 == 0) {
      out.push_back(static_cast<char>(cur));
      cur = 0;
    }
  }
  return out;
}

// The bytes as uppercase hex pairs separated by spaces.
inline std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : bytes) {
    if (!out.empty()) out.push_back(' ');
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xF]);
  }
  return out;
}

}  // namespace kvc::testutil
