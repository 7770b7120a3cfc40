// Access tokens (auth/tokens.h): their shape, hash and public id, and the scope names.
#include "auth/tokens.h"

#include <gtest/gtest.h>

namespace kvc {
namespace {

TEST(AccessTokens, ShapeHashAndId) {
  auto t = auth::GenerateAccessToken();
  EXPECT_EQ(t.token.size(), 4u + 16 + 1 + 64);
  EXPECT_EQ(t.token.rfind("kvt_", 0), 0u);
  EXPECT_EQ(auth::AccessTokenId(t.token), t.id);
  EXPECT_EQ(auth::HashAccessToken(t.token), t.hash);
  EXPECT_EQ(t.hash.size(), 64u);
  EXPECT_EQ(t.token.find(t.hash), std::string::npos);  // the hash is not the secret
  EXPECT_NE(auth::GenerateAccessToken().token, t.token);
  // Anything not exactly shaped like a token has no id.
  EXPECT_EQ(auth::AccessTokenId(""), "");
  EXPECT_EQ(auth::AccessTokenId("kvc_0123456789abcdef"), "");
  EXPECT_EQ(auth::AccessTokenId(t.token + "0"), "");
  std::string upper = t.token;
  upper[5] = 'G';
  EXPECT_EQ(auth::AccessTokenId(upper), "");
  std::string no_sep = t.token;
  no_sep[20] = 'a';
  EXPECT_EQ(auth::AccessTokenId(no_sep), "");
}

TEST(AccessTokens, Scopes) {
  EXPECT_EQ(*auth::ParseScope("read"), auth::Scope::kRead);
  EXPECT_EQ(*auth::ParseScope("write"), auth::Scope::kWrite);
  EXPECT_EQ(*auth::ParseScope("admin"), auth::Scope::kAdmin);
  EXPECT_FALSE(auth::ParseScope("root").ok());
  EXPECT_STREQ(auth::ScopeName(auth::Scope::kWrite), "write");
}

}  // namespace
}  // namespace kvc
