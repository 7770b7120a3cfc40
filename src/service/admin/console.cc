#include "service/admin/console.h"

#include <cstdint>
#include <cstdio>
#include <utility>

#include "service/http_status.h"

namespace kvc::service {
namespace {

// FNV-1a, 64 bits: a stable fingerprint of a file for its ETag (not a security property).
std::string Fingerprint(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

void AddSafetyHeaders(HttpResponse* r) {
  r->headers.emplace_back("content-security-policy", ConsoleHandler::kContentSecurityPolicy);
  r->headers.emplace_back("x-content-type-options", "nosniff");
  r->headers.emplace_back("referrer-policy", "no-referrer");
  r->headers.emplace_back("x-frame-options", "DENY");
}

// Whether an If-None-Match header value names `etag` (a list, or "*").
bool Matches(std::string_view if_none_match, std::string_view etag) {
  size_t i = 0;
  while (i < if_none_match.size()) {
    const size_t comma = if_none_match.find(',', i);
    std::string_view item = if_none_match.substr(
        i, comma == std::string_view::npos ? std::string_view::npos : comma - i);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.substr(0, 2) == "W/") item.remove_prefix(2);  // weak comparison, as for GET
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) break;
    i = comma + 1;
  }
  return false;
}

}  // namespace

ConsoleHandler::ConsoleHandler(const ConsoleAsset* assets, size_t count) {
  files_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string_view bytes(reinterpret_cast<const char*>(assets[i].data), assets[i].size);
    files_.push_back(
        File{assets[i].name, bytes, ContentTypeOf(assets[i].name), Fingerprint(bytes)});
  }
}

std::string ConsoleHandler::ContentTypeOf(std::string_view name) {
  struct Type {
    std::string_view extension;
    const char* content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const Type& t : kTypes) {
    if (name.size() > t.extension.size() &&
        name.substr(name.size() - t.extension.size()) == t.extension) {
      return t.content_type;
    }
  }
  return "application/octet-stream";
}

const ConsoleHandler::File* ConsoleHandler::Find(std::string_view name) const {
  for (const File& f : files_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

void ConsoleHandler::Handle(HttpRequest request, Responder respond) {
  const std::string_view prefix(kPrefix);
  const std::string_view path(request.path);
  // The router normalized the path: no repeated or trailing slash. Names are flat (no '/'), so
  // nothing can reach outside the embedded set.
  const File* file = nullptr;
  if (path == prefix) {
    file = Find("index.html");
  } else if (path.size() > prefix.size() + 1 && path.substr(0, prefix.size()) == prefix &&
             path[prefix.size()] == '/') {
    const std::string_view name = path.substr(prefix.size() + 1);
    if (name.find('/') == std::string_view::npos) file = Find(name);
  }
  if (file == nullptr) {
    HttpResponse r = ErrorResponse(NotFound("No console file at " + request.path + "."));
    AddSafetyHeaders(&r);
    respond(std::move(r));
    return;
  }
  const bool head = request.method == "HEAD";
  if (!head && request.method != "GET") {
    HttpResponse r = ErrorResponse(
        Status(StatusCode::kMethodNotAllowed,
               "Method " + request.method + " is not allowed for the console; use GET or HEAD."));
    r.headers.emplace_back("allow", "GET, HEAD");
    AddSafetyHeaders(&r);
    respond(std::move(r));
    return;
  }
  HttpResponse r;
  r.content_type = file->content_type;
  r.headers.emplace_back("etag", file->etag);
  r.headers.emplace_back("cache-control", "no-cache");
  AddSafetyHeaders(&r);
  if (Matches(request.Header("if-none-match"), file->etag)) {
    r.status = 304;
  } else {
    r.status = 200;
    if (!head) r.body.assign(file->bytes);
  }
  respond(std::move(r));
}

}  // namespace kvc::service
