#include "auth/tokens.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/enum_names.h"
#include "common/random.h"

namespace kvc::auth {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // Eight bytes at a time, every byte read whatever the differences found so far. The empty
  // asm tells the compiler `diff` may be read and changed there, so it cannot end the loop
  // early once a difference is known. (OpenSSL's CRYPTO_memcmp, used before, goes byte by byte:
  // about 150 ns for a 210-byte data-path token on a 2026 EPYC VM, against 10 ns here; the
  // token memo compares one or more on every data-path request.)
  const size_t n = a.size();
  uint64_t diff = 0;
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= n; i += sizeof(uint64_t)) {
    uint64_t x = 0;
    uint64_t y = 0;
    std::memcpy(&x, a.data() + i, sizeof x);
    std::memcpy(&y, b.data() + i, sizeof y);
    diff |= x ^ y;
    __asm__ volatile("" : "+r"(diff));  // NOLINT(hicpp-no-assembler): an optimization barrier
  }
  for (; i < n; ++i) {
    diff |=
        static_cast<uint64_t>(static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
    __asm__ volatile("" : "+r"(diff));  // NOLINT(hicpp-no-assembler)
  }
  return diff == 0;
}

namespace {
constexpr EnumName<Scope> kScopeNames[] = {
    {Scope::kRead, "read"},
    {Scope::kWrite, "write"},
    {Scope::kAdmin, "admin"},
    {Scope::kQueue, "queue"},
};
}  // namespace

Result<Scope> ParseScope(std::string_view name) {
  if (std::optional<Scope> scope = ValueIn(kScopeNames, name)) return *scope;
  return InvalidArgument("unknown scope '" + std::string(name) +
                         "'; expected read, write, admin or queue");
}

const char* ScopeName(Scope scope) { return NameIn(kScopeNames, scope, "unknown"); }

namespace {
constexpr std::string_view kAccessPrefix = "kvt_";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}
}  // namespace

std::string HashAccessToken(std::string_view token) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), out);
  return HexEncode(std::string(reinterpret_cast<const char*>(out), sizeof out));
}

NewAccessToken GenerateAccessToken() {
  NewAccessToken t;
  t.id = HexEncode(RandomBytes(kIdHex / 2));
  t.token = std::string(kAccessPrefix) + t.id + "_" + HexEncode(RandomBytes(kSecretHex / 2));
  t.hash = HashAccessToken(t.token);
  return t;
}

std::string AccessTokenId(std::string_view token) {
  if (token.size() != kAccessPrefix.size() + kIdHex + 1 + kSecretHex) return {};
  if (token.substr(0, kAccessPrefix.size()) != kAccessPrefix) return {};
  std::string_view id = token.substr(kAccessPrefix.size(), kIdHex);
  if (token[kAccessPrefix.size() + kIdHex] != '_') return {};
  if (!IsLowerHex(id) || !IsLowerHex(token.substr(kAccessPrefix.size() + kIdHex + 1))) return {};
  return std::string(id);
}

Result<std::string_view> ParseBearer(std::string_view header) {
  const size_t sp = header.find(' ');
  if (header.empty() || sp == std::string_view::npos) {
    return Unauthenticated("Malformed authorization header.");
  }
  std::string scheme(header.substr(0, sp));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer") return Unauthenticated("Invalid access token.");
  std::string_view token = header.substr(sp + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return Unauthenticated("Malformed authorization header.");
  return token;
}

std::string TokenSigner::Mac(std::string_view data) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

namespace {
constexpr std::string_view kPrefix = "kvc1.";

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    if (p == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, p - start));
    start = p + 1;
  }
}
}  // namespace

