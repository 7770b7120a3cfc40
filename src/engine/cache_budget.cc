#include "engine/cache_budget.h"

#include <charconv>
#include <cmath>
#include <string>

namespace kvc::engine {

Result<size_t> ParseCacheBudget(std::string_view spec, uint64_t memory_bytes) {
  auto bad = [spec] {
    return InvalidArgument("read cache total '" + std::string(spec) +
                           "': expected a number of bytes (e.g. 4294967296) or a percentage of "
                           "the server's memory from 1% to 100% (e.g. 25%)");
  };
  if (spec.empty()) return bad();
  if (spec.back() == '%') {
    const std::string_view number = spec.substr(0, spec.size() - 1);
    double percent = 0;
    const char* end = number.data() + number.size();
    auto [p, ec] = std::from_chars(number.data(), end, percent, std::chars_format::fixed);
    if (number.empty() || ec != std::errc() || p != end || !std::isfinite(percent) || percent < 1 ||
        percent > 100) {
      return bad();
    }
    return static_cast<size_t>(static_cast<double>(memory_bytes) * percent / 100);
  }
  size_t bytes = 0;
  const char* end = spec.data() + spec.size();
  auto [p, ec] = std::from_chars(spec.data(), end, bytes);
  if (ec != std::errc() || p != end) return bad();
  return bytes;
}

}  // namespace kvc::engine
