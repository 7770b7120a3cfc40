// cli/secrets and the serve flags that feed it: a secret comes from a file (or the environment)
// instead of the command line; a file others can read is refused, one the group can read is
// accepted; the trailing newline is dropped; push secrets take one line each.
#include "cli/secrets.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/serve.h"

namespace kvc::cli {
namespace {
namespace fs = std::filesystem;

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kvc-secrets-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ::unsetenv(kPushSecretEnv);
  }
  void TearDown() override {
    ::unsetenv(kPushSecretEnv);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Writes `text` to a file of mode `mode` in the test's directory and returns its path.
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p.string();
  }

  fs::path dir_;
};

TEST_F(SecretsTest, ReadsTheFileWithoutItsTrailingNewline) {
  auto v = ReadSecretFile(Write("token", "kvc_0123456789abcdef\n", 0600), "--access-token-file");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "kvc_0123456789abcdef");
  // Group-readable (Kubernetes fsGroup, a group the operator chose): accepted, with a warning.
  v = ReadSecretFile(Write("group", "kvc_0123456789abcdef\r\n", 0640), "--access-token-file");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "kvc_0123456789abcdef");
}

TEST_F(SecretsTest, RefusesFilesOthersCanReadAndOddFiles) {
  const std::string open_file = Write("open", "kvc_0123456789abcdef\n", 0644);
  auto v = ReadSecretFile(open_file, "--access-token-file");
  ASSERT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("mode 0644"), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find("chmod 600 " + open_file), std::string::npos);
  EXPECT_NE(v.status().message().find("--access-token-file"), std::string::npos);

  EXPECT_EQ(ReadSecretFile((dir_ / "missing").string(), "--x").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ReadSecretFile(Write("empty", "\n\n", 0600), "--x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSecretFile(dir_.string(), "--x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SecretsTest, FlagsParseAndFillTheConfig) {
  const std::string token = Write("token", "kvc_0123456789abcdef\n", 0600);
  const std::string push = Write("push", "whsec_bmV3\nwhsec_b2xk\n", 0600);
  CLI::App app;
  ServeConfig c;
  CLI::App* serve = AddServeCommand(app, &c);
  (void)serve;
  std::vector<std::string> args = {"kvconnect",
                                   "serve",
                                   "--access-token-file",
                                   token,
                                   "--queue-push",
                                   "orders=https://example.com/hook",
                                   "--queue-push-secret-file",
                                   "orders=" + push};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_NO_THROW(app.parse(static_cast<int>(argv.size()), argv.data()));
  EXPECT_EQ(c.access_token_file, token);
  EXPECT_TRUE(c.access_token.empty());
  ASSERT_TRUE(LoadServeSecrets(c).ok());
  EXPECT_EQ(c.access_token, "kvc_0123456789abcdef");
  EXPECT_EQ(c.queue_push_secrets,
            (std::vector<std::string>{"orders=whsec_bmV3", "orders=whsec_b2xk"}));
}

TEST_F(SecretsTest, ConfigFileKeysNameTheFiles) {
  const std::string token = Write("token", "kvc_0123456789abcdef\n", 0600);
  const std::string push = Write("push", "whsec_bmV3\n", 0600);
  const std::string config = Write("config.json",
                                   "{\"access_token_file\": \"" + token +
                                       "\", \"queue_push_secret_file\": \"orders=" + push + "\"}",
                                   0600);
  CLI::App app;
  ServeConfig c;
  CLI::App* serve = AddServeCommand(app, &c);
  std::vector<std::string> args = {"kvconnect", "serve", "--config", config};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_NO_THROW(app.parse(static_cast<int>(argv.size()), argv.data()));
  Status applied = ApplyServeConfigFile(serve, c);
  ASSERT_TRUE(applied.ok()) << applied.ToString();
  ASSERT_TRUE(LoadServeSecrets(c).ok());
  EXPECT_EQ(c.access_token, "kvc_0123456789abcdef");
  EXPECT_EQ(c.queue_push_secrets, (std::vector<std::string>{"orders=whsec_bmV3"}));
}

TEST_F(SecretsTest, TokenFlagAndFileExcludeEachOtherAndTheFileHoldsOneLine) {
  ServeConfig c;
  c.access_token = "kvc_0123456789abcdef";
  c.access_token_file = Write("token", "kvc_0123456789abcdef\n", 0600);
  EXPECT_EQ(LoadServeSecrets(c).code(), StatusCode::kInvalidArgument);

  ServeConfig two;
  two.access_token_file = Write("two", "kvc_0123456789abcdef\nkvc_fedcba9876543210\n", 0600);
  EXPECT_EQ(LoadServeSecrets(two).code(), StatusCode::kInvalidArgument);

  ServeConfig bad;
  bad.queue_push_secret_files = {"no-equals-sign"};
  EXPECT_EQ(LoadServeSecrets(bad).code(), StatusCode::kInvalidArgument);
}

TEST_F(SecretsTest, PushSecretsFromTheEnvironmentUnlessGivenOtherwise) {
  ::setenv(kPushSecretEnv, "orders=whsec_bmV3, audit=whsec_b2xk", 1);
  ServeConfig c;
  ASSERT_TRUE(LoadServeSecrets(c).ok());
  EXPECT_EQ(c.queue_push_secrets,
            (std::vector<std::string>{"orders=whsec_bmV3", "audit=whsec_b2xk"}));

  ServeConfig flagged;
  flagged.queue_push_secrets = {"orders=whsec_ZmxhZw"};
  ASSERT_TRUE(LoadServeSecrets(flagged).ok());
  EXPECT_EQ(flagged.queue_push_secrets, (std::vector<std::string>{"orders=whsec_ZmxhZw"}));
}

}  // namespace
}  // namespace kvc::cli
