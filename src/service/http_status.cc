#include "service/http_status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

namespace kvc::service {

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kMethodNotAllowed:
      return 405;
    case StatusCode::kPayloadTooLarge:
      return 413;
    case StatusCode::kHeadersTooLarge:
      return 431;
    case StatusCode::kUnsupportedMedia:
      return 415;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
    case StatusCode::kThrottled:  // 5xx so clients retry: they all treat 4xx as final
      return 503;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kAlreadyExists:
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kCorruption:
    case StatusCode::kIoError:
      return 500;
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
