#include "common/status.h"

namespace kvc {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    case StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kPayloadTooLarge:
      return "PAYLOAD_TOO_LARGE";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kMethodNotAllowed:
      return "METHOD_NOT_ALLOWED";
    case StatusCode::kUnsupportedMedia:
      return "UNSUPPORTED_MEDIA_TYPE";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kThrottled:
      return "THROTTLED";
    case StatusCode::kCorruption:
      return "CORRUPTION";
    case StatusCode::kIoError:
      return "IO_ERROR";
    case StatusCode::kConflict:
      return "CONFLICT";
    case StatusCode::kHeadersTooLarge:
      return "HEADERS_TOO_LARGE";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace kvc
