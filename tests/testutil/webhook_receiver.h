// Receivers for push delivery tests (queue/push.h).
//
// WebhookReceiver: a tiny HTTP/1.1 server on 127.0.0.1 (a port the kernel picks) that records
// every request (method, target, headers, body) and answers what a handler says, optionally
// after a delay (a slow receiver). It counts the requests being handled at once and the most
// seen, so a test can check a concurrency limit. One thread per connection, keep-alive
// honoured, bodies framed by Content-Length only (what libcurl sends for a POST).
//
// NodeWebhookReceiver: tests/e2e/push_receiver.mjs under Node, which verifies each request with
// the npm package `standardwebhooks` (an implementation independent of ours) and answers 204
// (valid) or 401 (not). Start fails with NotFound if Node or the package is missing (`npm ci`
// in tests/e2e), so a test can skip and say why.
//
// Ownership: each owns its sockets, threads or process; the destructor stops and joins them
// (a delayed answer is cut short), or kills and reaps the process.
// Thread-safety: all const methods are thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace kvc::testutil {

struct ReceivedRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
};

struct ReceiverReply {
  int status = 204;
  std::vector<std::pair<std::string, std::string>> headers;
  int delay_ms = 0;  // before answering
};

class WebhookReceiver {
 public:
  using Handler = std::function<ReceiverReply(const ReceivedRequest&)>;

  // REQUIRES: handler is thread-safe (it runs on connection threads).
  static Result<std::unique_ptr<WebhookReceiver>> Start(Handler handler);
  ~WebhookReceiver();
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT/hook".
  std::string url() const;
  std::vector<ReceivedRequest> requests() const;
  size_t request_count() const;
  int max_concurrent() const;

 private:
  WebhookReceiver() = default;
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;

  mutable Mutex mu_;
  CondVar stop_cv_;
  bool stop_ KVC_GUARDED_BY(mu_) = false;
  std::vector<ReceivedRequest> requests_ KVC_GUARDED_BY(mu_);
  int concurrent_ KVC_GUARDED_BY(mu_) = 0;
  int max_concurrent_ KVC_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_ KVC_GUARDED_BY(mu_);
  std::set<int> open_fds_ KVC_GUARDED_BY(mu_);
};

class NodeWebhookReceiver {
 public:
  // Verifies with each of `secrets` ("whsec_..."): a request passes if one of them matches.
  // Errors: NotFound (Node or standardwebhooks missing), Unavailable (did not start), IoError.
  static Result<std::unique_ptr<NodeWebhookReceiver>> Start(
      const std::vector<std::string>& secrets);
  ~NodeWebhookReceiver();
  NodeWebhookReceiver(const NodeWebhookReceiver&) = delete;
  NodeWebhookReceiver& operator=(const NodeWebhookReceiver&) = delete;

  // "http://127.0.0.1:PORT/hook".
  std::string url() const;
  // What the receiver printed to stderr (one line per request: "ok ID" or "refused: WHY").
  std::string Log() const;

 private:
  NodeWebhookReceiver() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;  // closing it ends the receiver
  int stdout_fd_ = -1;
  int port_ = 0;
  std::string log_path_;
};

}  // namespace kvc::testutil
