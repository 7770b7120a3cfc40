// service::ConsoleHandler behind a Router registered as in cli/application.cc: the embedded files
// are the bytes of src/console/, with their content types; every answer (errors included)
// carries the security headers; HEAD, 304 on a matching ETag, 404 and 405. Also: the embedding
// script is binary-safe, and the console's files keep the rules the CSP relies on.
#include "service/admin/console.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "service/router.h"

namespace kvc::service {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string HeaderOf(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

class ConsoleTest : public ::testing::Test {
 protected:
  ConsoleTest() {
    router_.Add("console", Router::Match::kPrefix, ConsoleHandler::kPrefix, {}, &handler_);
  }

  HttpResponse Call(std::string method, std::string path, HeaderList headers = {}) {
    HttpRequest req;
    req.method = std::move(method);
    req.path = std::move(path);
    req.headers = std::move(headers);
    HttpResponse out;
    out.status = 0;
    router_.Handle(std::move(req), [&](HttpResponse r) { out = std::move(r); });
    return out;
  }

  static void ExpectSafetyHeaders(const HttpResponse& r) {
    EXPECT_EQ(HeaderOf(r, "content-security-policy"),
              "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    EXPECT_EQ(HeaderOf(r, "x-content-type-options"), "nosniff");
    EXPECT_EQ(HeaderOf(r, "referrer-policy"), "no-referrer");
    EXPECT_EQ(HeaderOf(r, "x-frame-options"), "DENY");
  }

  const fs::path dir_ = fs::path(KVC_SOURCE_DIR) / "src" / "console";
  ConsoleHandler handler_;
  Router router_;
};

TEST_F(ConsoleTest, EmbedsEveryFileByteForByte) {
  ASSERT_GE(kConsoleAssetCount, 4u);
  for (size_t i = 0; i < kConsoleAssetCount; ++i) {
    const ConsoleAsset& a = kConsoleAssets[i];
    const std::string on_disk = ReadFile(dir_ / a.name);
    ASSERT_FALSE(on_disk.empty()) << a.name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data), a.size), on_disk) << a.name;
    EXPECT_EQ(a.data[a.size], 0) << "the generator's trailing 0";
  }
}

TEST_F(ConsoleTest, ServesIndexAtTheRootAndFilesWithTheirTypes) {
  const std::string index = ReadFile(dir_ / "index.html");
  for (const char* path : {"/console", "/console/", "//console//", "/console/index.html"}) {
    HttpResponse r = Call("GET", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << path;
    EXPECT_EQ(r.body, index) << path;
    EXPECT_EQ(HeaderOf(r, "cache-control"), "no-cache");
    EXPECT_FALSE(HeaderOf(r, "etag").empty());
    ExpectSafetyHeaders(r);
  }
  HttpResponse js = Call("GET", "/console/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js.body, ReadFile(dir_ / "app.js"));
  ExpectSafetyHeaders(js);
  HttpResponse css = Call("GET", "/console/style.css");
  EXPECT_EQ(css.content_type, "text/css; charset=utf-8");
  EXPECT_NE(HeaderOf(css, "etag"), HeaderOf(js, "etag"));

  EXPECT_EQ(ConsoleHandler::ContentTypeOf("a.svg"), "image/svg+xml");
  EXPECT_EQ(ConsoleHandler::ContentTypeOf("a.png"), "image/png");
  EXPECT_EQ(ConsoleHandler::ContentTypeOf("js"), "application/octet-stream");
  EXPECT_EQ(ConsoleHandler::ContentTypeOf("README.md"), "application/octet-stream");
}

TEST_F(ConsoleTest, HeadHasTheHeadersWithoutTheBody) {
  HttpResponse get = Call("GET", "/console/style.css");
  HttpResponse head = Call("HEAD", "/console/style.css");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(head.content_type, get.content_type);
  EXPECT_EQ(HeaderOf(head, "etag"), HeaderOf(get, "etag"));
  ExpectSafetyHeaders(head);
}

TEST_F(ConsoleTest, MatchingETagIsNotModified) {
  const std::string etag = HeaderOf(Call("GET", "/console/app.js"), "etag");
  ASSERT_EQ(etag.size(), 18u);  // "<16 hex digits>"
  for (const std::string& value : {etag, "\"x\", " + etag, "W/" + etag, std::string("*")}) {
    HttpResponse r = Call("GET", "/console/app.js", {{"if-none-match", value}});
    EXPECT_EQ(r.status, 304) << value;
    EXPECT_TRUE(r.body.empty());
    EXPECT_EQ(HeaderOf(r, "etag"), etag);
    ExpectSafetyHeaders(r);
  }
  EXPECT_EQ(Call("GET", "/console/app.js", {{"if-none-match", "\"other\""}}).status, 200);
}

TEST_F(ConsoleTest, UnknownPathsAre404AndOtherMethods405WithTheHeaders) {
  for (const char* path : {"/console/nope.js", "/console/README.md", "/console/a/app.js",
                           "/console/../admin/v1/databases", "/consolex", "/console.js"}) {
    HttpResponse r = Call("GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8") << path;
    ExpectSafetyHeaders(r);
  }
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    HttpResponse r = Call(method, "/console");
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(HeaderOf(r, "allow"), "GET, HEAD");
    EXPECT_NE(r.body.find("use GET or HEAD"), std::string::npos) << r.body;
    ExpectSafetyHeaders(r);
  }
}

TEST_F(ConsoleTest, ServesTheAssetsItIsGiven) {
  static const unsigned char kBytes[] = {'a', 0, 'b', 0xff, 0};
  const ConsoleAsset assets[] = {{"index.html", kBytes, 4}, {"x.bin", kBytes, 0}};
  ConsoleHandler handler(assets, 2);
  HttpRequest req;
  req.method = "GET";
  req.path = "/console";
  HttpResponse out;
  handler.Handle(req, [&](HttpResponse r) { out = std::move(r); });
  EXPECT_EQ(out.body, std::string("a\0b\xff", 4));
  req.path = "/console/x.bin";
  handler.Handle(req, [&](HttpResponse r) { out = std::move(r); });
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.content_type, "application/octet-stream");
  EXPECT_TRUE(out.body.empty());
}

