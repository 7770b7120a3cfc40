#include "common/status.h"

#include "common/enum_names.h"

namespace kvc {

namespace {
constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
    {StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
    {StatusCode::kNotFound, "NOT_FOUND"},
    {StatusCode::kPayloadTooLarge, "PAYLOAD_TOO_LARGE"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kInternal, "INTERNAL"},
    {StatusCode::kMethodNotAllowed, "METHOD_NOT_ALLOWED"},
    {StatusCode::kUnsupportedMedia, "UNSUPPORTED_MEDIA_TYPE"},
    {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {StatusCode::kThrottled, "THROTTLED"},
    {StatusCode::kCorruption, "CORRUPTION"},
    {StatusCode::kIoError, "IO_ERROR"},
    {StatusCode::kConflict, "CONFLICT"},
    {StatusCode::kHeadersTooLarge, "HEADERS_TOO_LARGE"},
};
}  // namespace

const char* StatusCodeName(StatusCode code) { return NameIn(kStatusCodeNames, code, "UNKNOWN"); }

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace kvc
