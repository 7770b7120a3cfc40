// Keeps the dependency direction of STYLE.md true: net -> service -> {auth, codec, engine} ->
// storage -> common, with engine allowed to use codec's pure value codecs. Nothing below net
// includes Asio/Beast/nghttp2; only codec/ and storage/ include protobuf, RapidJSON or sqlite3.
// The client stack (client/: HTTP/1.1 and HTTP/2 connections) and the load generator on it
// (loadgen/, used by `kvconnect bench`) sit beside net: they may use Asio/Beast/nghttp2, and
// loadgen reaches the wire formats only through codec/. queue/ (queue delivery) sits on engine
// like backup/; libcurl (outbound HTTP) is only for backup/ and queue/. components/ (subsystems
// the application attaches: backup shipping, queue push, node registration) sit between service
// and cli.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {
namespace fs = std::filesystem;

// The path inside #include <...> or "...", or empty if the line is not an include.
std::string IncludedHeader(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line.compare(i, 8, "#include") != 0) return "";
  i = line.find_first_of("<\"", i + 8);
  if (i == std::string::npos) return "";
  const size_t end = line.find_first_of(">\"", i + 1);
  if (end == std::string::npos) return "";
  return line.substr(i + 1, end - i - 1);
}

TEST(Layering, IncludesFollowTheDependencyDirection) {
  const std::map<std::string, std::set<std::string>> allowed = {
      {"common", {"common"}},
      {"storage", {"storage", "common"}},
      {"codec", {"codec", "storage", "common"}},
      {"engine", {"engine", "codec", "storage", "common"}},
      {"auth", {"auth", "common"}},
      {"backup", {"backup", "engine", "codec", "storage", "common"}},
      {"queue", {"queue", "engine", "codec", "storage", "common"}},
      {"service", {"service", "backup", "queue", "auth", "codec", "engine", "storage", "common"}},
      {"net", {"net", "service", "common"}},
      {"client", {"client", "common"}},
      {"loadgen", {"loadgen", "client", "codec", "storage", "common"}},
      {"components",
       {"components", "service", "backup", "queue", "auth", "codec", "engine", "storage",
        "common"}},
      {"cli",
       {"cli", "components", "net", "loadgen", "client", "service", "backup", "queue", "auth",
        "codec", "engine", "storage", "common"}},
  };
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(KVC_SOURCE_DIR) / "src")) {
    if (!entry.is_regular_file()) continue;
    const auto rel = fs::relative(entry.path(), fs::path(KVC_SOURCE_DIR) / "src");
    const std::string layer = rel.begin()->string();
    if (!allowed.count(layer)) continue;  // main.cc
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      const std::string header = IncludedHeader(line);
      if (header.empty()) continue;
      const bool network = header.rfind("boost/asio", 0) == 0 ||
                           header.rfind("boost/beast", 0) == 0 || header.rfind("nghttp2", 0) == 0;
      if (network) {
        EXPECT_TRUE(layer == "net" || layer == "client" || layer == "loadgen")
            << rel << " includes " << header;
      }
      const bool data_libs = header.rfind("google/protobuf", 0) == 0 ||
                             header.find(".pb.h") != std::string::npos ||
                             header.rfind("rapidjson", 0) == 0 || header == "sqlite3.h";
      if (data_libs) {
        EXPECT_TRUE(layer == "codec" || layer == "storage") << rel << " includes " << header;
      }
      if (header.rfind("curl/", 0) == 0) {  // outbound HTTP: backup targets, queue push delivery
        EXPECT_TRUE(layer == "backup" || layer == "queue") << rel << " includes " << header;
      }
      const auto slash = header.find('/');
      if (slash == std::string::npos) continue;
      const std::string target = header.substr(0, slash);
      if (!allowed.count(target)) continue;  // system or third-party header
      EXPECT_TRUE(allowed.at(layer).count(target))
          << rel << " (" << layer << ") includes " << header;
    }
  }
  EXPECT_GT(files, 20);
}

}  // namespace
