// Backup targets: where snapshots and change-log segments are kept, as named objects. A local
// directory (dir_target) or an S3-compatible bucket (s3_target, through libcurl's AWS SigV4).
//
// Object names are relative, '/'-separated paths of [A-Za-z0-9._-] segments (never "..", never
// a leading '/'). Put is atomic for readers: an object is either absent or whole (a directory
// target writes a temporary file, fsyncs it and renames it; S3 stores an object only once its
// whole body arrived with a matching Content-MD5). List is by prefix, sorted by name.
//
// Errors: Unavailable for conditions a retry may fix (connection refused or reset, timeouts,
// HTTP 5xx and 429, throttling); NotFound for a missing object (Get); PermissionDenied for
// credentials the target refuses (HTTP 401/403); InvalidArgument for a malformed URL or name;
// IoError for a local file that cannot be read or written; Corruption for an answer the target
// should never give (e.g. unparseable listing XML).
//
// Thread-safety: a Target may be used from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::backup {

struct ObjectInfo {
  std::string name;  // full name, prefix included
  int64_t size = 0;  // bytes
};

struct TargetOptions {
  int64_t connect_timeout_ms = 5000;
  // A request (Put/Get/List/Delete of one object) that takes longer fails with Unavailable.
  int64_t request_timeout_ms = 120000;
  // S3 only: a transfer slower than low_speed_bytes_per_s for low_speed_window_s seconds is
  // abandoned (Unavailable).
  int64_t low_speed_bytes_per_s = 1024;
  int64_t low_speed_window_s = 30;
};

class Target {
 public:
  virtual ~Target() = default;
  // Stores `data` as object `name`, replacing any object of that name.
  virtual Status Put(const std::string& name, std::string_view data) = 0;
  // Stores the contents of the local file `path` as object `name` (for large snapshots).
  virtual Status PutFile(const std::string& name, const std::string& path) = 0;
  // The whole object. NotFound if absent.
  virtual Result<std::string> Get(const std::string& name) = 0;
  // Writes the whole object to the local file `path` (created or truncated). NotFound if
  // absent; on any error `path` may hold a partial copy, which the caller removes.
  virtual Status GetFile(const std::string& name, const std::string& path) = 0;
  // Every object whose name starts with `prefix`, sorted by name.
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  // Removes an object; OK if it was absent.
  virtual Status Delete(const std::string& name) = 0;
  // Where the target is, for operators and logs (never a secret): "/srv/backups",
  // "s3://bucket/prefix (http://127.0.0.1:9000)".
  virtual std::string Describe() const = 0;
};

// True if `name` is a valid object name (see above).
bool IsValidObjectName(std::string_view name);

// Opens the target a URL names: an absolute or relative directory path (or file://PATH), or
// s3://BUCKET[/PREFIX]. For S3, credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
// and AWS_SESSION_TOKEN (optional), the region from AWS_REGION or AWS_DEFAULT_REGION (default
// us-east-1), and the endpoint from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (default
// https://s3.REGION.amazonaws.com, virtual-host style; a custom endpoint uses path style).
// A directory is created (mode 0700) if missing. Errors: InvalidArgument (malformed URL,
// missing S3 credentials), IoError (directory cannot be created).
Result<std::unique_ptr<Target>> OpenTarget(const std::string& url, const TargetOptions& options);

}  // namespace kvc::backup
