// QueueMetrics: the kvconnect_queue_* families (per database: undelivered messages, dead
// letters, consumers, delivery events), read from each open database's queue (queue/queue.h)
// at every scrape. A MetricsCollector (service/ops/metrics_collector.h), registered by the
// application, so Metrics knows nothing of queues.
//
// Ownership: does not own the directory, which must outlive it.
// Thread-safety: thread-safe (reads the directory's snapshot and the queues' atomic counters).
#pragma once

#include <vector>

#include "service/directory.h"
#include "service/ops/metrics_collector.h"

namespace kvc::service {

class QueueMetrics : public MetricsCollector {
 public:
  explicit QueueMetrics(const Directory* directory) : directory_(directory) {}
  void Collect(std::vector<ScrapedFamily>* out) const override;

 private:
  const Directory* const directory_;
};

}  // namespace kvc::service