// Runs tests/testutil/embed_assets.cmake on a file holding every byte value, NULs and the
// delimiter of a raw string literal, and reads the generated array back.
TEST(ConsoleEmbedTest, TheGeneratorIsBinarySafe) {
  const fs::path tmp = fs::temp_directory_path() / ("kvc-embed-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  bytes += ")KVCEMBED\"\n\r\\0";
  { std::ofstream(tmp / "blob.bin", std::ios::binary) << bytes; }
  { std::ofstream(tmp / "empty.txt", std::ios::binary); }
  const fs::path out = tmp / "out.cc";
  const std::string cmd = std::string("\"") + KVC_CMAKE_COMMAND + "\" -DOUT=" + out.string() +
                          " -DFILES=" + (tmp / "blob.bin").string() + "," +
                          (tmp / "empty.txt").string() + " -P \"" KVC_SOURCE_DIR +
                          "/tests/testutil/embed_assets.cmake\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string text = ReadFile(out);
  fs::remove_all(tmp);

  // The first array, byte values in order.
  const size_t open = text.find("kAsset0[] = {");
  ASSERT_NE(open, std::string::npos) << text;
  const size_t close = text.find("};", open);
  std::string decoded;
  const std::string body = text.substr(open, close - open);
  const std::regex byte("0x([0-9a-f]{2})");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), byte); it != std::sregex_iterator();
       ++it) {
    decoded.push_back(static_cast<char>(std::stoi((*it)[1].str(), nullptr, 16)));
  }
  EXPECT_EQ(decoded, bytes + std::string(1, '\0'));
  EXPECT_NE(text.find("{\"blob.bin\", kAsset0, " + std::to_string(bytes.size()) + "}"),
            std::string::npos);
  EXPECT_NE(text.find("{\"empty.txt\", kAsset1, 0}"), std::string::npos);
  EXPECT_NE(text.find("kAsset1[] = {\n    0x00};"), std::string::npos) << text;
  EXPECT_NE(text.find("kConsoleAssetCount = 2;"), std::string::npos);
}

// The rules the Content-Security-Policy depends on (and the ones it cannot check): no inline
// script, style or handlers in the page; no HTML built from strings; no token in localStorage
// or cookies; no third-party origin.
TEST_F(ConsoleTest, FilesKeepTheConsoleRules) {
  for (size_t i = 0; i < kConsoleAssetCount; ++i) {
    const std::string name = kConsoleAssets[i].name;
    const std::string text(reinterpret_cast<const char*>(kConsoleAssets[i].data),
                           kConsoleAssets[i].size);
    EXPECT_EQ(text.find("http://"), std::string::npos) << name;
    EXPECT_EQ(text.find("https://"), std::string::npos) << name;
    EXPECT_EQ(text.find("//cdn"), std::string::npos) << name;
    if (name.size() > 5 && name.substr(name.size() - 5) == ".html") {
      EXPECT_FALSE(std::regex_search(text, std::regex("<script(?![^>]*\\bsrc=)[^>]*>")))
          << name << ": inline script";
      EXPECT_EQ(text.find("<style"), std::string::npos) << name;
      EXPECT_FALSE(std::regex_search(text, std::regex("\\sstyle\\s*=", std::regex::icase))) << name;
      EXPECT_FALSE(std::regex_search(text, std::regex("<[^>]*\\son[a-z]+\\s*=", std::regex::icase)))
          << name << ": event-handler attribute";
      EXPECT_EQ(text.find("javascript:"), std::string::npos) << name;
    }
    if (name.size() > 3 && name.substr(name.size() - 3) == ".js") {
      for (const char* banned : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                                 "eval(", "new Function", "localStorage", "document.cookie",
                                 "setAttribute(\"style\"", ".style."}) {
        EXPECT_EQ(text.find(banned), std::string::npos) << name << " uses " << banned;
      }
    }
  }
}

}  // namespace
}  // namespace kvc::service
