#include "components/queue_push/queue_push.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/clock.h"
#include "service/queue/queue_api.h"

namespace kvc::components {
namespace {

Result<std::pair<std::string, std::string>> SplitItem(const std::string& item, const char* flag) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
    return InvalidArgument(std::string(flag) + " takes NAME=VALUE, got '" + item + "'");
  }
  return std::make_pair(item.substr(0, eq), item.substr(eq + 1));
}

}  // namespace

Result<std::map<std::string, queue::PushOptions>> ParsePushFlags(const QueuePushFlags& f) {
  std::map<std::string, queue::PushOptions> out;
  for (const std::string& item : f.push) {
    KVC_ASSIGN_OR_RETURN(auto kv, SplitItem(item, "--queue-push"));
    queue::PushOptions& o = out[kv.first];
    o.url = kv.second;
    o.allow_hosts = f.allow;
    o.concurrency = f.concurrency;
    o.timeout_ms = f.timeout_ms;
    o.visibility_ms = std::max(o.visibility_ms, f.timeout_ms * 2);
    o.format = f.format;
  }
  for (const std::string& item : f.secrets) {
    KVC_ASSIGN_OR_RETURN(auto kv, SplitItem(item, "--queue-push-secret"));
    auto it = out.find(kv.first);
    if (it == out.end()) {
      return InvalidArgument("--queue-push-secret names database '" + kv.first +
                             "', which has no --queue-push URL");
    }
    it->second.secrets.push_back(kv.second);
  }
  for (const auto& [name, o] : out) {
    Status s = queue::ValidatePushOptions(o);
    if (!s.ok()) return InvalidArgument("push delivery of '" + name + "': " + s.message());
  }
  return out;
}

QueuePush::~QueuePush() { Stop(); }

Status QueuePush::Wire(Wiring& w) {
  KVC_ASSIGN_OR_RETURN(options_, ParsePushFlags(flags_));
  if (options_.empty()) return Status::Ok();
  w.engine_hooks.push_back(
      [this](const storage::DatabaseRecord& rec, const std::shared_ptr<engine::Engine>& e) {
        auto it = options_.find(rec.name);
        if (it != options_.end()) StartPush(rec.name, it->second, *e);
      });
  return Status::Ok();
}

Status QueuePush::Start(const Started& /*started*/) { return Status::Ok(); }

void QueuePush::StartPush(const std::string& name, const queue::PushOptions& options,
                          engine::Engine& engine) {
  std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(engine);
  if (!q) return;
  std::weak_ptr<queue::Queue> weak = q;  // the queue holds the dispatcher: no cycle
  const bool v8 = options.format == "v8";
  auto d = queue::PushDispatcher::Start(
      options,
      [weak](queue::SettleRequest r, queue::Queue::SettleCallback cb) {
        if (auto queue = weak.lock()) {
          queue->Settle(std::move(r), std::move(cb));
        } else {
          cb(Unavailable("The queue stopped."));
        }
      },
      [v8](const queue::Delivery& m) -> Result<std::string> {
        KVC_ASSIGN_OR_RETURN(std::string value, service::QueueValueOf(m.payload, v8));
        return queue::PushBody(m, value, NowUnixMs());
      });
  if (!d.ok()) {
    spdlog::error("push delivery of '{}' did not start: {}", name, d.status().ToString());
    return;
  }
  auto sub = q->Subscribe((*d)->consumer_options(), *d);
  if (!sub.ok()) {
    spdlog::error("push delivery of '{}' did not start: {}", name, sub.status().ToString());
    (*d)->Stop();
    return;
  }
  MutexLock lock(mu_);
  if (stopped_) {  // a database that opened while the server shuts down
    lock.Unlock();
    sub->reset();
    (*d)->Stop();
    return;
  }
  spdlog::info("pushing the queue of '{}' to {}", name, options.url);
  pushes_.push_back(Push{std::move(*d), std::move(*sub)});
}

void QueuePush::Stop() {
  std::vector<Push> pushes;
  {
    MutexLock lock(mu_);
    stopped_ = true;
    pushes.swap(pushes_);
  }
  for (Push& p : pushes) {
    p.subscription.reset();
    p.dispatcher->Stop();
  }
}

}  // namespace kvc::components
