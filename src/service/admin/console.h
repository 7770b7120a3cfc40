// ConsoleHandler: the web console (src/console/: hand-written HTML, CSS and ES modules, embedded
// into the binary at build time) served at /console. The console runs in the browser and talks
// only to the admin JSON API (/admin/v1) and /metrics; this handler serves files and nothing
// else, so it needs no authentication: the files hold no data and no secret.
//
// GET and HEAD only (405 with `Allow` otherwise). `/console` (and `/console/`, which the router
// normalizes to it) is index.html; `/console/<name>` is the embedded file of that name with the
// content type of its extension; anything else under the prefix is 404. Every answer, errors
// included, carries a strict Content-Security-Policy (scripts, styles and connections from this
// origin only, no inline script or style, no framing), `X-Content-Type-Options: nosniff` and
// `Referrer-Policy: no-referrer`. Files have a strong ETag and `Cache-Control: no-cache`, so a
// browser revalidates (304) and never runs a stale console against a newer server. A HEAD answer
// has the GET headers and no body.
//
// Thread-safety: immutable after construction; Handle() from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "service/http_types.h"

namespace kvc::service {

// One embedded file of src/console/ (generated console_assets.cc in the build tree).
struct ConsoleAsset {
  const char* name;           // file name, e.g. "app.js"
  const unsigned char* data;  // its bytes
  size_t size;
};
extern const ConsoleAsset kConsoleAssets[];
extern const size_t kConsoleAssetCount;

class ConsoleHandler : public Handler {
 public:
  // The path the router sends here (a prefix: the handler answers 404 for "/consolex").
  static constexpr const char* kPrefix = "/console";
  // The policy sent with every answer.
  static constexpr const char* kContentSecurityPolicy =
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
      "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

  // Serves `assets` (default: the embedded console). Borrows them; they must outlive it.
  explicit ConsoleHandler(const ConsoleAsset* assets = kConsoleAssets,
                          size_t count = kConsoleAssetCount);

  void Handle(HttpRequest request, Responder respond) override;

  // The content type of a file name, by its extension (application/octet-stream if unknown).
  static std::string ContentTypeOf(std::string_view name);

 private:
  struct File {
    std::string name;
    std::string_view bytes;
    std::string content_type;
    std::string etag;  // quoted
  };
  const File* Find(std::string_view name) const;

  std::vector<File> files_;
};

}  // namespace kvc::service