namespace {

// Claims format 3 (`kvc3.<one URL-safe base64 piece>`): the claims packed in binary, then the
// first 16 bytes of HMAC-SHA256 over them. A data-path token rides in the authorization header
// of every request, which HTTP/2 clients send as a never-indexed, Huffman-coded literal, so each
// request pays per byte of it (decoding, header checks, copies, the memo's hash): format 2 was
// about 205 characters for the bootstrap token, format 3 is 85. The payload:
//   [0]      3
//   [1]      scope (bits 0-2) | database kind << 3 | token-id kind << 5 | has issuer << 7
//   [2..7]   expiry, Unix ms, 48 bits big-endian
//   [8..11]  nonce
//   database: kind 1: a lower-case UUID as 16 bytes; kind 0: length byte + bytes
//   token id: kind 1: "bootstrap" (no bytes); kind 2: 16 lower-case hex digits as 8 bytes;
//             kind 0: length byte + bytes
//   issuer:   16 bytes (the 32 hex digits of TokenSigner::Fingerprint), if present
// The first byte (3) is no base64 character and not the fingerprint's domain text, so a format-3
// MAC never equals one of format 2 or a fingerprint. Claims that do not fit (a field over 255
// bytes, an expiry past 2^48 ms) are issued in format 2, which is still verified.
constexpr std::string_view kPrefix3 = "kvc3.";
constexpr unsigned char kFormat3 = 3;
constexpr size_t kMac3Bytes = 16;
constexpr size_t kFixed3Bytes = 12;
constexpr size_t kMaxToken3Chars = 512;  // far above any token we issue; bounds the decode
constexpr int64_t kMaxExpiry3 = int64_t{1} << 48;
constexpr std::string_view kBootstrapId = "bootstrap";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Appends the bytes of lower-case hex `hex` (even length, checked by the caller).
void AppendHexBytes(std::string_view hex, std::string* out) {
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out->push_back(static_cast<char>(HexValue(hex[i]) * 16 + HexValue(hex[i + 1])));
  }
}

bool IsUuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : HexValue(s[i]) < 0) return false;
  }
  return true;
}

std::string UuidFromBytes(std::string_view b) {
  std::string hex = HexEncode(std::string(b));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

// The packed claims, or nullopt when they do not fit format 3.
std::optional<std::string> PackClaims3(const TokenClaims& c) {
  if (c.expires_at_ms < 0 || c.expires_at_ms >= kMaxExpiry3) return std::nullopt;
  const bool has_issuer = !c.issuer.empty();
  if (has_issuer && (c.issuer.size() != 32 || !IsLowerHex(c.issuer))) return std::nullopt;
  const unsigned db_kind = IsUuid(c.database_id) ? 1 : 0;
  const unsigned id_kind = c.access_token_id == kBootstrapId                                 ? 1
                           : c.access_token_id.size() == 16 && IsLowerHex(c.access_token_id) ? 2
                                                                                             : 0;
  if ((db_kind == 0 && c.database_id.size() > 255) ||
      (id_kind == 0 && c.access_token_id.size() > 255)) {
    return std::nullopt;
  }
  std::string p;
  p.reserve(kFixed3Bytes + 16 + 9 + 16 + kMac3Bytes);
  p.push_back(static_cast<char>(kFormat3));
  p.push_back(static_cast<char>(static_cast<unsigned>(c.scope) | db_kind << 3 | id_kind << 5 |
                                (has_issuer ? 1u : 0u) << 7));
  for (int shift = 40; shift >= 0; shift -= 8) {
    p.push_back(static_cast<char>((c.expires_at_ms >> shift) & 0xff));
  }
  p += RandomBytes(4);
  auto put_raw = [&p](const std::string& s) {
    p.push_back(static_cast<char>(s.size()));
    p += s;
  };
  if (db_kind == 1) {
    std::string hex = c.database_id;
    std::erase(hex, '-');
    AppendHexBytes(hex, &p);
  } else {
    put_raw(c.database_id);
  }
  if (id_kind == 2) {
    AppendHexBytes(c.access_token_id, &p);
  } else if (id_kind == 0) {
    put_raw(c.access_token_id);
  }
  if (has_issuer) AppendHexBytes(c.issuer, &p);
  return p;
}

}  // namespace

