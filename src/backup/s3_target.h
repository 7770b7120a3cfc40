// S3Target: a backup Target in an S3-compatible bucket, spoken to over HTTP(S) with libcurl,
// which signs each request (AWS Signature Version 4, CURLOPT_AWS_SIGV4).
//
// Object NAME is the key PREFIX/NAME (or NAME without a prefix). Each request carries the hex
// SHA-256 of its body in x-amz-content-sha256 (signed, so the signature covers the body), and
// a PUT also carries Content-Length and Content-MD5: S3 stores an object only when the whole
// body arrived with those digests. PutFile reads the file twice: once for the digests, once
// to send it (a file that shrinks meanwhile fails with IoError; one that changes fails S3's
// digest checks). A GET must deliver exactly Content-Length bytes.
//
// Requests are signed by libcurl 7.88, which signs the path and query as they are written, so
// this class writes them in SigV4's canonical form: keys and query values percent-encoded as
// S3UriEncode does, query parameters sorted by name.
//
// List returns names relative to the target's prefix, sorted, and leaves out keys that are
// not valid object names (objects other tools put under the prefix).
//
// Errors (see target.h): Unavailable for network failures, timeouts, HTTP 5xx, 429, and S3's
// SlowDown, RequestTimeout, IncompleteBody, BadDigest and XAmzContentSHA256Mismatch;
// PermissionDenied for 401/403; NotFound for a missing object (404 NoSuchKey) on Get;
// InvalidArgument for an invalid name and any other 4xx (e.g. NoSuchBucket); IoError for a
// local file; Corruption for a listing that does not parse. Messages name the operation, the
// object and S3's error Code and Message, never a credential.
//
// Ownership: owns a small pool of libcurl easy handles (their connections are reused).
// Thread-safety: thread-safe; each call uses a handle of its own, taken from the pool under a
// mutex.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backup/target.h"
#include "common/mutex.h"
#include "common/status.h"

namespace kvc::backup {

// One request's state, shared with libcurl's callbacks (defined in s3_target.cc).
struct S3Transfer;

// Where and how to reach a bucket.
struct S3Config {
  std::string bucket;
  std::string prefix;  // no leading or trailing '/'; may be empty
  std::string region = "us-east-1";
  // scheme://host[:port], no trailing '/': a custom endpoint, or https://s3.REGION.amazonaws.com
  std::string endpoint;
  bool path_style = false;  // ENDPOINT/BUCKET/KEY instead of https://BUCKET.s3.REGION.../KEY
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: none
};

// Parses "s3://BUCKET[/PREFIX]" and reads the AWS_* environment variables that OpenTarget
// (target.h) describes. A bucket name is 3 to 63 of [a-z0-9.-], starting and ending with a
// letter or digit; a prefix is '/'-separated non-empty segments (never "." or "..") without
// control characters; an endpoint is http(s)://host[:port] without a path. A bucket name with
// a '.' is reached path-style on AWS too (its TLS certificate would not match the virtual
// host). Errors: InvalidArgument (malformed URL, endpoint or region, missing credentials).
Result<S3Config> S3ConfigFromUrl(const std::string& url);

class S3Target : public Target {
 public:
  // Largest page ListObjectsV2 returns.
  static constexpr int kMaxListPage = 1000;

  // REQUIRES: `config` as S3ConfigFromUrl makes it.
  S3Target(S3Config config, TargetOptions options);
  ~S3Target() override;
  S3Target(const S3Target&) = delete;
  S3Target& operator=(const S3Target&) = delete;

  Status Put(const std::string& name, std::string_view data) override;
  Status PutFile(const std::string& name, const std::string& path) override;
  Result<std::string> Get(const std::string& name) override;
  Status GetFile(const std::string& name, const std::string& path) override;
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  Status Delete(const std::string& name) override;
  // "s3://BUCKET/PREFIX (ENDPOINT)".
  std::string Describe() const override;

  // As List, asking for at most `max_keys` keys per request. REQUIRES: 1 <= max_keys <=
  // kMaxListPage.
  Result<std::vector<ObjectInfo>> ListPaged(const std::string& prefix, int max_keys);

 private:
  struct EasyHandle;

  // Runs one request and maps its outcome to a Status (see the class comment).
  Status Perform(S3Transfer& transfer);
  Result<std::unique_ptr<EasyHandle>> Acquire();
  void Release(std::unique_ptr<EasyHandle> handle);
  std::string Key(const std::string& name) const;
  std::string ObjectUrl(const std::string& name) const;
  std::string Where(const std::string& name) const;
  // Addresses `t` (its kind set) to the object `name`: the URL, the description ("GET
  // s3://BUCKET/KEY" and `detail`) and, but for a PUT, the empty body's hash.
  void Address(const std::string& name, std::string_view detail, S3Transfer* t) const;

  const S3Config config_;
  const TargetOptions options_;
  const std::string sigv4_;     // "aws:amz:REGION:s3"
  const std::string base_url_;  // ENDPOINT/BUCKET or https://BUCKET.ENDPOINT-HOST

  Mutex mu_;
  std::vector<std::unique_ptr<EasyHandle>> idle_ KVC_GUARDED_BY(mu_);
};

// S3's URI encoding (SigV4 canonical form): every byte but A-Z a-z 0-9 '-' '.' '_' '~' becomes
// %XX with uppercase hex; '/' is kept as is if `keep_slash` (for paths).
std::string S3UriEncode(std::string_view s, bool keep_slash);

}  // namespace kvc::backup
