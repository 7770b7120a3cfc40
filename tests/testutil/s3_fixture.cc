#include "testutil/s3_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace kvc::testutil {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Node and s3rver start in well under a second on an idle machine; a busy CI machine may be
// much slower.
constexpr std::chrono::seconds kStartTimeout{60};

#ifndef KVC_NODE_EXECUTABLE
#define KVC_NODE_EXECUTABLE ""
#endif

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// True once 127.0.0.1:port answers an HTTP request with an HTTP status line.
bool AnswersHttp(int port, Clock::time_point deadline) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      std::string answer;
      char buffer[512];
      while (answer.size() < 8) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, RemainingMs(deadline)) <= 0) break;
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        answer.append(buffer, static_cast<size_t>(n));
      }
      ok = answer.rfind("HTTP/1.", 0) == 0;
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

Result<std::unique_ptr<S3Fixture>> S3Fixture::Start() {
  const std::string source_dir = KVC_SOURCE_DIR;
  const std::string node = KVC_NODE_EXECUTABLE;
  const std::string modules_dir = source_dir + "/tests/e2e";
  const std::string package = modules_dir + "/node_modules/@20minutes/s3rver/package.json";
  const std::string launcher = source_dir + "/tests/testutil/s3_standin.cjs";
  if (node.empty() || ::access(node.c_str(), X_OK) != 0) {
    return NotFound("the S3 stand-in needs Node, which CMake did not find ('" + node +
                    "'): install Node, re-run cmake, then run `npm ci` in tests/e2e");
  }
  if (::access(package.c_str(), R_OK) != 0) {
    return NotFound(
        "the S3 stand-in (npm package @20minutes/s3rver) is not installed: run "
        "`npm ci` in tests/e2e (missing " +
        package + ")");
  }

  std::unique_ptr<S3Fixture> fixture(new S3Fixture());
  std::string dir_template = (fs::temp_directory_path() / "kvc-s3-XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) return Errno("mkdtemp");
  fixture->dir_ = dir_template;
  fixture->data_dir_ = fixture->dir_ + "/data";
  fixture->log_path_ = fixture->dir_ + "/standin.log";
  std::error_code ec;
  fs::create_directory(fixture->data_dir_, ec);
  if (ec) return IoError("cannot create " + fixture->data_dir_ + ": " + ec.message());

  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return Errno("pipe2");
  fixture->stdin_fd_ = in_pipe[1];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    return Errno("pipe2");
  }
  fixture->stdout_fd_ = out_pipe[0];
  const int log_fd =
      ::open(fixture->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    return Errno("open " + fixture->log_path_);
  }

  // dup2 clears O_CLOEXEC on the child's 0, 1 and 2; every other descriptor of ours (and of
  // other threads' children) stays closed in the child.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  std::vector<std::string> args = {
      node,
      // s3rver's continuation tokens use DES, which OpenSSL 3 keeps in its legacy provider.
      "--openssl-legacy-provider",
      launcher,
      modules_dir,
      fixture->data_dir_,
      kBucket,
      kAccessKey,
      kSecretKey,
  };
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, node.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(log_fd);
  if (rc != 0) return IoError("cannot start " + node + ": " + std::strerror(rc));
  fixture->pid_ = pid;

  // The launcher prints "listening PORT" once it accepts connections.
  const auto deadline = Clock::now() + kStartTimeout;
  std::string out;
  while (out.find('\n') == std::string::npos) {
    pollfd p{fixture->stdout_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, RemainingMs(deadline));
    if (ready <= 0) {
      return Unavailable("the S3 stand-in did not start within " +
                         std::to_string(kStartTimeout.count()) + " s; its log:\n" + fixture->Log());
    }
    char buffer[256];
    const ssize_t n = ::read(fixture->stdout_fd_, buffer, sizeof buffer);
    if (n <= 0) {
      return Unavailable("the S3 stand-in exited at start; its log:\n" + fixture->Log());
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  std::istringstream line(out);
  std::string word;
  line >> word >> fixture->port_;
  if (word != "listening" || fixture->port_ <= 0) {
    return Unavailable("the S3 stand-in said '" + out + "'; its log:\n" + fixture->Log());
  }
  while (!AnswersHttp(fixture->port_, deadline)) {
    if (Clock::now() >= deadline) {
      return Unavailable("the S3 stand-in does not answer on port " +
                         std::to_string(fixture->port_) + "; its log:\n" + fixture->Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return fixture;
}

S3Fixture::~S3Fixture() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string S3Fixture::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::string S3Fixture::Log() const {
  std::ifstream in(log_path_);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void S3Fixture::SetEnvironment(const std::string& endpoint) const {
  ::setenv("AWS_ACCESS_KEY_ID", kAccessKey, 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", kSecretKey, 1);
  ::setenv("AWS_REGION", kRegion, 1);
  ::setenv("AWS_ENDPOINT_URL_S3", (endpoint.empty() ? this->endpoint() : endpoint).c_str(), 1);
  ::unsetenv("AWS_ENDPOINT_URL");
  ::unsetenv("AWS_SESSION_TOKEN");
  ::unsetenv("AWS_DEFAULT_REGION");
}

}  // namespace kvc::testutil
