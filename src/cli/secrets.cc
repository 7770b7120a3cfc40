#include "cli/secrets.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvc::cli {

namespace {

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

void TrimTrailing(std::string* s) {
  while (!s->empty() &&
         (s->back() == '\n' || s->back() == '\r' || s->back() == ' ' || s->back() == '\t')) {
    s->pop_back();
  }
}

}  // namespace

Result<std::string> ReadSecretFile(const std::string& path, const std::string& flag) {
  // O_NONBLOCK: a FIFO at the path must not hang the start; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(flag + ": no file " + path);
    return IoError(flag + ": cannot read " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(flag + ": " + path + " is not a regular file");
  }
  if ((st.st_mode & S_IROTH) != 0) {
    ::close(fd);
    return InvalidArgument(flag + ": " + path + " has mode " + Octal(st.st_mode) +
                           ", so every user of this machine can read the secret in it; make it "
                           "private first (chmod 600 " +
                           path + ")");
  }
  if ((st.st_mode & S_IRGRP) != 0) {
    spdlog::warn("{}: {} has mode {}: members of its group can read the secret in it", flag, path,
                 Octal(st.st_mode));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      std::string message = flag + ": cannot read ";
      message += path;
      message += ": ";
      message += std::strerror(err);
      return IoError(std::move(message));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  TrimTrailing(&out);
  if (out.empty()) return InvalidArgument(flag + ": " + path + " is empty");
  return out;
}

Status LoadServeSecrets(ServeConfig& c) {
  if (!c.access_token_file.empty()) {
    if (!c.access_token.empty()) {
      return InvalidArgument("--access-token and --access-token-file exclude each other");
    }
    KVC_ASSIGN_OR_RETURN(std::string token,
                         ReadSecretFile(c.access_token_file, "--access-token-file"));
    if (token.find('\n') != std::string::npos) {
      return InvalidArgument("--access-token-file: " + c.access_token_file +
                             " holds more than one line; it must hold the token alone");
    }
    c.access_token = std::move(token);
  }
  const bool push_secret_given =
      !c.queue_push_secrets.empty() || !c.queue_push_secret_files.empty();
  for (const std::string& item : c.queue_push_secret_files) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      return InvalidArgument("--queue-push-secret-file takes NAME=PATH, got '" + item + "'");
    }
    const std::string name = item.substr(0, eq);
    KVC_ASSIGN_OR_RETURN(std::string text,
                         ReadSecretFile(item.substr(eq + 1), "--queue-push-secret-file"));
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      TrimTrailing(&line);
      if (!line.empty()) {
        std::string entry = name;
        entry += '=';
        entry += line;
        c.queue_push_secrets.push_back(std::move(entry));
      }
      start = end + 1;
    }
  }
  if (!push_secret_given) {
    if (const char* env = std::getenv(kPushSecretEnv); env != nullptr) {
      std::string entry;
      for (const char* p = env;; ++p) {
        const char ch = *p;
        if (ch == '\0' || ch == ',' || ch == ' ' || ch == '\n' || ch == '\t') {
          if (!entry.empty()) c.queue_push_secrets.push_back(entry);
          entry.clear();
          if (ch == '\0') break;
        } else {
          entry.push_back(ch);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace kvc::cli
