#include "testutil/webhook_receiver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace kvc::testutil {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

#ifndef KVC_NODE_EXECUTABLE
#define KVC_NODE_EXECUTABLE ""
#endif

constexpr int kPollMs = 100;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
constexpr std::chrono::seconds kNodeStartTimeout{60};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 302:
      return "Found";
    case 401:
      return "Unauthorized";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

// Parses "METHOD TARGET HTTP/1.1\r\nName: value\r\n...\r\n\r\n" (without the body).
bool ParseHead(const std::string& head, ReceivedRequest* out) {
  std::istringstream in(head);
  std::string line;
  if (!std::getline(in, line)) return false;
  std::istringstream first(line);
  first >> out->method >> out->target;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return false;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    out->headers[Lower(line.substr(0, colon))] = value;
  }
  return !out->method.empty();
}

void SendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client is gone (e.g. it timed out)
    done += static_cast<size_t>(n);
  }
}

int RemainingMs(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

}  // namespace

Result<std::unique_ptr<WebhookReceiver>> WebhookReceiver::Start(Handler handler) {
  std::unique_ptr<WebhookReceiver> r(new WebhookReceiver());
  r->handler_ = std::move(handler);
  r->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (r->listen_fd_ < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(r->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(r->listen_fd_, SOMAXCONN) != 0 ||
      ::getsockname(r->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return IoError(std::string("webhook receiver cannot listen: ") + std::strerror(errno));
  }
  r->port_ = ntohs(addr.sin_port);
  r->acceptor_ = std::thread([raw = r.get()] { raw->AcceptLoop(); });
  return r;
}

WebhookReceiver::~WebhookReceiver() {
  std::vector<std::thread> workers;
  {
    MutexLock lock(mu_);
    stop_ = true;
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  stop_cv_.NotifyAll();
  if (acceptor_.joinable()) acceptor_.join();
  {
    MutexLock lock(mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string WebhookReceiver::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/hook";
}

std::vector<ReceivedRequest> WebhookReceiver::requests() const {
  MutexLock lock(mu_);
  return requests_;
}

size_t WebhookReceiver::request_count() const {
  MutexLock lock(mu_);
  return requests_.size();
}

int WebhookReceiver::max_concurrent() const {
  MutexLock lock(mu_);
  return max_concurrent_;
}

void WebhookReceiver::AcceptLoop() {
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stop_) return;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    MutexLock lock(mu_);
    if (stop_) {
      ::close(fd);
      return;
    }
    open_fds_.insert(fd);
    workers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void WebhookReceiver::Serve(int fd) {
  std::string buffer;
  char chunk[4096];
  for (;;) {
    // One request: the head, then Content-Length bytes of body.
    size_t head_end = std::string::npos;
    size_t body_len = 0;
    ReceivedRequest request;
    bool complete = false;
    for (;;) {
      if (head_end == std::string::npos) {
        head_end = buffer.find("\r\n\r\n");
        if (head_end != std::string::npos) {
          if (!ParseHead(buffer.substr(0, head_end + 2), &request)) break;
          auto it = request.headers.find("content-length");
          body_len = it == request.headers.end() ? 0 : std::stoul(it->second);
        } else if (buffer.size() > kMaxHeaderBytes) {
          break;
        }
      }
      if (head_end != std::string::npos && buffer.size() >= head_end + 4 + body_len) {
        complete = true;
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, kPollMs);
      {
        MutexLock lock(mu_);
        if (stop_) break;
      }
      if (ready <= 0) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
    }
    if (!complete) break;
    request.body = buffer.substr(head_end + 4, body_len);
    buffer.erase(0, head_end + 4 + body_len);
    {
      MutexLock lock(mu_);
      requests_.push_back(request);
      max_concurrent_ = std::max(max_concurrent_, ++concurrent_);
    }
    const ReceiverReply reply = handler_(request);
    bool stopped = false;
    {
      MutexLock lock(mu_);
      const auto until = SteadyClock::now() + std::chrono::milliseconds(reply.delay_ms);
      while (!stop_ && SteadyClock::now() < until) stop_cv_.WaitUntil(mu_, until);
      stopped = stop_;
    }
    if (!stopped) {
      std::string answer =
          "HTTP/1.1 " + std::to_string(reply.status) + " " + Reason(reply.status) + "\r\n";
      for (const auto& [name, value] : reply.headers) answer += name + ": " + value + "\r\n";
      answer += "Content-Length: 0\r\n\r\n";
      SendAll(fd, answer);
    }
    {
      MutexLock lock(mu_);
      --concurrent_;
    }
    if (stopped) break;
  }
  MutexLock lock(mu_);
  open_fds_.erase(fd);
  ::close(fd);
}

Result<std::unique_ptr<NodeWebhookReceiver>> NodeWebhookReceiver::Start(
    const std::vector<std::string>& secrets) {
  const std::string source_dir = KVC_SOURCE_DIR;
  const std::string node = KVC_NODE_EXECUTABLE;
  const std::string e2e_dir = source_dir + "/tests/e2e";
  const std::string package = e2e_dir + "/node_modules/standardwebhooks/package.json";
  const std::string script = e2e_dir + "/push_receiver.mjs";
  if (node.empty() || ::access(node.c_str(), X_OK) != 0) {
    return NotFound("the Node webhook receiver needs Node, which CMake did not find ('" + node +
                    "'): install Node and re-run cmake");
  }
  if (::access(package.c_str(), R_OK) != 0) {
    return NotFound(
        "npm package standardwebhooks is not installed: run `npm ci` in tests/e2e "
        "(missing " +
        package + ")");
  }
  std::unique_ptr<NodeWebhookReceiver> r(new NodeWebhookReceiver());
  std::string log_template = (fs::temp_directory_path() / "kvc-push-receiver-XXXXXX").string();
  const int log_fd = ::mkstemp(log_template.data());
  if (log_fd < 0) return IoError(std::string("mkstemp: ") + std::strerror(errno));
  r->log_path_ = log_template;
  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
    ::close(log_fd);
    return IoError(std::string("pipe2: ") + std::strerror(errno));
  }
  r->stdin_fd_ = in_pipe[1];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(log_fd);
    return IoError(std::string("pipe2: ") + std::strerror(errno));
  }
  r->stdout_fd_ = out_pipe[0];
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  std::vector<std::string> args = {node, script, "0"};
  args.insert(args.end(), secrets.begin(), secrets.end());
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
  r->pid_ = pid;

  // The receiver prints "listening PORT" once it accepts connections.
  const auto deadline = SteadyClock::now() + kNodeStartTimeout;
  std::string out;
  while (out.find('\n') == std::string::npos) {
    pollfd p{r->stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, RemainingMs(deadline)) <= 0) {
      return Unavailable("the Node webhook receiver did not start; its log:\n" + r->Log());
    }
    char buffer[256];
    const ssize_t n = ::read(r->stdout_fd_, buffer, sizeof buffer);
    if (n <= 0) return Unavailable("the Node webhook receiver exited; its log:\n" + r->Log());
    out.append(buffer, static_cast<size_t>(n));
  }
  std::istringstream line(out);
  std::string word;
  line >> word >> r->port_;
  if (word != "listening" || r->port_ <= 0) {
    return Unavailable("the Node webhook receiver said '" + out + "'; its log:\n" + r->Log());
  }
  return r;
}

NodeWebhookReceiver::~NodeWebhookReceiver() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

std::string NodeWebhookReceiver::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/hook";
}

std::string NodeWebhookReceiver::Log() const {
  std::ifstream in(log_path_);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kvc::testutil
