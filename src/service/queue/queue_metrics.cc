#include "service/queue/queue_metrics.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "queue/queue.h"

namespace kvc::service {

void QueueMetrics::Collect(std::vector<ScrapedFamily>* out) const {
  auto undelivered =
      ScrapedFamily::Gauge("kvconnect_queue_undelivered",
                           "Queue messages not yet delivered for good (ready, delayed, leased)");
  auto dead =
      ScrapedFamily::Gauge("kvconnect_queue_dead_letters",
                           "Dead letters kept (queue messages out of retries), as last counted");
  auto consumers = ScrapedFamily::Gauge("kvconnect_queue_consumers",
                                        "Waiting pulls and subscribed queue consumers");
  auto events = ScrapedFamily::Counter("kvconnect_queue_events_total",
                                       "Queue deliveries and their outcomes, by event");
  const std::shared_ptr<const Directory::Snapshot> snap = directory_->snapshot();
  for (const auto& [id, db] : snap->by_id) {
    std::shared_ptr<queue::Queue> q = queue::Queue::QueueFor(*db.engine);
    if (!q) continue;
    const std::string& name = db.record.name;
    undelivered.Add(static_cast<double>(std::max<int64_t>(0, q->undelivered())),
                    {{"database", name}});
    dead.Add(static_cast<double>(std::max<int64_t>(0, q->dead_letters())), {{"database", name}});
    consumers.Add(static_cast<double>(q->consumers()), {{"database", name}});
    const queue::QueueCounters& qc = q->counters();
    const std::pair<const char*, const std::atomic<uint64_t>*> counts[] = {
        {"delivered", &qc.delivered}, {"acked", &qc.acked}, {"nacked", &qc.nacked},
        {"expired", &qc.expired},     {"dead", &qc.dead},   {"stale", &qc.stale}};
    for (const auto& [event, value] : counts) {
      events.Add(static_cast<double>(value->load()), {{"database", name}, {"event", event}});
    }
  }
  for (ScrapedFamily* f : {&undelivered, &dead, &consumers, &events}) {
    out->push_back(std::move(*f));
  }
}

}  // namespace kvc::service
