// QueuePush: push delivery (`serve --queue-push NAME=URL`, docs/queues.md) as a component
// (components/component.h). Wire parses the flags into one queue::PushOptions per database
// (queue/push.h, the design of delivery itself) and registers an engine hook; each time a
// database that pushes opens, its queue gets a PushDispatcher as a subscribed consumer, whose
// bodies carry the message's value as KvValueJSON (or V8 bytes with --queue-push-format v8).
// Stop ends every dispatcher; a database that opens after Stop does not push.
//
// Ownership: owns the dispatchers and their subscriptions; a queue holds its dispatcher only
// weakly through the settle callback, so there is no cycle.
// Thread-safety: Wire/Start/Stop from the application's thread; the engine hook runs on the
// directory's thread and is thread-safe with Stop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "components/component.h"
#include "queue/push.h"
#include "queue/queue.h"

namespace kvc::components {

// What `serve --queue-push*` says (secrets from files and the environment already added).
struct QueuePushFlags {
  std::vector<std::string> push;     // NAME=URL
  std::vector<std::string> secrets;  // NAME=whsec_... (two for one NAME during a rotation)
  std::vector<std::string> allow;    // addresses or CIDRs push may reach although private
  size_t concurrency = 4;
  int64_t timeout_ms = 30000;
  std::string format = "json";
};

// The push options of every database that pushes, by name. Errors: InvalidArgument (an entry
// that is not NAME=VALUE, a secret for a database without a URL, an option ValidatePushOptions
// refuses, naming the database).
Result<std::map<std::string, queue::PushOptions>> ParsePushFlags(const QueuePushFlags& flags);

class QueuePush : public Component {
 public:
  explicit QueuePush(QueuePushFlags flags) : flags_(std::move(flags)) {}
  ~QueuePush() override;

  const char* name() const override { return "queue push"; }
  Status Wire(Wiring& wiring) override;
  Status Start(const Started& started) override;
  void Stop() override KVC_EXCLUDES(mu_);

 private:
  struct Push {
    std::shared_ptr<queue::PushDispatcher> dispatcher;
    std::unique_ptr<queue::Queue::Subscription> subscription;
  };
  // Starts pushing `name`'s queue (the engine hook).
  void StartPush(const std::string& name, const queue::PushOptions& options, engine::Engine& engine)
      KVC_EXCLUDES(mu_);

  const QueuePushFlags flags_;
  std::map<std::string, queue::PushOptions> options_;  // by database name; set by Wire
  Mutex mu_;
  std::vector<Push> pushes_ KVC_GUARDED_BY(mu_);
  bool stopped_ KVC_GUARDED_BY(mu_) = false;
};

}  // namespace kvc::components
