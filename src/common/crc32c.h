// CRC-32C (Castagnoli), as used to check each record of a backup log segment. Our own
// table-driven implementation; the polynomial is 0x82F63B78 (reflected).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvc {

// The CRC-32C of `data`, continuing from `crc` (0 for a fresh start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace kvc
