#include "service/http_status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

namespace kvc::service {

namespace {
// The one status->HTTP table. Throttled is 503, not 429, so that clients retry: they all treat
// 4xx as final.
constexpr std::pair<StatusCode, int> kHttpStatus[] = {
    {StatusCode::kOk, 200},
    {StatusCode::kInvalidArgument, 400},
    {StatusCode::kUnauthenticated, 401},
    {StatusCode::kPermissionDenied, 403},
    {StatusCode::kNotFound, 404},
    {StatusCode::kMethodNotAllowed, 405},
    {StatusCode::kPayloadTooLarge, 413},
    {StatusCode::kHeadersTooLarge, 431},
    {StatusCode::kUnsupportedMedia, 415},
    {StatusCode::kResourceExhausted, 429},
    {StatusCode::kUnavailable, 503},
    {StatusCode::kThrottled, 503},
    {StatusCode::kInternal, 500},
    {StatusCode::kAlreadyExists, 409},
    {StatusCode::kConflict, 409},
    {StatusCode::kCorruption, 500},
    {StatusCode::kIoError, 500},
};
}  // namespace

int HttpStatusFor(StatusCode code) {
  for (const auto& [status, http] : kHttpStatus) {
    if (status == code) return http;
  }
  return 500;
}

HttpResponse ErrorResponse(const Status& status) {
  HttpResponse r;
  r.status = HttpStatusFor(status.code());
  r.content_type = "text/plain; charset=utf-8";
  if (status.code() == StatusCode::kCorruption || status.code() == StatusCode::kIoError) {
    // Storage detail (file names, SQLite texts) goes to the log, not to the client.
    spdlog::error("storage failure answered with {}: {}", r.status, status.ToString());
    r.body = status.code() == StatusCode::kCorruption
                 ? "The server found damaged data in this database; the operator has been "
                   "informed in the server log."
                 : "The server could not access its storage; try again later.";
    return r;
  }
  r.body = status.message();
  if (status.retry_after_ms() > 0) {
    // Whole seconds, rounded up, at least 1 (RFC 9110 delay-seconds).
    const int64_t seconds = std::max<int64_t>(1, (status.retry_after_ms() + 999) / 1000);
    r.headers.emplace_back("retry-after", std::to_string(seconds));
  }
  return r;
}

}  // namespace kvc::service
