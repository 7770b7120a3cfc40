// Keeps the dependency direction of STYLE.md true: net -> service -> {auth, codec, engine} ->
// storage -> common, with engine allowed to use codec's pure value codecs. Nothing below net
// includes Asio/Beast/nghttp2; only codec/ and storage/ include protobuf, RapidJSON or sqlite3.
// The client stack (client/: HTTP/1.1 and HTTP/2 connections) and the load generator on it
// (loadgen/, used by `kvconnect bench`) sit beside net: they may use Asio/Beast/nghttp2, and
// loadgen reaches the wire formats only through codec/. queue/ (queue delivery) sits on engine
// like backup/; libcurl (outbound HTTP) is only for backup/ and queue/. components/ (subsystems
// the application attaches: backup shipping, queue push, node registration) sit between service
// and cli. libpq is only for the PostgreSQL storage (storage/postgres/), and OpenSSL only for the
// folders that use it: TLS
// (net/, client/), hashes and HMACs (auth/ tokens, backup/ checksums and S3 signatures, queue/
// push signatures, storage/ migration and cli/ import checksums).
//
// Every folder of src/ with C++ files must have a row in the layer table, so a new folder cannot
// slip past the fences; and a library's fence lists no folder that no longer includes it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

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

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Which layers each layer may include.
const std::map<std::string, std::set<std::string>>& Layers() {
  static const std::map<std::string, std::set<std::string>> layers = {
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
  return layers;
}

// A third-party library and the places under src/ (folder prefixes such as "net/" or
// "storage/postgres/") that may include it.
struct Fence {
  const char* library;
  bool (*header_of)(const std::string& header);
  std::vector<std::string> places;
  bool exact;  // every place must still include it (the fences added with the table are)
};

const std::vector<Fence>& Fences() {
  static const std::vector<Fence> fences = {
      {"Asio/Beast/nghttp2",
       [](const std::string& h) {
         return StartsWith(h, "boost/asio") || StartsWith(h, "boost/beast") ||
                StartsWith(h, "nghttp2");
       },
       {"net/", "client/", "loadgen/"},
       false},
      {"protobuf/RapidJSON/SQLite",
       [](const std::string& h) {
         return StartsWith(h, "google/protobuf") || h.find(".pb.h") != std::string::npos ||
                StartsWith(h, "rapidjson") || h == "sqlite3.h";
       },
       {"codec/", "storage/"},
       false},
      {"libcurl",  // outbound HTTP: backup targets, queue push delivery
       [](const std::string& h) { return StartsWith(h, "curl/"); },
       {"backup/", "queue/"},
       false},
      {"libpq",
       [](const std::string& h) {
         return h == "libpq-fe.h" || StartsWith(h, "libpq/") || h == "postgres_ext.h" ||
                StartsWith(h, "pg_config");
       },
       {"storage/postgres/"},
       true},
      {"OpenSSL",
       [](const std::string& h) { return StartsWith(h, "openssl/"); },
       {"auth/", "backup/", "cli/", "client/", "net/", "queue/", "storage/"},
       true},
  };
  return fences;
}

// What is wrong with the file at `rel` (a path under src/, '/'-separated) including `header`;
// empty if nothing. `used` collects the fence places the include falls in.
std::vector<std::string> Violations(const std::string& rel, const std::string& header,
                                    std::set<std::string>* used = nullptr) {
  std::vector<std::string> out;
  const std::string layer = rel.substr(0, rel.find('/'));
  const auto own = Layers().find(layer);
  if (own == Layers().end()) return {rel + ": folder " + layer + "/ has no row in the layer table"};
  for (const Fence& fence : Fences()) {
    if (!fence.header_of(header)) continue;
    bool allowed = false;
    for (const std::string& place : fence.places) {
      if (!StartsWith(rel, place)) continue;
      allowed = true;
      if (used) used->insert(std::string(fence.library) + " " + place);
    }
    if (!allowed) out.push_back(rel + " includes " + header + " (" + fence.library + ")");
  }
  const auto slash = header.find('/');
  if (slash == std::string::npos) return out;
  const std::string target = header.substr(0, slash);
  if (Layers().count(target) && !own->second.count(target)) {
    out.push_back(rel + " (" + layer + ") includes " + header);
  }
  return out;
}

bool IsCpp(const fs::path& p) {
  return p.extension() == ".h" || p.extension() == ".cc" || p.extension() == ".in";
}

TEST(Layering, IncludesFollowTheDependencyDirection) {
  const fs::path src = fs::path(KVC_SOURCE_DIR) / "src";
  int files = 0;
  std::set<std::string> used;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file() || !IsCpp(entry.path())) continue;
    const std::string rel = fs::relative(entry.path(), src).generic_string();
    if (rel.find('/') == std::string::npos) continue;  // main.cc, the composition root
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      const std::string header = IncludedHeader(line);
      if (header.empty()) continue;
      for (const std::string& v : Violations(rel, header, &used)) ADD_FAILURE() << v;
    }
  }
  EXPECT_GT(files, 20);
  for (const Fence& fence : Fences()) {
    if (!fence.exact) continue;
    for (const std::string& place : fence.places) {
      EXPECT_TRUE(used.count(std::string(fence.library) + " " + place))
          << "nothing in src/" << place << " includes " << fence.library
          << " any more: take it off the fence";
    }
  }
}

// The rules themselves: each fence refuses an include from outside it, and a folder without a
// row is refused whatever it includes.
TEST(Layering, FencesRefuseForbiddenIncludes) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"engine/engine.cc", "openssl/evp.h"},
      {"common/random.cc", "openssl/rand.h"},
      {"service/kvconnect/kv_service.cc", "openssl/sha.h"},
      {"storage/sqlite/sqlite_backend.cc", "libpq-fe.h"},
      {"storage/storage.cc", "libpq-fe.h"},
      {"cli/migrate.cc", "libpq-fe.h"},
      {"engine/engine.cc", "postgres_ext.h"},
      {"service/router.cc", "boost/asio.hpp"},
      {"engine/engine.cc", "sqlite3.h"},
      {"service/push.cc", "curl/curl.h"},
      {"storage/storage.cc", "engine/engine.h"},
      {"nodes/registry.cc", "common/status.h"},
  };
  for (const auto& [rel, header] : refused) {
    EXPECT_FALSE(Violations(rel, header).empty()) << rel << " may include " << header;
  }
  const std::vector<std::pair<std::string, std::string>> allowed = {
      {"storage/postgres/pg_conn.cc", "libpq-fe.h"},
      {"net/server.cc", "openssl/ssl.h"},
      {"auth/tokens.cc", "openssl/hmac.h"},
      {"storage/sqlite/sqlite_backend.cc", "sqlite3.h"},
      {"queue/push.cc", "curl/curl.h"},
      {"service/kvconnect/kv_service.cc", "engine/engine.h"},
      {"engine/engine.cc", "vector"},
  };
  for (const auto& [rel, header] : allowed) {
    EXPECT_TRUE(Violations(rel, header).empty()) << rel << " may not include " << header;
  }
}

}  // namespace
