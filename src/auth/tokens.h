// Access-token checks and self-contained, signed data-path tokens.
//
// A data-path token is `kvc3.<payload+mac>` (one URL-safe base64 piece: the claims packed in
// binary, then 16 bytes of HMAC-SHA256 over them with a server secret), so it is verified on the
// hot path without any lookup; about 85 characters, since every request carries it (tokens.cc
// has the layout). Claims that do not fit that layout, and servers before it, use
// `kvc1.<claims>.<mac>` (claims text `2|...`, format 2, or `1|...`, format 1; full 32-byte MAC
// over the base64 claims); both are still verified. A data-path token is never the access token
// itself. Formats 2 and 3 carry `issuer`, the fingerprint of the bootstrap token that minted it
// (format 1 tokens have none, so the caller can refuse them where a fingerprint is required).
//
// Thread-safety: TokenSigner is immutable after construction and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::auth {

// kQueue: the queue API only (docs/queues.md), no KV Connect reads or writes.
enum class Scope { kRead = 1, kWrite = 2, kAdmin = 3, kQueue = 4 };  // do not renumber: stored

// "read" | "write" | "admin" | "queue". Errors: InvalidArgument naming the accepted values.
Result<Scope> ParseScope(std::string_view name);
const char* ScopeName(Scope scope);

// A new access token `kvt_<id>_<secret>` (id: 16 hex digits, secret: 64 hex digits). Only
// `hash` is stored; `token` is shown once.
struct NewAccessToken {
  std::string token;
  std::string id;
  std::string hash;
};
NewAccessToken GenerateAccessToken();
// Hex SHA-256 of a whole access token (the secret has 256 random bits, so no slow KDF).
std::string HashAccessToken(std::string_view token);
// The id part of a `kvt_` access token, or an empty string if `token` is not shaped like one.
std::string AccessTokenId(std::string_view token);

struct TokenClaims {
  std::string database_id;
  Scope scope = Scope::kWrite;
  std::string access_token_id;  // which access token the exchange used ("bootstrap" for serve's)
  int64_t expires_at_ms = 0;    // hard end of validity (including any grace period)
  // For the bootstrap token: TokenSigner::Fingerprint of it, so the data-path tokens it minted
  // die with it when the operator replaces it. Empty for catalog tokens (their id is checked
  // against the catalog) and for tokens of claims format 1. Lower-case hex.
  std::string issuer;
};

// Compares in time independent of where the inputs differ (lengths may leak).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Extracts the token of an `Authorization: Bearer <token>` header.
// Errors: Unauthenticated "Malformed authorization header." (missing or no space),
// Unauthenticated "Invalid access token." (scheme other than bearer, case-insensitive).
// The token is a view into `header`.
Result<std::string_view> ParseBearer(std::string_view header);

// Which layout TokenSigner::Issue writes. Both are always verified; kText exists for a rolling
// upgrade of several nodes sharing a secret, while some still run a version before kPacked.
enum class TokenFormat { kText = 2, kPacked = 3 };

// Issues and verifies data-path tokens (HMAC-SHA256 over the claims).
//
// Verify remembers the last few tokens whose MAC it checked, per thread, so a client that
// sends the same token on every request costs one string compare instead of two base64 decodes
// and an HMAC; the expiry is still checked on every call.
// Thread-safety: all methods are thread-safe.
class TokenSigner {
 public:
  // REQUIRES: secret.size() >= 32.
  explicit TokenSigner(std::string secret);

  // REQUIRES: no field of `claims` contains '|'.
  // kPacked falls back to kText for claims it cannot hold (tokens.cc).
  std::string Issue(const TokenClaims& claims, TokenFormat format = TokenFormat::kPacked) const;
  // A short keyed fingerprint (32 hex digits of an HMAC under the secret) of an access token,
  // for TokenClaims::issuer. Without the secret it says nothing about the token.
  std::string Fingerprint(std::string_view access_token) const;
  // Errors: Unauthenticated with a text that mentions authorization (bad format, bad MAC,
  // expired).
  Result<TokenClaims> Verify(std::string_view token, int64_t now_ms) const;
  // As Verify, without copying the claims: they live in this thread's memo of verified tokens
  // and stay valid until this thread's next Verify or VerifyInPlace call (of any signer).
  Result<const TokenClaims*> VerifyInPlace(std::string_view token, int64_t now_ms) const;

 private:
  std::string Mac(std::string_view data) const;
  // Verify without the memo and without the expiry check.
  Result<TokenClaims> VerifyMac(std::string_view token) const;
  const std::string secret_;
  const uint64_t id_;  // distinguishes signers in the per-thread memo
};

// The claims of a format-3 payload (without its MAC), for TokenSigner::Verify and the fuzz
// target; it checks nothing about authenticity. Errors: Unauthenticated "The authorization token
// is invalid; ..." for bytes that are not exactly one packed claims record.
Result<TokenClaims> ParsePackedClaims(std::string_view payload);

// Tokens in the calling thread's memo of verified tokens (see TokenSigner::Verify), for tests.
size_t VerifiedTokenMemoSize();

}  // namespace kvc::auth
