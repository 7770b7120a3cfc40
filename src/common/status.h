// Status and Result<T>: errors as values, used across every layer.
//
// A Status is a code plus a human-readable message. The message of a client error is what the
// client sees as the response body, so it must be plain, exact text (see the reference's error
// texts). Codes are protocol-neutral; service/http_status.cc maps them to HTTP statuses in one
// table.
//
// Thread-safety: value types; safe to copy between threads.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace kvc {

// Do not renumber: keep the values stable.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument = 1,    // malformed or out-of-limit client input (400)
  kUnauthenticated = 2,    // missing/invalid credentials (401)
  kPermissionDenied = 3,   // valid credentials, not allowed (403)
  kNotFound = 4,           // unknown resource (404)
  kPayloadTooLarge = 5,    // request body over the configured cap (413)
  kResourceExhausted = 6,  // a quota a retry cannot fix (429); reserved for quotas
  kUnavailable = 7,        // transient server-side condition; clients retry (503)
  kInternal = 8,           // a bug (500)
  kMethodNotAllowed = 9,   // wrong HTTP method (405)
  kUnsupportedMedia = 10,  // wrong content type (415)
  kAlreadyExists = 11,     // a resource with that name exists (409)
  kThrottled = 12,         // over a rate limit; clients retry after retry_after_ms (503)
  kCorruption = 13,        // stored data is not what it must be (500; logged, never shown as is)
  kIoError = 14,           // the storage could not read or write (500; logged, never shown as is)
  kHeadersTooLarge = 15,   // request header block over the configured cap (431)
  kConflict = 16,          // a condition the client set (e.g. a versionstamp) no longer holds (409)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // A hint (milliseconds, > 0) for when a retry may succeed; 0: none. The HTTP layer sends it
  // as a Retry-After header.
  int64_t retry_after_ms() const { return retry_after_ms_; }
  Status& set_retry_after_ms(int64_t ms) {
    retry_after_ms_ = ms;
    return *this;
  }

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int64_t retry_after_ms_ = 0;
};

inline Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
inline Status Unauthenticated(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status Unavailable(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
inline Status AlreadyExists(std::string msg) {
  return Status(StatusCode::kAlreadyExists, std::move(msg));
}
inline Status ResourceExhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
// REQUIRES: retry_after_ms > 0.
inline Status Throttled(std::string msg, int64_t retry_after_ms) {
  return Status(StatusCode::kThrottled, std::move(msg)).set_retry_after_ms(retry_after_ms);
}

inline Status Corruption(std::string msg) {
  return Status(StatusCode::kCorruption, std::move(msg));
}
inline Status IoError(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }

const char* StatusCodeName(StatusCode code);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kvc

// Propagates a non-OK Status from an expression returning Status.
#define KVC_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::kvc::Status kvc_status_ = (expr);        \
    if (!kvc_status_.ok()) return kvc_status_; \
  } while (0)

#define KVC_CONCAT_INNER_(a, b) a##b
#define KVC_CONCAT_(a, b) KVC_CONCAT_INNER_(a, b)
// Assigns the value of a Result<T> expression to lhs, or returns its Status.
#define KVC_ASSIGN_OR_RETURN(lhs, expr) \
  KVC_ASSIGN_OR_RETURN_IMPL_(KVC_CONCAT_(kvc_result_, __LINE__), lhs, expr)
// `lhs` may be a declaration and `tmp` is a name: neither can be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KVC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
