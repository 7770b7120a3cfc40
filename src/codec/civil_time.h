// Calendar arithmetic and digit parsing shared by the codecs that read and write dates (the V8
// JSON view's Date values, backup manifests' RFC 3339 times) and fixed-width decimal fields.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvc::codec {

// Days since 1970-01-01 of a proleptic Gregorian date (month 1..12).
inline int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Parses exactly `n` decimal digits at s[pos] into *out. False if any is not a digit or the
// text is too short. REQUIRES: n <= 18.
inline bool ParseDecimalDigits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos > s.size() || n > s.size() - pos) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace kvc::codec
