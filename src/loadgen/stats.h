// Measurements of a benchmark run: latency samples summarised into exact percentiles, and error
// counts by kind with the first few distinct error texts.
//
// Thread-safety: value types. The load generator keeps one set per I/O thread, touched only by
// that thread, and merges them after the threads stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::loadgen {

// Nearest-rank percentiles over every recorded sample, in milliseconds.
struct LatencySummary {
  uint64_t count = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  double max_ms = 0;
};

// Summarises `samples_ns` (nanoseconds). Reorders the vector. All zero when it is empty.
LatencySummary Summarize(std::vector<uint64_t>* samples_ns);

// Error counts by kind ("http_400", "transport", "decode", ...) and the first kMaxSamples
// distinct error texts.
class ErrorCounts {
 public:
  static constexpr size_t kMaxSamples = 5;
  static constexpr size_t kMaxTextBytes = 300;

  // Counts one error of `kind`; remembers `text` (cut to kMaxTextBytes) if it is new and there
  // is room.
  void Add(std::string_view kind, std::string_view text);
  void Merge(const ErrorCounts& other);

  uint64_t total() const { return total_; }
  const std::map<std::string, uint64_t>& by_kind() const { return by_kind_; }
  const std::vector<std::string>& samples() const { return samples_; }

 private:
  void AddSample(std::string_view text);

  uint64_t total_ = 0;
  std::map<std::string, uint64_t> by_kind_;
  std::vector<std::string> samples_;
};

}  // namespace kvc::loadgen
