#include "storage/private_file.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "common/mutex.h"

namespace kvc::storage {

namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  return IoError(what + " " + path + ": " + std::strerror(err));
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The paths warned about in this process.
class WarnedPaths {
 public:
  // True the first time `path` is given.
  bool Insert(const std::string& path) KVC_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return paths_.insert(path).second;
  }

 private:
  Mutex mu_;
  std::set<std::string> paths_ KVC_GUARDED_BY(mu_);
};

// Logs `message` about `path` unless it was logged for that path before in this process.
void WarnOnce(const std::string& path, const std::string& message) {
  static WarnedPaths* const kWarned = new WarnedPaths();  // never destroyed: used at exit too
  if (kWarned->Insert(path)) spdlog::warn("{}", message);
}

// Removes the group and other bits of the file at `path` (mode `mode`) if it has any. By path,
// not through a descriptor: see PreparePrivateFile.
void Tighten(const std::string& path, mode_t mode) {
  if ((mode & 077) == 0) return;
  const mode_t tight = mode & 07700;
  if (::chmod(path.c_str(), tight) != 0) {
    WarnOnce(path, path + " has mode " + Octal(mode) +
                       ", readable beyond its owner, and cannot be changed (" +
                       std::strerror(errno) + "); make it " + Octal(tight));
    return;
  }
  WarnOnce(path, path + " had mode " + Octal(mode) + "; set it to " + Octal(tight) +
                     " (kvconnect keeps its files to its own user)");
}

}  // namespace

Status PreparePrivateFile(const std::string& path, bool create) {
  // An existing file is never opened here, only inspected and changed by path. It may be a
  // SQLite file that another connection of this process has open and locked, and closing any
  // descriptor of a file drops every POSIX lock the process holds on it: SQLite's locks would be
  // gone while it believes it holds them (another process could then checkpoint or truncate
  // under it: kvconnect died of SIGBUS beside a Deno process on the same file).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return Errno("cannot inspect", path, errno);
    if (!create) return Status::Ok();
    // O_EXCL: only a file this call makes is opened (and closed), so nobody holds locks on it.
    const int fd =
        ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, kPrivateFileMode);
    if (fd >= 0) {
      // Exactly 0600, whatever the umask (a umask such as 0277 would leave it unwritable).
      const bool ok = ::fchmod(fd, kPrivateFileMode) == 0;
      const int err = errno;
      ::close(fd);
      if (!ok) return Errno("cannot set the mode of", path, err);
      return Status::Ok();
    }
    if (errno != EEXIST) return Errno("cannot create", path, errno);
    // Made by someone else meanwhile: inspect it like any existing file.
    if (::stat(path.c_str(), &st) != 0) return Errno("cannot inspect", path, errno);
  }
  // A file just made has 0600; an older one may be looser.
  if (S_ISREG(st.st_mode)) Tighten(path, st.st_mode);
  return Status::Ok();
}

Status PrepareSqliteFiles(const std::string& path, bool create) {
  KVC_RETURN_IF_ERROR(PreparePrivateFile(path, create));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    KVC_RETURN_IF_ERROR(PreparePrivateFile(path + suffix, false));
  }
  return Status::Ok();
}

Status MakePrivateDirectories(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("empty directory path");
  // Each component, outermost first; existing ones are left as they are.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string part = slash == std::string::npos ? dir : dir.substr(0, slash);
    if (!part.empty() && part.back() != '/') {
      if (::mkdir(part.c_str(), kPrivateDirMode) == 0) {
        if (::chmod(part.c_str(), kPrivateDirMode) != 0) {
          return Errno("cannot set the mode of", part, errno);
        }
      } else if (errno != EEXIST) {
        return Errno("cannot create directory", part, errno);
      }
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Errno("cannot inspect", dir, errno);
  if (!S_ISDIR(st.st_mode)) return IoError(dir + " is not a directory");
  return Status::Ok();
}

Status MakeOwnedPrivateDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), kPrivateDirMode) != 0 && errno != EEXIST) {
    return Errno("cannot create directory", dir, errno);
  }
  // Opened without following a link, then checked and set through the descriptor: what we
  // check is what we chmod. In a sticky directory such as /tmp nobody else can rename or
  // remove it afterwards.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return IoError(dir + " is not a directory (a link or a file is in its place); remove it");
    }
    return Errno("cannot open directory", dir, errno);
  }
  struct stat st {};
  Status s = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    s = Errno("cannot inspect", dir, errno);
  } else if (st.st_uid != ::geteuid()) {
    s = IoError("refusing to use " + dir + ": it belongs to user id " + std::to_string(st.st_uid) +
                ", not to this process's user (" + std::to_string(::geteuid()) +
                "), who could read or replace what is put there; remove it or set TMPDIR");
  } else if ((st.st_mode & 07777) != kPrivateDirMode && ::fchmod(fd, kPrivateDirMode) != 0) {
    s = Errno("cannot set the mode of", dir, errno);
  }
  ::close(fd);
  return s;
}

}  // namespace kvc::storage
