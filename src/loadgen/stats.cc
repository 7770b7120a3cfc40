#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>

namespace kvc::loadgen {
namespace {

constexpr double kNsPerMs = 1e6;

// The nearest-rank index of percentile `p` (0 < p <= 1) among n sorted samples.
size_t RankIndex(double p, size_t n) {
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  return std::clamp<size_t>(rank, 1, n) - 1;
}

}  // namespace

LatencySummary Summarize(std::vector<uint64_t>* samples_ns) {
  LatencySummary out;
  std::vector<uint64_t>& s = *samples_ns;
  out.count = s.size();
  if (s.empty()) return out;
  long double sum = 0;
  for (uint64_t v : s) sum += static_cast<long double>(v);
  out.mean_ms = static_cast<double>(sum / static_cast<long double>(s.size())) / kNsPerMs;
  // Ascending percentiles: each nth_element only needs the part above the previous one.
  const double ps[] = {0.5, 0.9, 0.99, 0.999};
  double* outs[] = {&out.p50_ms, &out.p90_ms, &out.p99_ms, &out.p999_ms};
  auto begin = s.begin();
  for (size_t i = 0; i < std::size(ps); ++i) {
    const auto nth = s.begin() + static_cast<std::ptrdiff_t>(RankIndex(ps[i], s.size()));
    std::nth_element(begin, nth, s.end());
    *outs[i] = static_cast<double>(*nth) / kNsPerMs;
    begin = nth;
  }
  out.max_ms = static_cast<double>(*std::max_element(begin, s.end())) / kNsPerMs;
  return out;
}

void ErrorCounts::Add(std::string_view kind, std::string_view text) {
  ++total_;
  ++by_kind_[std::string(kind)];
  AddSample(text);
}

void ErrorCounts::Merge(const ErrorCounts& other) {
  total_ += other.total_;
  for (const auto& [kind, n] : other.by_kind_) by_kind_[kind] += n;
  for (const std::string& text : other.samples_) AddSample(text);
}

void ErrorCounts::AddSample(std::string_view text) {
  if (samples_.size() >= kMaxSamples) return;
  std::string cut(text.substr(0, kMaxTextBytes));
  if (std::find(samples_.begin(), samples_.end(), cut) == samples_.end()) {
    samples_.push_back(std::move(cut));
  }
}

}  // namespace kvc::loadgen
