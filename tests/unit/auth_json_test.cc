// Data-path tokens, bearer parsing and the metadata-exchange JSON codec.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "auth/tokens.h"
#include "codec/metadata_json.h"
#include "common/clock.h"
#include "common/random.h"

namespace kvc {
namespace {

TEST(Tokens, IssueVerifyAndTamper) {
  auth::TokenSigner signer(std::string(32, 's'));
  auth::TokenClaims c{"0b6f3a8e-1111-4222-8333-444455556666", auth::Scope::kRead, "tok1",
                      NowUnixMs() + 60000};
  std::string t = signer.Issue(c);
  auto v = signer.Verify(t, NowUnixMs());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->database_id, c.database_id);
  EXPECT_EQ(v->scope, auth::Scope::kRead);
  EXPECT_EQ(v->access_token_id, "tok1");
  EXPECT_NE(signer.Issue(c), t);  // nonce: tokens are never reused

  std::string tampered = t;
  tampered[8] = tampered[8] == 'A' ? 'B' : 'A';
  auto bad = signer.Verify(tampered, NowUnixMs());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(bad.status().message().find("authorization"), std::string::npos);

  auth::TokenSigner other(std::string(32, 'o'));
  EXPECT_FALSE(other.Verify(t, NowUnixMs()).ok());
  EXPECT_FALSE(signer.Verify(t, c.expires_at_ms).ok());  // expired
  EXPECT_FALSE(signer.Verify("", 0).ok());
  EXPECT_FALSE(signer.Verify("kvc1.", 0).ok());
  EXPECT_FALSE(signer.Verify("kvc1.!!!.???", 0).ok());
}

// Verify remembers tokens it checked (per thread); the memo must never let a token pass for
// another signer, even one living at the same address, nor skip the expiry check.
TEST(Tokens, VerifiedTokenMemoIsPerSignerAndStillChecksExpiry) {
  const int64_t now = NowUnixMs();
  auth::TokenClaims c{"0b6f3a8e-1111-4222-8333-444455556666", auth::Scope::kWrite, "tok2",
                      now + 60000};
  std::string t;
  {
    auth::TokenSigner a(std::string(32, 'a'));
    t = a.Issue(c);
    ASSERT_TRUE(a.Verify(t, now).ok());
    ASSERT_TRUE(a.Verify(t, now).ok());  // from the memo
    EXPECT_FALSE(a.Verify(t, c.expires_at_ms).ok());
  }
  for (int i = 0; i < 3; ++i) {
    auth::TokenSigner b(std::string(32, 'b'));  // likely where `a` lived
    EXPECT_FALSE(b.Verify(t, now).ok());
  }
  auth::TokenSigner a2(std::string(32, 'a'));  // same secret: a different signer, same key
  for (int i = 0; i < 10; ++i) {               // more tokens than memo slots
    auth::TokenClaims ci = c;
    ci.access_token_id = "t" + std::to_string(i);
    const std::string ti = a2.Issue(ci);
    auto v = a2.Verify(ti, now);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->access_token_id, ci.access_token_id);
    std::string tampered = ti;
    char& ch = tampered[tampered.size() - 5];  // inside the MAC, clear of padding bits
    ch = ch == 'A' ? 'B' : 'A';
    EXPECT_FALSE(a2.Verify(tampered, now).ok());
    EXPECT_TRUE(a2.Verify(ti, now).ok());
  }
}

