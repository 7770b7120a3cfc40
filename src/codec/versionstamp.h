// Versionstamps (reference §3.1): 10 bytes = the commit version as an 8-byte big-endian signed
// integer followed by two zero bytes. Versionstamps order as unsigned byte strings, which for
// non-negative versions is numeric order.
//
// Thread-safety: pure functions over value types; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::codec {

using Versionstamp = std::array<uint8_t, 10>;

// Length of the key suffix that M_SET_SUFFIX_VERSIONSTAMPED_KEY appends: 02, 20 hex digits, 00.
inline constexpr size_t kVersionstampSuffixSize = 22;

// Returns version as 8 big-endian bytes followed by 00 00.
Versionstamp VersionToVersionstamp(int64_t version);

// Returns the version held in the first 8 bytes (the last two are ignored).
int64_t VersionstampToVersion(const Versionstamp& stamp);

// Returns the versionstamp held in bytes, or InvalidArgument unless bytes is exactly 10 long.
Result<Versionstamp> VersionstampFromBytes(std::string_view bytes);

// Returns the 10 bytes of stamp as a string (e.g. for a protobuf bytes field).
std::string VersionstampToBytes(const Versionstamp& stamp);

// Returns the 20 lowercase hex digits of stamp.
std::string VersionstampToHex(const Versionstamp& stamp);

// Returns the 20 hex digits of version's versionstamp, as clients show it (e.g.
// "00000000000000050000").
std::string VersionToHex(int64_t version);

// Returns the 22 bytes appended to the key by M_SET_SUFFIX_VERSIONSTAMPED_KEY: 02, the 20 hex
// digits, 00 (i.e. one extra encoded string key part).
std::string VersionstampSuffix(const Versionstamp& stamp);

}  // namespace kvc::codec
