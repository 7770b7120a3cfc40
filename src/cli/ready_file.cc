#include "cli/ready_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec/json_text.h"

namespace kvc::cli {
namespace {

// HOST:PORT with an IPv6 host in brackets, as the flags take it.
std::string AddrOf(const BoundListener& l) {
  const bool v6 = l.host.find(':') != std::string::npos;
  return (v6 ? "[" + l.host + "]" : l.host) + ":" + std::to_string(l.port);
}

void AppendListener(const char* prefix, const BoundListener& l, std::string* out) {
  const std::string p(prefix);
  *out += ",\"" + p + "addr\":" + codec::JsonQuote(AddrOf(l));
  *out += ",\"" + p + "port\":" + std::to_string(l.port);
  *out += ",\"" + p + "url\":" + codec::JsonQuote(l.url);
}

Status ErrnoError(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

}  // namespace

std::string ReadyJson(const BoundListeners& listeners, long pid) {
  std::string out = "{\"pid\":" + std::to_string(pid);
  AppendListener("", listeners.main, &out);
  if (listeners.tls) AppendListener("tls_", *listeners.tls, &out);
  if (listeners.metrics) AppendListener("metrics_", *listeners.metrics, &out);
  out += "}";
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  // The pid keeps two servers given the same path from writing one temporary file.
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create " + temp);
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, data, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      Status s = ErrnoError("cannot write " + temp);
      ::close(fd);
      ::unlink(temp.c_str());
      return s;
    }
    data += w;
    left -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0) {
    Status s = ErrnoError("cannot write " + temp);
    ::unlink(temp.c_str());
    return s;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoError("cannot rename " + temp + " to " + path);
    ::unlink(temp.c_str());
    return s;
  }
  return Status::Ok();
}

}  // namespace kvc::cli
