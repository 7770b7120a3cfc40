// UTF-8 and UTF-16 decoding and encoding shared by the codecs: key validation (key_codec), V8
// strings (v8_wire, client_codec, v8_tree) and JSON text (json_text, v8_json).
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

// Returns the UTF-16 code units of `utf8`; malformed sequences become U+FFFD (see NextCodePoint).
std::u16string Utf8ToUtf16(std::string_view utf8);

// Returns the UTF-8 form of UTF-16 code units (a JS string). A surrogate pair becomes its code
// point; a lone surrogate, which has no UTF-8 form, becomes U+FFFD.
std::string Utf16ToUtf8(std::u16string_view units);

// True if `units` holds a lone surrogate, i.e. Utf16ToUtf8 would lose information.
bool HasLoneSurrogate(std::u16string_view units);

}  // namespace kvc::codec
