#include "codec/iso_date.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "codec/civil_time.h"

namespace kvc::codec {
namespace {

constexpr int64_t kMsPerDay = 86'400'000;

// Back from days since 1970-01-01 to a date (DaysFromCivil, civil_time.h, is the other way).
void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

}  // namespace

double TimeClip(double ms) {
  if (!std::isfinite(ms) || std::fabs(ms) > kMaxDateMs) return std::nan("");
  return std::trunc(ms) + 0.0;
}

std::string FormatIsoDate(double ms) {
  const auto t = static_cast<int64_t>(ms);
  int64_t days = t / kMsPerDay;
  int64_t rem = t % kMsPerDay;
  if (rem < 0) {
    rem += kMsPerDay;
    --days;
  }
  int64_t y;
  int64_t m;
  int64_t d;
  CivilFromDays(days, &y, &m, &d);
  char buf[48];
  const int hh = static_cast<int>(rem / 3'600'000);
  const int mm = static_cast<int>(rem / 60'000 % 60);
  const int ss = static_cast<int>(rem / 1000 % 60);
  const int mss = static_cast<int>(rem % 1000);
  if (y >= 0 && y <= 9999) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", static_cast<int>(y),
                  static_cast<int>(m), static_cast<int>(d), hh, mm, ss, mss);
  } else {
    std::snprintf(buf, sizeof(buf), "%c%06d-%02d-%02dT%02d:%02d:%02d.%03dZ", y < 0 ? '-' : '+',
                  static_cast<int>(y < 0 ? -y : y), static_cast<int>(m), static_cast<int>(d), hh,
                  mm, ss, mss);
  }
  return buf;
}

Result<double> ParseIsoDate(std::string_view s) {
  const Status bad = InvalidArgument("bad date string");
  size_t pos = 0;
  const auto number = [&](size_t n, int64_t* out) {
    if (s.size() - pos < n) return false;
    *out = 0;
    for (size_t i = 0; i < n; ++i) {
      const char c = s[pos + i];
      if (c < '0' || c > '9') return false;
      *out = *out * 10 + (c - '0');
    }
    pos += n;
    return true;
  };
  const auto take = [&](char c) {
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  };
  int64_t year;
  if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const bool negative = s[pos++] == '-';
    if (!number(6, &year) || (negative && year == 0)) return bad;
    if (negative) year = -year;
  } else if (!number(4, &year)) {
    return bad;
  }
  int64_t month = 1;
  int64_t day = 1;
  if (take('-')) {
    if (!number(2, &month) || month < 1 || month > 12) return bad;
    if (take('-') && !number(2, &day)) return bad;
  }
  const int64_t days_in_month = DaysFromCivil(month == 12 ? year + 1 : year, month % 12 + 1, 1) -
                                DaysFromCivil(year, month, 1);
  if (day < 1 || day > days_in_month) return bad;
  int64_t hh = 0;
  int64_t mi = 0;
  int64_t ss = 0;
  double fraction = 0;
  int64_t offset_minutes = 0;
  if (take('T')) {
    if (!number(2, &hh) || !take(':') || !number(2, &mi) || hh > 24 || mi > 59) return bad;
    if (take(':')) {
      if (!number(2, &ss) || ss > 59) return bad;
      if (take('.')) {
        const size_t start = pos;
        double scale = 100;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
          fraction += (s[pos++] - '0') * scale;
          scale /= 10;
        }
        if (pos == start) return bad;
        fraction = std::trunc(fraction);
      }
    }
    if (hh == 24 && (mi != 0 || ss != 0 || fraction != 0)) return bad;
    if (!take('Z')) {
      if (pos >= s.size() || (s[pos] != '+' && s[pos] != '-')) return bad;
      const bool negative = s[pos++] == '-';
      int64_t oh;
      int64_t om;
      if (!number(2, &oh) || !take(':') || !number(2, &om) || oh > 23 || om > 59) return bad;
      offset_minutes = (negative ? -1 : 1) * (oh * 60 + om);
    }
  }
  if (pos != s.size()) return bad;
  const double ms = static_cast<double>(DaysFromCivil(year, month, day)) * kMsPerDay +
                    static_cast<double>(((hh * 60 + mi - offset_minutes) * 60 + ss) * 1000) +
                    fraction;
  if (std::fabs(ms) > kMaxDateMs) return InvalidArgument("date out of range");
  return ms;
}

}  // namespace kvc::codec