Result<TokenClaims> ParsePackedClaims(std::string_view p) {
  const Status bad = Unauthenticated(
      "The authorization token is invalid; repeat the metadata exchange to get a new one.");
  if (p.size() < kFixed3Bytes || static_cast<unsigned char>(p[0]) != kFormat3) return bad;
  const auto flags = static_cast<unsigned char>(p[1]);
  const unsigned scope = flags & 7u;
  const unsigned db_kind = (flags >> 3) & 3u;
  const unsigned id_kind = (flags >> 5) & 3u;
  const bool has_issuer = (flags >> 7) != 0;
  if (scope < 1 || scope > 4 || db_kind > 1 || id_kind > 2) return bad;
  TokenClaims c;
  c.scope = static_cast<Scope>(scope);
  for (size_t i = 2; i < 8; ++i) {
    c.expires_at_ms = c.expires_at_ms << 8 | static_cast<unsigned char>(p[i]);
  }
  p.remove_prefix(kFixed3Bytes);  // format, flags, expiry, nonce
  auto take = [&p](size_t n, std::string_view* out) {
    if (p.size() < n) return false;
    *out = p.substr(0, n);
    p.remove_prefix(n);
    return true;
  };
  auto take_raw = [&](std::string* out) {
    std::string_view len;
    std::string_view bytes;
    if (!take(1, &len) || !take(static_cast<unsigned char>(len[0]), &bytes)) return false;
    *out = std::string(bytes);
    return true;
  };
  std::string_view field;
  if (db_kind == 1) {
    if (!take(16, &field)) return bad;
    c.database_id = UuidFromBytes(field);
  } else if (!take_raw(&c.database_id)) {
    return bad;
  }
  if (id_kind == 1) {
    c.access_token_id = std::string(kBootstrapId);
  } else if (id_kind == 2) {
    if (!take(8, &field)) return bad;
    c.access_token_id = HexEncode(std::string(field));
  } else if (!take_raw(&c.access_token_id)) {
    return bad;
  }
  if (has_issuer) {
    if (!take(16, &field)) return bad;
    c.issuer = HexEncode(std::string(field));
  }
  if (!p.empty()) return bad;  // every byte accounted for
  return c;
}

std::string TokenSigner::Issue(const TokenClaims& c, TokenFormat format) const {
  std::optional<std::string> packed;
  if (format == TokenFormat::kPacked) packed = PackClaims3(c);
  if (packed) {
    std::string blob = *packed + Mac(*packed).substr(0, kMac3Bytes);
    return std::string(kPrefix3) + Base64UrlEncode(blob);
  }
  // Claims (format 2): version|database|scope|access-token-id|expiry|nonce|issuer. None of the
  // fields may contain '|'; ids are UUIDs or labels we generate, the issuer is hex.
  std::string claims = "2|" + c.database_id + "|" + std::to_string(static_cast<int>(c.scope)) +
                       "|" + c.access_token_id + "|" + std::to_string(c.expires_at_ms) + "|" +
                       HexEncode(RandomBytes(8)) + "|" + c.issuer;
  std::string body = Base64UrlEncode(claims);
  return std::string(kPrefix) + body + "." + Base64UrlEncode(Mac(body));
}

std::string TokenSigner::Fingerprint(std::string_view access_token) const {
  // Domain-separated from the token MACs, so a fingerprint is never a valid MAC of claims.
  std::string input = "kvconnect access-token fingerprint\n";
  input.append(access_token);
  return HexEncode(Mac(input).substr(0, 16));
}