// The memo holds the tokens of many connections at once (one per Deno process that opened a
// database), stays bounded, drops expired tokens first when full, and never answers a token with
// another token's claims.
TEST(Tokens, VerifiedTokenMemoHoldsManyTokensAndStaysBounded) {
  const int64_t now = NowUnixMs();
  auth::TokenSigner signer(std::string(32, 'm'));
  auto issue = [&](int i, int64_t expires) {
    auth::TokenClaims c{"0b6f3a8e-1111-4222-8333-444455556666", auth::Scope::kRead,
                        "m" + std::to_string(i), expires};
    return signer.Issue(c);
  };
  // Earlier tests may have left tokens in this thread's memo: count from here.
  std::vector<std::string> live;
  for (int i = 0; i < 200; ++i) live.push_back(issue(i, now + 60000));
  for (const std::string& t : live) ASSERT_TRUE(signer.Verify(t, now).ok());
  const size_t held = auth::VerifiedTokenMemoSize();
  EXPECT_GE(held, 200u);
  for (int round = 0; round < 2; ++round) {  // all of them again: answered from the memo
    for (size_t i = 0; i < live.size(); ++i) {
      auto v = signer.Verify(live[i], now);
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(v->access_token_id, "m" + std::to_string(i));
    }
  }
  EXPECT_EQ(auth::VerifiedTokenMemoSize(), held) << "no token was stored twice";
  // A token that fails its MAC is never stored.
  std::string tampered = live[7];
  char& ch = tampered[tampered.size() - 5];
  ch = ch == 'A' ? 'B' : 'A';
  EXPECT_FALSE(signer.Verify(tampered, now).ok());
  EXPECT_EQ(auth::VerifiedTokenMemoSize(), held);
  // Thousands of tokens: the memo stays within its bound (512) and every answer is right.
  for (int i = 200; i < 3000; ++i) {
    const std::string t = issue(i, i % 2 == 0 ? now + 60000 : now + 1);
    auto v = signer.Verify(t, now);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->access_token_id, "m" + std::to_string(i));
    ASSERT_LE(auth::VerifiedTokenMemoSize(), 512u);
  }
  // Expired tokens are refused whether they come from the memo or not.
  const std::string soon = issue(5000, now + 1);
  ASSERT_TRUE(signer.Verify(soon, now).ok());
  EXPECT_FALSE(signer.Verify(soon, now + 1).ok());
}

// The bootstrap token's fingerprint travels in the signed claims (format 2), is keyed by the
// secret, and differs between bootstrap tokens; a format-1 token still parses, without one.
TEST(Tokens, IssuerFingerprintIsSignedAndFormat1HasNone) {
  auth::TokenSigner signer(std::string(32, 's'));
  const std::string fa = signer.Fingerprint("bootstrap-token-A-0123");
  EXPECT_EQ(fa.size(), 32u);
  EXPECT_EQ(fa, signer.Fingerprint("bootstrap-token-A-0123"));
  EXPECT_NE(fa, signer.Fingerprint("bootstrap-token-B-0123"));
  EXPECT_NE(fa, auth::TokenSigner(std::string(32, 'o')).Fingerprint("bootstrap-token-A-0123"));

  auth::TokenClaims c{"db", auth::Scope::kAdmin, "bootstrap", NowUnixMs() + 60000, fa};
  auto v = signer.Verify(signer.Issue(c), NowUnixMs());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->issuer, fa);

  // A format-1 token (six fields, no issuer), signed as servers before issuers signed them.
  const std::string secret(32, 's');
  const std::string body =
      Base64UrlEncode("1|db|3|bootstrap|" + std::to_string(NowUnixMs() + 60000) + "|00");
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &len);
  const std::string v1 =
      "kvc1." + body + "." + Base64UrlEncode(std::string(reinterpret_cast<char*>(mac), len));
  auto old = signer.Verify(v1, NowUnixMs());
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->access_token_id, "bootstrap");
  EXPECT_TRUE(old->issuer.empty());
}

