// UTF-8 decoding and encoding shared by the codecs: key validation (key_codec), V8 strings
// (client_codec) and JSON text (json_text).
//
// Well-formed means as in the Unicode standard: no overlong forms, no surrogates (U+D800..
// U+DFFF), nothing above U+10FFFF.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvc::codec {

// U+FFFD, what malformed input becomes where it is replaced.
inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the UTF-8 sequence at utf8[*pos] and advances *pos past it. Returns nullopt for a
// malformed sequence (bad lead or continuation byte, truncated, overlong, surrogate, above
// U+10FFFF) and then advances *pos by one byte only, so that decoding resumes at the next byte.
// REQUIRES: *pos < utf8.size().
std::optional<uint32_t> NextCodePoint(std::string_view utf8, size_t* pos);

// Appends the UTF-8 form of `cp`. REQUIRES: cp <= 0x10FFFF and cp is not a surrogate.
void AppendUtf8(uint32_t cp, std::string* out);

// True if `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace kvc::codec