namespace {

std::atomic<uint64_t> next_signer_id{1};

// The per-thread memo of verified tokens, so a request whose token this thread has checked
// before costs a hash and one compare instead of an HMAC, two base64 decodes and a parse. A
// connection sends the same token with every request, and a server has many connections per
// thread (every Deno process that opens a database gets a token of its own), so the memo holds
// up to kMemoEntries; only tokens whose MAC checked out are stored, so requests that fail
// authentication cannot fill it. When full, entries past their expiry go first, then all.
// Keys compare in constant time (ConstantTimeEquals), like every other token compare.
struct MemoHash {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct MemoEqual {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name
  bool operator()(std::string_view a, std::string_view b) const { return ConstantTimeEquals(a, b); }
};
struct VerifiedToken {
  uint64_t signer = 0;
  TokenClaims claims;
};
constexpr size_t kMemoEntries = 512;
thread_local std::unordered_map<std::string, VerifiedToken, MemoHash, MemoEqual> verified_memo;

}  // namespace

TokenSigner::TokenSigner(std::string secret)
    : secret_(std::move(secret)), id_(next_signer_id.fetch_add(1)) {}

Result<TokenClaims> TokenSigner::Verify(std::string_view token, int64_t now_ms) const {
  KVC_ASSIGN_OR_RETURN(const TokenClaims* claims, VerifyInPlace(token, now_ms));
  return *claims;
}

Result<const TokenClaims*> TokenSigner::VerifyInPlace(std::string_view token,
                                                      int64_t now_ms) const {
  const TokenClaims* claims = nullptr;
  auto it = verified_memo.find(token);
  if (it != verified_memo.end() && it->second.signer == id_) {
    claims = &it->second.claims;
  } else {
    KVC_ASSIGN_OR_RETURN(TokenClaims checked, VerifyMac(token));
    if (verified_memo.size() >= kMemoEntries) {
      std::erase_if(verified_memo,
                    [now_ms](const auto& e) { return now_ms >= e.second.claims.expires_at_ms; });
      if (verified_memo.size() >= kMemoEntries) verified_memo.clear();
    }
    // Nodes of an unordered_map stay where they are until erased, so the pointer holds until
    // the next call on this thread (the only one that erases).
    claims =
        &verified_memo.insert_or_assign(std::string(token), VerifiedToken{id_, std::move(checked)})
             .first->second.claims;
  }
  if (now_ms >= claims->expires_at_ms) {
    return Unauthenticated(
        "The authorization token has expired; repeat the metadata exchange to get a new one.");
  }
  return claims;
}

size_t VerifiedTokenMemoSize() { return verified_memo.size(); }

Result<TokenClaims> TokenSigner::VerifyMac(std::string_view token) const {
  const Status bad = Unauthenticated(
      "The authorization token is invalid; repeat the metadata exchange to get a new one.");
  if (token.substr(0, kPrefix3.size()) == kPrefix3) {
    token.remove_prefix(kPrefix3.size());
    if (token.size() > kMaxToken3Chars) return bad;
    const std::string text(token);
    std::string blob;
    // Canonical base64 only (no stray bits in the last character), so one token has one text.
    if (!Base64UrlDecode(text, &blob) || blob.size() < kFixed3Bytes + kMac3Bytes ||
        Base64UrlEncode(blob) != text) {
      return bad;
    }
    const std::string_view payload(blob.data(), blob.size() - kMac3Bytes);
    const std::string_view mac(blob.data() + payload.size(), kMac3Bytes);
    if (!ConstantTimeEquals(mac, std::string_view(Mac(payload)).substr(0, kMac3Bytes))) return bad;
    return ParsePackedClaims(payload);
  }
  if (token.substr(0, kPrefix.size()) != kPrefix) return bad;
  token.remove_prefix(kPrefix.size());
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return bad;
  std::string_view body = token.substr(0, dot);
  std::string mac;
  if (!Base64UrlDecode(std::string(token.substr(dot + 1)), &mac)) return bad;
  if (!ConstantTimeEquals(mac, Mac(body))) return bad;
  std::string claims;
  if (!Base64UrlDecode(std::string(body), &claims)) return bad;
  auto parts = Split(claims, '|');
  // Format 1 (before issuers) has six fields, format 2 seven.
  const bool v1 = parts.size() == 6 && parts[0] == "1";
  const bool v2 = parts.size() == 7 && parts[0] == "2";
  if (!v1 && !v2) return bad;
  TokenClaims c;
  c.database_id = std::string(parts[1]);
  try {
    int scope = std::stoi(std::string(parts[2]));
    if (scope < 1 || scope > 4) return bad;
    c.scope = static_cast<Scope>(scope);
    c.expires_at_ms = std::stoll(std::string(parts[4]));
  } catch (...) {
    return bad;
  }
  c.access_token_id = std::string(parts[3]);
  if (v2) c.issuer = std::string(parts[6]);
  return c;
}

}  // namespace kvc::auth
