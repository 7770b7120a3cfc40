// DirTarget: a backup Target in a local directory (or a mounted file system).
//
// An object is the file ROOT/NAME; the '/'s of its name are subdirectories, created as needed
// with mode 0700 (files get 0600). Put writes a temporary file beside the final one, fsyncs
// it, renames it over the final name and fsyncs the directory, so after a crash or power loss
// an object is either absent, its old contents, or its new contents, never a mix. Temporary
// names hold a '#', which no object name has, so List never shows them (nor anything else in
// the tree that is not a valid object name, e.g. one left by a crash in the middle of a Put).
//
// A name cannot be both an object and a "directory" of others here ("a" and "a/b"): such a
// Put fails with IoError. Delete leaves empty subdirectories behind (removing them would race
// with a Put creating a file in them).
//
// Ownership: holds only the root path. Thread-safety: thread-safe (every call works on its own
// files; concurrent Puts of one name leave one of them whole).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backup/target.h"
#include "common/status.h"

namespace kvc::backup {

class DirTarget : public Target {
 public:
  // Opens the directory `root`, creating it and its parents (mode 0700) if missing. IoError if
  // it cannot be created or is not a directory; InvalidArgument if `root` is empty.
  static Result<std::unique_ptr<DirTarget>> Open(const std::string& root);

  // Errors: InvalidArgument for an invalid name; IoError for a file that cannot be written
  // (PutFile: or `path` read).
  Status Put(const std::string& name, std::string_view data) override;
  Status PutFile(const std::string& name, const std::string& path) override;
  // Errors: InvalidArgument, NotFound (no such object), IoError.
  Result<std::string> Get(const std::string& name) override;
  Status GetFile(const std::string& name, const std::string& path) override;
  // Errors: IoError (the root cannot be read).
  Result<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  // Errors: InvalidArgument, IoError.
  Status Delete(const std::string& name) override;
  // The root path as opened.
  std::string Describe() const override { return root_; }

 private:
  explicit DirTarget(std::string root) : root_(std::move(root)) {}

  const std::string root_;
};

}  // namespace kvc::backup
