#include "codec/json_text.h"

#include <cstdint>

#include "codec/utf8.h"

namespace kvc::codec {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// The characters written as a backslash and a letter; other control characters and DEL are
// written as \u00XX.
constexpr char kEscaped[] = "\"\\\n\r\t";
constexpr char kEscapeLetters[] = "\"\\nrt";

}  // namespace

void AppendJsonQuoted(std::string_view s, std::string* out) {
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    const auto c = static_cast<uint8_t>(s[pos]);
    if (c >= 0x80) {
      const size_t start = pos;
      if (NextCodePoint(s, &pos)) {
        out->append(s.substr(start, pos - start));
      } else {
        out->append("\\ufffd");
      }
      continue;
    }
    ++pos;
    if (c >= 0x20 && c != 0x7F && c != '"' && c != '\\') {
      out->push_back(static_cast<char>(c));
      continue;
    }
    const std::string_view escaped(kEscaped);
    const size_t i = escaped.find(static_cast<char>(c));
    if (i != std::string_view::npos) {
      out->push_back('\\');
      out->push_back(kEscapeLetters[i]);
    } else {
      out->append("\\u00");
      out->push_back(kHexDigits[c >> 4]);
      out->push_back(kHexDigits[c & 0x0F]);
    }
  }
  out->push_back('"');
}

std::string JsonQuote(std::string_view s) {
  std::string out;
  AppendJsonQuoted(s, &out);
  return out;
}

}  // namespace kvc::codec