TEST(Tokens, ParseBearer) {
  EXPECT_EQ(*auth::ParseBearer("Bearer abc"), "abc");
  EXPECT_EQ(*auth::ParseBearer("bEaReR abc"), "abc");
  EXPECT_EQ(auth::ParseBearer("").status().message(), "Malformed authorization header.");
  EXPECT_EQ(auth::ParseBearer("abc").status().message(), "Malformed authorization header.");
  EXPECT_EQ(auth::ParseBearer("Basic abc").status().message(), "Invalid access token.");
  EXPECT_TRUE(auth::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(auth::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(auth::ConstantTimeEquals("abc", "abcd"));
}

TEST(Tokens, ConstantTimeEqualsComparesEveryByte) {
  EXPECT_TRUE(auth::ConstantTimeEquals("", ""));
  EXPECT_FALSE(auth::ConstantTimeEquals("", "a"));
  const std::string a("a\0b\xff", 4);
  std::string b = a;
  EXPECT_TRUE(auth::ConstantTimeEquals(a, b));
  for (size_t i = 0; i < b.size(); ++i) {  // a difference anywhere, even after a NUL
    std::string c = a;
    c[i] = static_cast<char>(c[i] ^ 0x80);
    EXPECT_FALSE(auth::ConstantTimeEquals(a, c)) << i;
  }
}

// The compare cannot be shortened by an optimizer: each of its loops passes the accumulated
// difference through an empty asm statement, so the compiler cannot know it and stop at the first
// difference, and nothing in it leaves early (a rule kept by a test, as layering_test does).
TEST(Tokens, ConstantTimeEqualsHasNoEarlyExit) {
  std::ifstream in(std::string(KVC_SOURCE_DIR) + "/src/auth/tokens.cc");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string src = text.str();
  const size_t def = src.find("bool ConstantTimeEquals(");
  ASSERT_NE(def, std::string::npos);
  const size_t end = src.find("\n}\n", def);
  ASSERT_NE(end, std::string::npos);
  const std::string body = src.substr(def, end - def);
  auto count = [&body](const std::string& what) {
    size_t n = 0;
    for (size_t at = body.find(what); at != std::string::npos; at = body.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_GE(count("for ("), 1u) << body;
  EXPECT_EQ(count("__asm__ volatile(\"\" : \"+r\"(diff));"), count("for (")) << body;
  EXPECT_EQ(count("break"), 0u) << body;
  EXPECT_EQ(count("memcmp("), 0u) << body;  // the library's memcmp stops early
  // One return for different lengths (they may leak), one at the end.
  EXPECT_EQ(count("return "), 2u) << body;
}

TEST(MetadataJson, RequestParsing) {
  auto r = codec::ParseMetadataRequest(R"({"supportedVersions":[1,2,3]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->supported_versions, (std::vector<int64_t>{1, 2, 3}));
  r = codec::ParseMetadataRequest("");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->supported_versions, (std::vector<int64_t>{1}));
  r = codec::ParseMetadataRequest("{not json");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not valid JSON"), std::string::npos);
  r = codec::ParseMetadataRequest(R"({"supportedVersions":"3"})");
  EXPECT_NE(r.status().message().find("supportedVersions"), std::string::npos)
      << r.status().message();
  r = codec::ParseMetadataRequest(R"({})");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  r = codec::ParseMetadataRequest(R"([1,2])");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(MetadataJson, ResponsesMatchSchemas) {
  codec::MetadataResponse m;
  m.version = 3;
  m.database_id = "0b6f3a8e-1111-4222-8333-444455556666";
  m.endpoints = {{"/v2", "strong"}};
  m.token = "kvc1.abc.def";
  m.expires_at = FormatRfc3339Utc(NowUnixMs() + 3600000);
  std::string json = codec::EncodeMetadataResponse(m);
  EXPECT_TRUE(
      codec::ValidateJsonAgainstSchema("metadata-exchange-response-v3.schema.json", json).ok());
  m.version = 1;
  m.endpoints = {{"http://127.0.0.1:4512/v2", "strong"}};
  json = codec::EncodeMetadataResponse(m);
  EXPECT_TRUE(
      codec::ValidateJsonAgainstSchema("metadata-exchange-response-v1.schema.json", json).ok());
  // The schemas reject what clients reject.
  m.endpoints = {{"/v2/", "strong"}};
  EXPECT_FALSE(codec::ValidateJsonAgainstSchema("metadata-exchange-response-v1.schema.json",
                                                codec::EncodeMetadataResponse(m))
                   .ok());
  EXPECT_FALSE(codec::ValidateJsonAgainstSchema(
                   "metadata-exchange-response-v3.schema.json",
                   R"({"version":3,"uuid":"x","endpoints":[],"token":"t","expiresAt":"x"})")
                   .ok());
}

TEST(Clock, Rfc3339) {
  EXPECT_EQ(FormatRfc3339Utc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Utc(1700000000123), "2023-11-14T22:13:20.123Z");
}

}  // namespace
}  // namespace kvc
