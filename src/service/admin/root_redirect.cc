#include "service/admin/root_redirect.h"

#include <cctype>
#include <utility>

#include "common/ascii.h"

namespace kvc::service {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The q parameter of one media range's parameters ("; q=0.5; level=1"); 1 when absent.
bool QIsZero(std::string_view params) {
  while (!params.empty()) {
    const size_t semi = params.find(';');
    std::string_view p = Trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || std::tolower(static_cast<unsigned char>(p[0])) != 'q' || p[1] != '=') {
      continue;
    }
    // q = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ): zero when no digit is nonzero.
    for (char c : p.substr(2)) {
      if (c >= '1' && c <= '9') return false;
    }
    return true;
  }
  return false;
}

}  // namespace

bool RootHandler::AcceptsHtml(std::string_view accept) {
  while (!accept.empty()) {
    const size_t comma = accept.find(',');
    const std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const size_t semi = range.find(';');
    const std::string_view type = Trim(range.substr(0, semi));
    if (!EqualsIgnoringAsciiCase(type, "text/html")) continue;
    if (semi == std::string_view::npos || !QIsZero(range.substr(semi + 1))) return true;
  }
  return false;
}

void RootHandler::Handle(HttpRequest request, Responder respond) {
  if (!console_path_.empty() && (request.method == "GET" || request.method == "HEAD") &&
      AcceptsHtml(request.Header("accept"))) {
    HttpResponse r;
    r.status = 302;
    r.content_type = "text/plain; charset=utf-8";
    r.headers.emplace_back("location", console_path_);
    if (request.method == "GET") r.body = "The web console is at " + console_path_ + "\n";
    respond(std::move(r));
    return;
  }
  inner_->Handle(std::move(request), std::move(respond));
}

}  // namespace kvc::service
