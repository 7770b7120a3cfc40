// The client stack's URL handling: parsing, endpoint resolution as KV Connect clients do it,
// and header-name case folding.
#include "client/url.h"

#include <gtest/gtest.h>

namespace kvc::client {
namespace {

TEST(Url, Parses) {
  auto u = ParseUrl("http://127.0.0.1:4512");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 4512);
  EXPECT_EQ(u->path, "/");
  EXPECT_EQ(u->ToString(), "http://127.0.0.1:4512/");

  auto s = ParseUrl("HTTPS://kv.example/db/abc?x=1#f");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->tls());
  EXPECT_EQ(s->port, 443);
  EXPECT_EQ(s->path, "/db/abc");
  EXPECT_EQ(s->Authority(), "kv.example:443");

  auto v6 = ParseUrl("http://[::1]:8080/x");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->Authority(), "[::1]:8080");

  EXPECT_FALSE(ParseUrl("127.0.0.1:4512").ok());
  EXPECT_FALSE(ParseUrl("ftp://h/").ok());
  EXPECT_FALSE(ParseUrl("http://:80/").ok());
  EXPECT_FALSE(ParseUrl("http://h:0/").ok());
  EXPECT_FALSE(ParseUrl("http://h:65536/").ok());
  EXPECT_FALSE(ParseUrl("http://h:12x/").ok());
  EXPECT_FALSE(ParseUrl("http://user@h/").ok());
}

TEST(Url, ResolvesEndpointsLikeDeno) {
  // Reference §1.5 examples, base https://h/db/abc.
  const Url base = *ParseUrl("https://h/db/abc");
  EXPECT_EQ(ResolveUrl(base, "/v2")->ToString(), "https://h:443/v2");
  EXPECT_EQ(ResolveUrl(base, "./v2")->ToString(), "https://h:443/db/v2");
  EXPECT_EQ(ResolveUrl(base, "v2")->ToString(), "https://h:443/db/v2");
  EXPECT_EQ(ResolveUrl(base, "../v2")->ToString(), "https://h:443/v2");
  EXPECT_EQ(ResolveUrl(base, "http://other:81/v2")->ToString(), "http://other:81/v2");
  EXPECT_EQ(ResolveUrl(base, "//other/v2")->ToString(), "https://other:443/v2");
  const Url root = *ParseUrl("http://127.0.0.1:4512");
  EXPECT_EQ(ResolveUrl(root, "/v2")->path, "/v2");
  EXPECT_EQ(ResolveUrl(root, "v2")->path, "/v2");
}

TEST(Url, AsciiLower) {
  EXPECT_EQ(AsciiLower("Content-Type"), "content-type");
  EXPECT_EQ(AsciiLower("X-DENOKV-1"), "x-denokv-1");
  EXPECT_EQ(AsciiLower("\xc3\x84"), "\xc3\x84");  // only ASCII letters change
}

}  // namespace
}  // namespace kvc::client
