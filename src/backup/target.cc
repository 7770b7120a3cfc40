#include "backup/target.h"

#include "backup/dir_target.h"
#include "backup/s3_target.h"

namespace kvc::backup {

bool IsValidObjectName(std::string_view name) {
  if (name.empty()) return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = name.find('/', start);
    const std::string_view segment = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    // "." is refused too: URL and path normalisation would drop it.
    if (segment.empty() || segment == "." || segment == "..") return false;
    for (char c : segment) {
      const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok) return false;
    }
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

Result<std::unique_ptr<Target>> OpenTarget(const std::string& url, const TargetOptions& options) {
  if (url.empty()) return InvalidArgument("empty backup target");
  if (url.compare(0, 5, "s3://") == 0) {
    KVC_ASSIGN_OR_RETURN(S3Config config, S3ConfigFromUrl(url));
    return std::unique_ptr<Target>(std::make_unique<S3Target>(std::move(config), options));
  }
  std::string path = url;
  if (url.compare(0, 7, "file://") == 0) {
    path = url.substr(7);
    if (path.empty()) return InvalidArgument("no path in backup target " + url);
  } else if (url.find("://") != std::string::npos) {
    return InvalidArgument("unsupported backup target " + url +
                           " (a directory path, file://PATH or s3://BUCKET[/PREFIX])");
  }
  KVC_ASSIGN_OR_RETURN(std::unique_ptr<DirTarget> dir, DirTarget::Open(path));
  return std::unique_ptr<Target>(std::move(dir));
}

}  // namespace kvc::backup
