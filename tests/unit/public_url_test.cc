// --public-url (service::NormalizePublicUrl, service/kvconnect/kv_service.h): normalized or
// refused, and the config file's schema refuses what the flag refuses.
#include <gtest/gtest.h>

#include <utility>

#include "codec/config_json.h"
#include "service/kvconnect/kv_service.h"

namespace kvc {
namespace {

TEST(PublicUrl, NormalizedOrRefused) {
  const std::pair<const char*, const char*> good[] = {
      {"https://kv.example.com", "https://kv.example.com"},
      {"https://kv.example.com/", "https://kv.example.com"},
      {"HTTP://kv.example.com:8080//", "http://kv.example.com:8080"},
      {"https://kv.example.com/base/", "https://kv.example.com/base"},
      {"http://[::1]:4512", "http://[::1]:4512"},
      {"http://127.0.0.1:4512", "http://127.0.0.1:4512"},
  };
  for (const auto& [in, out] : good) {
    auto r = service::NormalizePublicUrl(in);
    ASSERT_TRUE(r.ok()) << in << ": " << r.status().ToString();
    EXPECT_EQ(*r, out);
  }
  for (const char* bad :
       {"", "kv.example.com", "ftp://kv.example.com", "https://", "https:///v2",
        "https://kv.example.com/?x=1", "https://kv.example.com#f", "https://user@kv.example.com",
        "https://kv example.com", "https://kv.example.com/a b", "wss://kv.example.com"}) {
    auto r = service::NormalizePublicUrl(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The config file's schema refuses what the flag refuses (the flag check runs as well).
  EXPECT_TRUE(codec::ParseConfigFile(R"({"public_url":"https://kv.example.com/"})").ok());
  EXPECT_TRUE(codec::ParseConfigFile(R"({"public_url":"http://h:1/base"})").ok());
  for (const char* bad : {R"({"public_url":"ftp://h"})", R"({"public_url":"https://h/?q"})",
                          R"({"public_url":"h"})", R"({"public_url":1})"}) {
    EXPECT_FALSE(codec::ParseConfigFile(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kvc
