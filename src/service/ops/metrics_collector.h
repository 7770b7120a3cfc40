// MetricsCollector: a source of metric families read at every scrape of /metrics
// (service/ops/metrics.h). Metrics itself knows only what every server has (HTTP requests, commits,
// connections, each database's engine, this process); a subsystem with figures of its own (queue
// delivery, continuous backup, the node registry) registers a collector instead of Metrics
// learning its types, as an engine listener attaches through engine/commit_listener.h.
//
// A collector builds ScrapedFamily values: plain data, so a collector needs no Prometheus
// headers and a test can read what it made.
//
// Ownership: Metrics does not own its collectors; each must outlive the last scrape (stop the
// listeners first).
// Thread-safety: Collect is called on the scraping thread, concurrently with the collector's
// owner and with other scrapes; implementations read only thread-safe state.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvc::service {

// One metric family as a scrape reports it: name, HELP text, type and samples. Names, labels
// and HELP texts are an interface (dashboards and alerts query them): do not change them.
struct ScrapedFamily {
  enum class Type { kGauge, kCounter };
  using Labels = std::vector<std::pair<std::string, std::string>>;
  struct Sample {
    Labels labels;
    double value = 0;
  };

  std::string name;
  std::string help;
  Type type = Type::kGauge;
  std::vector<Sample> samples;

  static ScrapedFamily Gauge(std::string name, std::string help) {
    return {std::move(name), std::move(help), Type::kGauge, {}};
  }
  static ScrapedFamily Counter(std::string name, std::string help) {
    return {std::move(name), std::move(help), Type::kCounter, {}};
  }
  void Add(double value, Labels labels = {}) { samples.push_back({std::move(labels), value}); }
};

class MetricsCollector {
 public:
  virtual ~MetricsCollector() = default;
  // Appends this collector's families to `out` (a family with no samples still shows its HELP
  // and TYPE). Quick: no I/O, no waiting on other threads' work.
  virtual void Collect(std::vector<ScrapedFamily>* out) const = 0;
};

}  // namespace kvc::service
