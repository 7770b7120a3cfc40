#include "service/query.h"

namespace kvc::service {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> Decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      const bool room = i + 2 < s.size();
      const int hi = room ? HexDigit(s[i + 1]) : -1;
      const int lo = room ? HexDigit(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return InvalidArgument(
            "The query string has a '%' that is not followed by two hex digits.");
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Result<QueryParams> ParseQuery(std::string_view query) {
  QueryParams out;
  size_t i = 0;
  while (i <= query.size()) {
    size_t amp = query.find('&', i);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view piece = query.substr(i, amp - i);
    i = amp + 1;
    if (piece.empty()) continue;
    const size_t eq = piece.find('=');
    KVC_ASSIGN_OR_RETURN(std::string name, Decode(piece.substr(0, eq)));
    std::string value;
    if (eq != std::string_view::npos) {
      KVC_ASSIGN_OR_RETURN(value, Decode(piece.substr(eq + 1)));
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

const std::string* FindParam(const QueryParams& params, std::string_view name) {
  for (const auto& [k, v] : params) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::string EncodeQueryValue(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace kvc::service
