// Absolute http(s) URLs as the client stack needs them: parsing, the origin parts a
// connection needs, and RFC 3986 relative resolution (how KV Connect clients turn the endpoint
// URLs of a metadata answer into absolute ones, reference §1.5).
//
// Thread-safety: value type and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::client {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;    // without IPv6 brackets
  uint16_t port = 0;   // explicit or the scheme's default
  std::string path;    // starts with '/'; query and fragment are dropped

  bool tls() const { return scheme == "https"; }
  // host:port, with brackets around an IPv6 host.
  std::string Authority() const;
  // scheme://authority
  std::string Origin() const;
  // Origin() + path
  std::string ToString() const;
  bool SameOrigin(const Url& other) const {
    return scheme == other.scheme && host == other.host && port == other.port;
  }
};

// Parses an absolute http:// or https:// URL. A missing path becomes "/". Errors:
// InvalidArgument naming what is wrong (scheme, host, port, user info).
Result<Url> ParseUrl(std::string_view text);

// Resolves `reference` (absolute, scheme-relative "//host/p", absolute-path "/p" or relative
// "p", "./p", "../p") against `base` and removes dot segments. Errors: InvalidArgument for an
// absolute reference that ParseUrl rejects.
Result<Url> ResolveUrl(const Url& base, std::string_view reference);

// `s` with ASCII letters lowercased (schemes, header names).
std::string AsciiLower(std::string_view s);

}  // namespace kvc::client
