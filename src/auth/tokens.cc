#include "auth/tokens.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
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

Result<std::string> ParseBearer(std::string_view header) {
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
  return std::string(token);
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

std::string TokenSigner::Issue(const TokenClaims& c) const {
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
  const TokenClaims* claims = nullptr;
  auto it = verified_memo.find(token);
  if (it != verified_memo.end() && it->second.signer == id_) claims = &it->second.claims;
  TokenClaims checked;
  if (!claims) {
    KVC_ASSIGN_OR_RETURN(checked, VerifyMac(token));
    if (verified_memo.size() >= kMemoEntries) {
      std::erase_if(verified_memo,
                    [now_ms](const auto& e) { return now_ms >= e.second.claims.expires_at_ms; });
      if (verified_memo.size() >= kMemoEntries) verified_memo.clear();
    }
    verified_memo.insert_or_assign(std::string(token), VerifiedToken{id_, checked});
    claims = &checked;
  }
  if (now_ms >= claims->expires_at_ms) {
    return Unauthenticated(
        "The authorization token has expired; repeat the metadata exchange to get a new one.");
  }
  return *claims;
}

size_t VerifiedTokenMemoSize() { return verified_memo.size(); }

Result<TokenClaims> TokenSigner::VerifyMac(std::string_view token) const {
  const Status bad = Unauthenticated(
      "The authorization token is invalid; repeat the metadata exchange to get a new one.");
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
