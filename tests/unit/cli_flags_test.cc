// The CLI's shared vocabulary (cli/flags.h): where a token comes from and in which order, a data
// directory that must exist (and is never made by looking), and the words of human output.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/flags.h"

namespace kvc::cli {
namespace {

namespace fs = std::filesystem;

// Sets or clears the two token variables for one test and puts them back after it.
class TokenEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"KVCONNECT_ACCESS_TOKEN", "DENO_KV_ACCESS_TOKEN"}) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v == nullptr ? std::optional<std::string>() : std::string(v));
      unsetenv(n);
    }
    dir_ = fs::temp_directory_path() / ("kvc-flags-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "access-token") << "from-the-file-token\n";
  }
  void TearDown() override {
    for (const auto& [n, v] : saved_) {
      if (v) {
        setenv(n.c_str(), v->c_str(), 1);
      } else {
        unsetenv(n.c_str());
      }
    }
    fs::remove_all(dir_);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
  fs::path dir_;
};

TEST_F(TokenEnv, FlagThenKvconnectThenDenoThenTheLocalFile) {
  const std::string local = "http://127.0.0.1:4512";
  std::string from;
  auto t = ResolveToken("", local, dir_.string(), &from);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, "from-the-file-token");  // newline dropped
  EXPECT_EQ(from, (dir_ / "access-token").string());

  setenv("DENO_KV_ACCESS_TOKEN", "deno-token", 1);
  EXPECT_EQ(*ResolveToken("", local, dir_.string(), &from), "deno-token");
  EXPECT_EQ(from, "DENO_KV_ACCESS_TOKEN");
  setenv("KVCONNECT_ACCESS_TOKEN", "kvc-token", 1);
  EXPECT_EQ(*ResolveToken("", local, dir_.string(), &from), "kvc-token");
  EXPECT_EQ(from, "KVCONNECT_ACCESS_TOKEN");
  EXPECT_EQ(*ResolveToken("flag-token", local, dir_.string(), &from), "flag-token");
  EXPECT_EQ(from, "--token");
}

TEST_F(TokenEnv, TheFileOnlyForAServerOnThisMachine) {
  EXPECT_TRUE(ResolveToken("", "http://localhost:4512", dir_.string()).ok());
  EXPECT_TRUE(ResolveToken("", "https://[::1]:4512/", dir_.string()).ok());
  auto remote = ResolveToken("", "https://kv.example.com", dir_.string());
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(remote.status().message().find("KVCONNECT_ACCESS_TOKEN"), std::string::npos);
  auto none = ResolveToken("", "http://127.0.0.1:4512", (dir_ / "nope").string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find((dir_ / "nope" / "access-token").string()),
            std::string::npos)
      << none.status().message();
}

TEST(RequireDataDir, RefusesAMissingOneByItsAbsolutePathAndMakesNothing) {
  const fs::path missing =
      fs::temp_directory_path() / ("kvc-no-such-dir-" + std::to_string(::getpid()));
  auto dir = RequireDataDir(missing.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kNotFound);
  EXPECT_NE(dir.status().message().find(missing.string()), std::string::npos);
  EXPECT_NE(dir.status().message().find("kvconnect db create"), std::string::npos);
  EXPECT_FALSE(fs::exists(missing));
  auto here = RequireDataDir(".");
  ASSERT_TRUE(here.ok());
  EXPECT_TRUE(fs::path(*here).is_absolute());
}

TEST(HumanWords, PluralsAndThousands) {
  EXPECT_EQ(Count(1, "atomic write", "atomic writes"), "1 atomic write");
  EXPECT_EQ(Count(2, "atomic write", "atomic writes"), "2 atomic writes");
  EXPECT_EQ(Count(0, "entry", "entries"), "0 entries");
  EXPECT_EQ(Count(10000, "key", "keys"), "10,000 keys");
  EXPECT_EQ(Thousands(1234567), "1,234,567");
  EXPECT_EQ(Thousands(-1000), "-1,000");
  EXPECT_EQ(Thousands(999), "999");
}

TEST(HumanWords, Times) {
  const int64_t now = 1'700'000'000'000;
  EXPECT_EQ(RelativeTime(now, now), "just now");
  EXPECT_EQ(RelativeTime(now - 42'000, now), "42 s ago");
  EXPECT_EQ(RelativeTime(now - 3 * 60'000, now), "3 min ago");
  EXPECT_EQ(RelativeTime(now - 5 * 3'600'000, now), "5 h ago");
  EXPECT_EQ(RelativeTime(now - 86'400'000, now), "1 day ago");
  EXPECT_EQ(RelativeTime(now - 2 * 86'400'000, now), "2 days ago");
  EXPECT_EQ(RelativeTime(now + 3 * 60'000, now), "in 3 min");
  EXPECT_EQ(HumanTime(now - 60'000, now), "2023-11-14 22:12:20 UTC (1 min ago)");
  EXPECT_EQ(HumanTime(0, now), "never");
}

}  // namespace
}  // namespace kvc::cli
