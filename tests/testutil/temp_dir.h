// TempDir: a fresh directory under the system's temporary directory, removed with everything in
// it when the TempDir goes away. For tests that need files of their own.
// Ownership: owns the directory. Thread-safety: none needed (one test uses it).
#pragma once

#include <filesystem>
#include <string>

#include "common/random.h"

namespace kvc::testutil {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kvc-test-")
      : path_(std::filesystem::temp_directory_path() / (prefix + HexEncode(RandomBytes(6)))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace kvc::testutil
