#include "codec/json_text.h"

#include <cstdint>

#include "codec/utf8.h"

namespace kvc::codec {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

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
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out->append("\\u00");
          out->push_back(kHexDigits[c >> 4]);
          out->push_back(kHexDigits[c & 0x0F]);
        } else {
          out->push_back(static_cast<char>(c));
        }
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
