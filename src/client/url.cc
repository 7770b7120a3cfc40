#include "client/url.h"

#include <charconv>
#include <vector>

namespace kvc::client {

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

namespace {

// Drops "?query" and "#fragment".
std::string_view StripQuery(std::string_view s) { return s.substr(0, s.find_first_of("?#")); }

// RFC 3986 §5.2.4 remove_dot_segments on an absolute path.
std::string RemoveDotSegments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 1;  // skip the leading '/'
  bool trailing_slash = false;
  while (i <= path.size()) {
    size_t next = path.find('/', i);
    if (next == std::string_view::npos) next = path.size();
    const std::string_view segment = path.substr(i, next - i);
    trailing_slash = false;
    if (segment == ".") {
      trailing_slash = true;
    } else if (segment == "..") {
      if (!out.empty()) out.pop_back();
      trailing_slash = true;
    } else {
      out.push_back(segment);
    }
    i = next + 1;
  }
  std::string result;
  for (const std::string_view segment : out) {
    result.push_back('/');
    result.append(segment);
  }
  if (trailing_slash || result.empty()) result.push_back('/');
  return result;
}

}  // namespace

std::string Url::Authority() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Url::Origin() const { return scheme + "://" + Authority(); }

std::string Url::ToString() const { return Origin() + path; }

Result<Url> ParseUrl(std::string_view text) {
  Url url;
  const size_t colon = text.find("://");
  if (colon == std::string_view::npos) {
    return InvalidArgument("'" + std::string(text) + "' is not an absolute http(s) URL");
  }
  url.scheme = AsciiLower(text.substr(0, colon));
  if (url.scheme != "http" && url.scheme != "https") {
    return InvalidArgument("unsupported URL scheme '" + url.scheme + "' (use http or https)");
  }
  std::string_view rest = StripQuery(text.substr(colon + 3));
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  url.path = slash == std::string_view::npos ? "/" : RemoveDotSegments(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("URLs with user info are not supported: " + std::string(text));
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("unclosed '[' in URL host");
    url.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("unexpected text after ']' in URL host");
      port_text = after.substr(1);
    }
  } else {
    const size_t port_colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, port_colon));
    if (port_colon != std::string_view::npos) port_text = authority.substr(port_colon + 1);
  }
  if (url.host.empty()) return InvalidArgument("URL without a host: " + std::string(text));
  url.port = url.tls() ? 443 : 80;
  if (!port_text.empty()) {
    unsigned value = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return InvalidArgument("invalid port '" + std::string(port_text) + "' in URL");
    }
    url.port = static_cast<uint16_t>(value);
  }
  return url;
}

Result<Url> ResolveUrl(const Url& base, std::string_view reference) {
  reference = StripQuery(reference);
  if (reference.find("://") != std::string_view::npos) return ParseUrl(reference);
  if (reference.substr(0, 2) == "//") return ParseUrl(base.scheme + ":" + std::string(reference));
  Url out = base;
  if (reference.empty()) return out;
  if (reference.front() == '/') {
    out.path = RemoveDotSegments(reference);
    return out;
  }
  // Merge with the base path's directory (RFC 3986 §5.2.3).
  const size_t last_slash = base.path.rfind('/');
  out.path = RemoveDotSegments(base.path.substr(0, last_slash + 1) + std::string(reference));
  return out;
}

}  // namespace kvc::client
