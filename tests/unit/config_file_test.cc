// The serve config file (codec/config_json.h, cli/serve.h): keys, types and unknown keys, the
// schema against the serve flags, flags over the file, and the portable-V8-values switch.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/serve.h"
#include "codec/config_json.h"
#include "testutil/temp_dir.h"

namespace kvc {
namespace {
namespace fs = std::filesystem;

using testutil::TempDir;

TEST(ConfigFile, KeysTypesAndUnknownKeys) {
  auto ok = codec::ParseConfigFile(
      R"({"addr":"0.0.0.0:4512","max_body_bytes":2048,"rate_limit_rps":2.5,"sync":"normal"})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 4u);
  EXPECT_EQ((*ok)[0], (std::pair<std::string, std::string>{"addr", "0.0.0.0:4512"}));
  EXPECT_EQ((*ok)[1].second, "2048");
  EXPECT_EQ((*ok)[2].second, "2.5");

  auto unknown = codec::ParseConfigFile(R"({"addr":"x:1","max_bodyy_bytes":1})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown key 'max_bodyy_bytes'"), std::string::npos);

  auto wrong_type = codec::ParseConfigFile(R"({"max_body_bytes":"big"})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("'max_body_bytes'"), std::string::npos)
      << wrong_type.status().message();

  auto too_small = codec::ParseConfigFile(R"({"max_body_bytes":1})");
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("at least 1024"), std::string::npos)
      << too_small.status().message();

  EXPECT_FALSE(codec::ParseConfigFile(R"({"sync":"sometimes"})").ok());
  EXPECT_FALSE(codec::ParseConfigFile("[1]").ok());
  auto broken = codec::ParseConfigFile("{\"addr\": ");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("malformed JSON"), std::string::npos);
}

// Every serve flag has a schema key and every schema key a flag, so the config file and the
// command line cannot drift apart.
TEST(ConfigFile, SchemaMatchesServeFlags) {
  CLI::App app;
  cli::ServeConfig config;
  CLI::App* serve = cli::AddServeCommand(app, &config);
  std::set<std::string> flags;
  for (const CLI::Option* o : serve->get_options()) {
    for (std::string name : o->get_lnames()) {
      if (name == "help" || name == "config") continue;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      flags.insert(name);
    }
  }
  const auto keys = codec::ConfigKeys();
  const std::set<std::string> schema(keys.begin(), keys.end());
  EXPECT_EQ(flags, schema);
}

TEST(ConfigFile, FlagsOverrideTheFile) {
  TempDir dir;
  const fs::path file = dir.path() / "config.json";
  std::ofstream(file) << R"({"addr":"0.0.0.0:9999","max_body_bytes":4096,"idle_timeout_ms":1234})";
  CLI::App app;
  cli::ServeConfig config;
  CLI::App* serve = cli::AddServeCommand(app, &config);
  std::vector<std::string> args = {"kvconnect",   "serve",  "--config",
                                   file.string(), "--addr", "127.0.0.1:1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cli::ApplyServeConfigFile(serve, config).ok());
  EXPECT_EQ(config.addr, "127.0.0.1:1");                          // flag wins
  EXPECT_EQ(config.net.max_body_bytes, 4096u);                    // from the file
  EXPECT_EQ(config.net.idle_timeout.count(), 1234);               // via an option callback
  std::ofstream(file) << R"({"addr":"0.0.0.0:9999","bogus":1})";  // truncates and rewrites
  cli::ServeConfig c2;
  CLI::App app2;
  CLI::App* s2 = cli::AddServeCommand(app2, &c2);
  app2.parse(static_cast<int>(argv.size()), argv.data());
  Status s = cli::ApplyServeConfigFile(s2, c2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'bogus'"), std::string::npos) << s.message();
}

// `kvconnect serve ARGS` (with `--config FILE` holding `file_json` when it is not empty), parsed
// and the file applied as serve does. Errors: InvalidArgument for a flag CLI11 refuses, or the
// file's error.
Result<cli::ServeConfig> ParseServe(std::vector<std::string> args, const std::string& file_json) {
  TempDir dir;
  const fs::path file = dir.path() / "config.json";
  if (!file_json.empty()) {
    std::ofstream(file) << file_json;
    args.insert(args.end(), {"--config", file.string()});
  }
  CLI::App app;
  cli::ServeConfig config;
  CLI::App* serve = cli::AddServeCommand(app, &config);
  args.insert(args.begin(), {"kvconnect", "serve"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  KVC_RETURN_IF_ERROR(cli::ApplyServeConfigFile(serve, config));
  return config;
}

// Data-path tokens are packed unless the operator asks for the text layout (a rolling upgrade),
// by flag or in the file; other names are refused.
TEST(ConfigFile, DataPathTokenFormat) {
  auto format = [](std::vector<std::string> args, const std::string& file_json) {
    Result<cli::ServeConfig> config = ParseServe(std::move(args), file_json);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? config->service.auth.data_path_token_format : auth::TokenFormat{};
  };
  EXPECT_EQ(format({}, ""), auth::TokenFormat::kPacked);
  EXPECT_EQ(format({"--data-path-token-format", "text"}, ""), auth::TokenFormat::kText);
  EXPECT_EQ(format({"--data-path-token-format", "packed"}, ""), auth::TokenFormat::kPacked);
  EXPECT_EQ(format({}, R"({"data_path_token_format": "text"})"), auth::TokenFormat::kText);
  EXPECT_FALSE(ParseServe({"--data-path-token-format", "short"}, "").ok());
  EXPECT_FALSE(codec::ParseConfigFile(R"({"data_path_token_format": "2"})").ok());
}

// --portable-v8-values is on by default; `=false` or the config file's false turn it off.
TEST(ConfigFile, PortableV8ValuesSwitch) {
  auto parse = [](std::vector<std::string> args, const std::string& file_json) {
    Result<cli::ServeConfig> config = ParseServe(std::move(args), file_json);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() && config->service.portable_v8_values;
  };
  EXPECT_TRUE(parse({}, ""));
  EXPECT_FALSE(parse({"--portable-v8-values=false"}, ""));
  EXPECT_TRUE(parse({"--portable-v8-values"}, ""));
  EXPECT_FALSE(parse({}, R"({"portable_v8_values": false})"));
  EXPECT_TRUE(parse({}, R"({"portable_v8_values": true})"));
  EXPECT_TRUE(parse({"--portable-v8-values=true"}, R"({"portable_v8_values": false})"));
  EXPECT_FALSE(codec::ParseConfigFile(R"({"portable_v8_values": "no"})").ok());
}

// --read-cache-total (or the file's read_cache_total: a string, or an integer of bytes) reaches
// the config as text for engine::ParseCacheBudget; the default is 25%, and --read-cache-bytes
// defaults to no cap of its own. The schema refuses what is neither bytes nor a percentage.
TEST(ConfigFile, ReadCacheTotal) {
  auto total = [](std::vector<std::string> args, const std::string& file_json) {
    Result<cli::ServeConfig> config = ParseServe(std::move(args), file_json);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? config->read_cache_total : std::string("(error)");
  };
  EXPECT_EQ(total({}, ""), "25%");
  EXPECT_EQ(ParseServe({}, "")->engine.read_cache_bytes, cli::kNoOwnReadCacheCap);
  EXPECT_EQ(total({"--read-cache-total", "10%"}, ""), "10%");
  EXPECT_EQ(total({}, R"({"read_cache_total": "12.5%"})"), "12.5%");
  EXPECT_EQ(total({}, R"({"read_cache_total": 4294967296})"), "4294967296");
  EXPECT_EQ(total({}, R"({"read_cache_total": "0"})"), "0");
  EXPECT_EQ(total({"--read-cache-total", "1%"}, R"({"read_cache_total": "50%"})"), "1%");
  for (const char* bad : {R"({"read_cache_total": -1})", R"({"read_cache_total": 1.5})",
                          R"({"read_cache_total": "1e9"})", R"({"read_cache_total": "lots"})",
                          R"({"read_cache_total": true})"}) {
    const Result<cli::ServeConfig> r = ParseServe({}, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected string or integer"), std::string::npos)
        << r.status().message();
  }
}

// --max-commit-retries (or the file's max_commit_retries) sets the engines' retry bound; the
// default stays the engine's, and values outside 0..1000 are refused by the flag and the schema.
TEST(ConfigFile, MaxCommitRetries) {
  auto parse = [](std::vector<std::string> args, const std::string& file_json) -> Result<size_t> {
    KVC_ASSIGN_OR_RETURN(cli::ServeConfig config, ParseServe(std::move(args), file_json));
    return config.engine.max_commit_retries;
  };
  auto value = [&](std::vector<std::string> args, const std::string& file_json) -> size_t {
    Result<size_t> r = parse(std::move(args), file_json);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : 12345;
  };
  EXPECT_EQ(value({}, ""), engine::EngineOptions{}.max_commit_retries);
  EXPECT_EQ(value({"--max-commit-retries", "3"}, ""), 3u);
  EXPECT_EQ(value({"--max-commit-retries", "0"}, ""), 0u);
  EXPECT_EQ(value({}, R"({"max_commit_retries": 20})"), 20u);
  EXPECT_EQ(value({"--max-commit-retries", "5"}, R"({"max_commit_retries": 20})"), 5u);
  EXPECT_FALSE(parse({"--max-commit-retries", "1001"}, "").ok());
  EXPECT_FALSE(parse({"--max-commit-retries", "-1"}, "").ok());
  EXPECT_FALSE(codec::ParseConfigFile(R"({"max_commit_retries": 1001})").ok());
  EXPECT_FALSE(codec::ParseConfigFile(R"({"max_commit_retries": -1})").ok());
}

}  // namespace
}  // namespace kvc
