// S3Fixture: an S3 stand-in for tests, started by the test itself: @20minutes/s3rver under
// Node (tests/testutil/s3_standin.cjs), on a free loopback port the kernel picks, with a
// temporary data directory, one bucket and one key pair. s3rver checks each request's SigV4
// signature against that key pair; the launcher adds S3's whole-body and digest checks on PUT
// (see s3_standin.cjs).
//
// The stand-in is installed by `npm ci` in tests/e2e. If it (or node) is missing, Start fails
// with a message that says so: tests that need it fail, they never skip.
//
// Ownership: owns the Node process and the temporary directory; the destructor kills the
// process (SIGKILL), reaps it and removes the directory. The process also exits by itself when
// its stdin (a pipe from this object) closes, so it never outlives a crashed test.
// Thread-safety: const methods may be called from several threads; the rest from one.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace kvc::testutil {

class S3Fixture {
 public:
  static constexpr char kBucket[] = "kvc-test";
  static constexpr char kAccessKey[] = "AKIDKVCTEST";
  static constexpr char kSecretKey[] = "kvc-test-secret-key";
  static constexpr char kRegion[] = "us-east-1";

  // Starts the stand-in and waits until it answers HTTP. Errors: NotFound (node or the
  // stand-in not installed: run `npm ci` in tests/e2e), Unavailable (it did not start or
  // answer in time; the message holds its log), IoError.
  static Result<std::unique_ptr<S3Fixture>> Start();
  ~S3Fixture();
  S3Fixture(const S3Fixture&) = delete;
  S3Fixture& operator=(const S3Fixture&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT".
  std::string endpoint() const;
  // Where the stand-in keeps the bucket's files.
  const std::string& data_dir() const { return data_dir_; }
  // What the stand-in printed to stderr so far (its errors and the PUTs it refused).
  std::string Log() const;

  // Sets the AWS_* environment variables OpenTarget reads so that s3:// URLs reach `endpoint`
  // (the stand-in if empty) with the fixture's key pair, and clears AWS_SESSION_TOKEN and
  // AWS_ENDPOINT_URL. REQUIRES: no other thread reads the environment meanwhile.
  void SetEnvironment(const std::string& endpoint = "") const;

 private:
  S3Fixture() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;   // the stand-in's stdin: closing it ends the stand-in
  int stdout_fd_ = -1;  // kept open so the stand-in can still write to it
  int port_ = 0;
  std::string dir_;  // temporary directory: data/ and standin.log
  std::string data_dir_;
  std::string log_path_;
};

}  // namespace kvc::testutil
