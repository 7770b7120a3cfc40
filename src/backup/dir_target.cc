#include "backup/dir_target.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>

namespace kvc::backup {
namespace {

// Copies go through a buffer of this size.
constexpr size_t kCopyBufferBytes = 1 << 20;

Status Errno(std::string_view what, const std::string& path, int err) {
  return IoError(std::string(what) + " " + path + ": " + std::strerror(err));
}

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting close's error (a write error may surface only here).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Copies everything readable from `in` to `out`.
Status CopyFd(int in, const std::string& in_path, int out, const std::string& out_path) {
  std::string buffer(kCopyBufferBytes, '\0');
  for (;;) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read", in_path, errno);
    }
    if (n == 0) return Status::Ok();
    KVC_RETURN_IF_ERROR(
        WriteAll(out, std::string_view(buffer.data(), static_cast<size_t>(n)), out_path));
  }
}

Status FsyncDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("cannot open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return Errno("cannot fsync directory", dir, errno);
  return Status::Ok();
}

// Creates `dir` (mode 0700) if missing, and fsyncs its parent so that the new entry lasts.
Status MakeDir(const std::string& dir, const std::string& parent) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    // Exactly 0700, whatever the umask.
    if (::chmod(dir.c_str(), 0700) != 0) return Errno("cannot set the mode of", dir, errno);
    return FsyncDir(parent);
  }
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::Ok();
  }
  if (err == EEXIST) return IoError("cannot create directory " + dir + ": an object has that name");
  return Errno("cannot create directory", dir, err);
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Opens object file `path` for reading: NotFound if there is no such object.
Result<int> OpenObject(const std::string& name, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFound("no backup object " + name);
    return Errno("cannot open", path, errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotFound("no backup object " + name);
  }
  return fd;
}

// Appends to `out` the objects under directory `rel` (relative to root; "" for the root itself)
// whose names start with `prefix`.
Status Walk(const std::string& root, const std::string& rel, const std::string& prefix,
            std::vector<ObjectInfo>* out) {
  const std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    // A subdirectory removed while we walk: nothing in it to list.
    if (!rel.empty() && (errno == ENOENT || errno == ENOTDIR)) return Status::Ok();
    return Errno("cannot list", dir, errno);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> closer(d, ::closedir);
  std::vector<std::string> subdirs;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(d);
    if (entry == nullptr) {
      if (errno != 0) return Errno("cannot list", dir, errno);
      break;
    }
    const std::string entry_name = entry->d_name;
    if (entry_name == "." || entry_name == "..") continue;
    std::string name = rel;
    if (!name.empty()) name += '/';
    name += entry_name;
    struct stat st {};
    if (::fstatat(::dirfd(d), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      // Descend only where names with the prefix can be.
      const std::string as_dir = name + "/";
      const size_t n = std::min(prefix.size(), as_dir.size());
      if (as_dir.compare(0, n, prefix, 0, n) == 0) subdirs.push_back(name);
    } else if (S_ISREG(st.st_mode) && IsValidObjectName(name) &&
               name.compare(0, prefix.size(), prefix) == 0) {
      out->push_back(ObjectInfo{name, static_cast<int64_t>(st.st_size)});
    }
  }
  closer.reset();
  for (const std::string& sub : subdirs) {
    KVC_RETURN_IF_ERROR(Walk(root, sub, prefix, out));
  }
  return Status::Ok();
}

// Writes object `name` under `root` atomically: `fill` writes the contents to a temporary file,
// which is then fsynced and renamed into place, and the directory fsynced.
Status WriteObject(const std::string& root, const std::string& name,
                   const std::function<Status(int fd, const std::string& path)>& fill) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  // Subdirectories, outermost first.
  std::string dir = root;
  size_t start = 0;
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', start)) {
    const std::string parent = dir;
    dir += "/" + name.substr(start, slash - start);
    KVC_RETURN_IF_ERROR(MakeDir(dir, parent));
    start = slash + 1;
  }
  const std::string final_path = root + "/" + name;
  // '#' is in no object name: List skips the file, and no object can collide with it.
  std::string temp_path = dir + "/#kvc-tmp.XXXXXX";
  Fd fd(::mkostemp(temp_path.data(), O_CLOEXEC));
  if (fd.get() < 0) return Errno("cannot create a temporary file in", dir, errno);
  Status status = fill(fd.get(), temp_path);
  if (status.ok() && ::fsync(fd.get()) != 0) status = Errno("cannot fsync", temp_path, errno);
  if (fd.Close() != 0 && status.ok()) status = Errno("cannot close", temp_path, errno);
  if (status.ok() && ::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    status = Errno("cannot rename to", final_path, errno);
  }
  if (!status.ok()) {
    ::unlink(temp_path.c_str());
    return status;
  }
  return FsyncDir(dir);
}

}  // namespace

Result<std::unique_ptr<DirTarget>> DirTarget::Open(const std::string& root) {
  if (root.empty()) return InvalidArgument("empty backup directory path");
  std::string path = root;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  // Create each missing component, outermost first.
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string dir = slash == std::string::npos ? path : path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      if (errno != ENOENT) return Errno("cannot open backup directory", dir, errno);
      KVC_RETURN_IF_ERROR(MakeDir(dir, ParentOf(dir)));
    } else if (!S_ISDIR(st.st_mode)) {
      return IoError("backup target " + dir + " is not a directory");
    }
    if (slash == std::string::npos) break;
  }
  return std::unique_ptr<DirTarget>(new DirTarget(path));
}

Status DirTarget::Put(const std::string& name, std::string_view data) {
  return WriteObject(root_, name,
                     [data](int fd, const std::string& path) { return WriteAll(fd, data, path); });
}

Status DirTarget::PutFile(const std::string& name, const std::string& path) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  Fd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) return Errno("cannot open", path, errno);
  return WriteObject(root_, name, [&](int fd, const std::string& temp_path) {
    return CopyFd(in.get(), path, fd, temp_path);
  });
}

Result<std::string> DirTarget::Get(const std::string& name) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  const std::string path = root_ + "/" + name;
  KVC_ASSIGN_OR_RETURN(const int raw_fd, OpenObject(name, path));
  Fd fd(raw_fd);
  std::string out;
  std::string buffer(kCopyBufferBytes, '\0');
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read", path, errno);
    }
    if (n == 0) return out;
    out.append(buffer.data(), static_cast<size_t>(n));
  }
}

Status DirTarget::GetFile(const std::string& name, const std::string& path) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  const std::string object_path = root_ + "/" + name;
  KVC_ASSIGN_OR_RETURN(const int raw_fd, OpenObject(name, object_path));
  Fd in(raw_fd);
  Fd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (out.get() < 0) return Errno("cannot create", path, errno);
  KVC_RETURN_IF_ERROR(CopyFd(in.get(), object_path, out.get(), path));
  if (out.Close() != 0) return Errno("cannot close", path, errno);
  return Status::Ok();
}

Result<std::vector<ObjectInfo>> DirTarget::List(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  KVC_RETURN_IF_ERROR(Walk(root_, "", prefix, &out));
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

Status DirTarget::Delete(const std::string& name) {
  if (!IsValidObjectName(name)) return InvalidArgument("invalid backup object name: " + name);
  const std::string path = root_ + "/" + name;
  if (::unlink(path.c_str()) != 0) {
    // Absent, or a directory of other objects rather than an object: nothing to delete.
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return Status::Ok();
    return Errno("cannot delete", path, errno);
  }
  return FsyncDir(ParentOf(path));
}

}  // namespace kvc::backup
