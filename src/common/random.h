// Cryptographically secure random bytes from the kernel (getrandom), plus hex and URL-safe
// base64 encodings.
// Thread-safety: all functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace kvc {

// Returns n random bytes. Aborts the process if the kernel cannot supply them (never expected).
std::string RandomBytes(size_t n);
// A random RFC 4122 version-4 UUID, lowercase and hyphenated.
std::string NewUuidV4();
// A UUIDv7 (RFC 9562): `unix_ms` in the first 48 bits, then `seq` (12 bits, as the spec's
// rand_a "monotonic counter" method), then random bits; ids made with increasing (ms, seq)
// sort in that order as text.
std::string NewUuidV7(int64_t unix_ms, uint16_t seq);
// Lowercase hex of bytes.
std::string HexEncode(const std::string& bytes);
// URL-safe base64 without padding.
std::string Base64UrlEncode(const std::string& bytes);
// Returns false on invalid input.
bool Base64UrlDecode(const std::string& text, std::string* out);

}  // namespace kvc
