#include "backup/destinations.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace kvc::backup {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kS3 = "s3://";
constexpr std::string_view kFile = "file://";

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// `path` with its trailing slashes dropped ("/" stays).
std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// True if `path` is `dir` or lies below it (both normalised, absolute).
bool IsWithin(const std::string& path, const std::string& dir) {
  if (path == dir) return true;
  if (dir == "/") return true;
  return path.size() > dir.size() && StartsWith(path, dir) && path[dir.size()] == '/';
}

Result<std::string> NormalizeS3(const std::string& destination) {
  std::string out(kS3);
  size_t segments = 0;
  std::string_view rest = std::string_view(destination).substr(kS3.size());
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (seg.empty()) continue;
    if (seg == "." || seg == "..") {
      return InvalidArgument("The backup destination '" + destination +
                             "' has a '.' or '..' segment; name the bucket and prefix plainly.");
    }
    if (segments++ > 0) out.push_back('/');
    out.append(seg);
  }
  if (segments == 0) {
    return InvalidArgument("The backup destination '" + destination + "' names no bucket.");
  }
  return out;
}

}  // namespace

Result<std::string> NormalizeBackupDestination(const std::string& destination) {
  if (destination.empty()) return InvalidArgument("The backup destination is empty.");
  if (StartsWith(destination, kS3)) return NormalizeS3(destination);
  std::string path = destination;
  if (StartsWith(destination, kFile)) {
    path = destination.substr(kFile.size());
  } else if (destination.find("://") != std::string::npos) {
    return InvalidArgument("The backup destination '" + destination +
                           "' is not supported; give an absolute directory path or "
                           "s3://BUCKET/PREFIX.");
  }
  if (path.empty() || path.front() != '/') {
    return InvalidArgument("The backup destination '" + destination +
                           "' is a relative path; give an absolute directory path or "
                           "s3://BUCKET/PREFIX.");
  }
  // Symlinks of the part that exists are resolved, `.` and `..` of the rest lexically (a
  // directory made later below an existing one cannot be a symlink yet).
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::path(path), ec);
  if (ec) {
    return InvalidArgument("The backup destination '" + destination +
                           "' cannot be resolved: " + ec.message() + ".");
  }
  return WithoutTrailingSlashes(resolved.lexically_normal().string());
}

Result<BackupDestinations> BackupDestinations::Create(const std::string& default_destination,
                                                      const std::vector<std::string>& allowed,
                                                      const std::string& data_dir) {
  BackupDestinations d;
  if (!data_dir.empty()) {
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(fs::absolute(fs::path(data_dir), ec), ec);
    if (ec) return InvalidArgument("cannot resolve the data directory " + data_dir);
    d.data_dir_ = WithoutTrailingSlashes(dir.lexically_normal().string());
  }
  auto add = [&d](const std::string& flag, const std::string& given) -> Status {
    auto normal = NormalizeBackupDestination(given);
    if (!normal.ok()) return InvalidArgument(flag + ": " + normal.status().message());
    if (Status s = d.CheckOutsideDataDir(*normal, given); !s.ok()) {
      return InvalidArgument(flag + ": " + s.message());
    }
    if (std::find(d.allowed_.begin(), d.allowed_.end(), *normal) == d.allowed_.end()) {
      d.allowed_.push_back(*normal);
    }
    if (d.default_.empty()) d.default_ = *normal;
    return Status::Ok();
  };
  if (!default_destination.empty()) KVC_RETURN_IF_ERROR(add("--backup-to", default_destination));
  for (const std::string& a : allowed) KVC_RETURN_IF_ERROR(add("--backup-allow", a));
  return d;
}

Status BackupDestinations::CheckOutsideDataDir(const std::string& normal,
                                               const std::string& given) const {
  if (data_dir_.empty() || StartsWith(normal, kS3)) return Status::Ok();
  if (IsWithin(normal, data_dir_)) {
    return InvalidArgument("The backup destination '" + given +
                           "' is inside the server's data directory; backups must go to a "
                           "directory outside it.");
  }
  if (IsWithin(data_dir_, normal)) {
    return InvalidArgument("The backup destination '" + given +
                           "' contains the server's data directory; backups must go to a "
                           "directory outside it.");
  }
  return Status::Ok();
}

Result<std::string> BackupDestinations::Resolve(const std::string& requested,
                                                bool server_wide) const {
  const Status none = PermissionDenied(
      "This server takes no backups through the admin API: the operator has configured no "
      "backup destination (kvconnect serve --backup-to or --backup-allow).");
  if (requested.empty() && allowed_.empty()) return none;
  const std::string& given = requested.empty() ? default_ : requested;
  // A malformed or relative destination is the request's fault whatever is configured.
  KVC_ASSIGN_OR_RETURN(std::string normal, NormalizeBackupDestination(given));
  if (allowed_.empty()) return none;
  if (!server_wide && normal != default_) {
    // The same text for every other destination, so it tells nothing about which exist.
    return PermissionDenied(
        "This admin token is bound to one database: it may back up only to the server's "
        "default backup destination (send no \"to\"). Other destinations need the server's "
        "bootstrap token.");
  }
  KVC_RETURN_IF_ERROR(CheckOutsideDataDir(normal, given));
  if (std::find(allowed_.begin(), allowed_.end(), normal) == allowed_.end()) {
    std::string list;
    for (const std::string& a : allowed_) list += (list.empty() ? "" : ", ") + a;
    return PermissionDenied("The backup destination '" + given +
                            "' is not one the operator allowed (kvconnect serve --backup-to / "
                            "--backup-allow); allowed: " +
                            list + ".");
  }
  return normal;
}

}  // namespace kvc::backup
