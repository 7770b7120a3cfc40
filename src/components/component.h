// Component: a subsystem the application attaches at its composition root (cli/application.cc)
// without the application, the engine or the metrics knowing its types. Continuous backup
// shipping, queue push delivery and this node's entry in the node registry are components; a new
// one is a folder under components/ with a class implementing this interface plus one line where
// the application makes its components (Application::MakeComponents). It is to the server what
// engine/commit_listener.h is to the engine.
//
// Life cycle, each call once, from the application's controlling thread:
//   Wire(wiring)  while the server is assembled, before any database opens: the component
//                 adjusts the options engines and the KV Connect service are made with, and
//                 registers in `wiring` what the application should call (engine hooks, metrics
//                 collectors, /readyz detail lines, drain hooks). An error refuses to start the
//                 server (InvalidArgument for a bad option: exit code 2).
//   Start(ctx)    once every listener is bound (so the node registry can advertise the URL), in
//                 the order the components were made.
//   Stop()        on shutdown, after the listeners closed and before the engines shut down, in
//                 the reverse order; also when Start never ran. Idempotent. An engine hook may
//                 still run afterwards (a database opening while the directory stops): it must
//                 then do nothing lasting.
//
// Ownership: the application owns its components and keeps them alive until the directory and
// the metrics that call what they registered are gone.
// Thread-safety: Wire, Start and Stop from one thread; what a component registers is called on
// other threads (engine hooks on the directory's thread, collectors on scraping threads) and
// must be thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "service/directory.h"
#include "service/kvconnect/kv_service.h"
#include "service/ops/metrics_collector.h"
#include "storage/storage.h"

namespace kvc::components {

// What a component sees and registers while the server is assembled.
struct Wiring {
  // The open storage (secrets, scratch directory, node registry) and what it was opened with.
  storage::Storage* storage = nullptr;
  const storage::StorageOptions* storage_options = nullptr;
  // Options the application has not used yet: every database's engine, the KV Connect service.
  engine::EngineOptions* engine = nullptr;
  service::ServiceOptions* service = nullptr;

  // Called as each database's engine opens (service::Directory::AddEngineHook).
  std::vector<service::Directory::EngineHook> engine_hooks;
  // Read at every /metrics scrape, in this order.
  std::vector<const service::MetricsCollector*> collectors;
  // Lines /readyz adds to its answer (e.g. the backup lag).
  std::vector<std::function<std::vector<std::string>()>> ready_details;
  // Called when shutdown begins (readiness answers 503), before the drain period and before the
  // listeners close: e.g. leave the node registry so other nodes stop listing this one.
  std::vector<std::function<void()>> drain_hooks;
};

// What a component learns when the server has started.
struct Started {
  std::string url;  // the main listener, e.g. http://127.0.0.1:4512
};

class Component {
 public:
  virtual ~Component() = default;
  // A short name for logs and errors ("backup shipping").
  virtual const char* name() const = 0;
  virtual Status Wire(Wiring& wiring) = 0;
  virtual Status Start(const Started& started) = 0;
  virtual void Stop() = 0;
};

}  // namespace kvc::components
