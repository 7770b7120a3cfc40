// CacheBudgetMetrics: the read caches' shared budget (engine/cache_budget.h, `serve
// --read-cache-total`) as server-wide gauges: its size and what all databases' caches are
// charged together. Each database's own figures are Metrics' per-database families
// (kvconnect_read_cache_bytes, kvconnect_read_cache_limit_bytes).
//
// Ownership: shares the budget with the engines. Thread-safety: Collect reads atomics only.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "engine/cache_budget.h"
#include "service/ops/metrics_collector.h"

namespace kvc::service {

class CacheBudgetMetrics : public MetricsCollector {
 public:
  explicit CacheBudgetMetrics(std::shared_ptr<const engine::CacheBudget> budget)
      : budget_(std::move(budget)) {}

  void Collect(std::vector<ScrapedFamily>* out) const override {
    ScrapedFamily total = ScrapedFamily::Gauge(
        "kvconnect_read_cache_total_bytes",
        "The memory the read caches of all databases share (--read-cache-total)");
    total.Add(static_cast<double>(budget_->bytes()));
    out->push_back(std::move(total));
    ScrapedFamily used =
        ScrapedFamily::Gauge("kvconnect_read_cache_total_used_bytes",
                             "Bytes the read caches of all databases are charged together");
    used.Add(static_cast<double>(budget_->used()));
    out->push_back(std::move(used));
  }

 private:
  const std::shared_ptr<const engine::CacheBudget> budget_;
};

}  // namespace kvc::service
