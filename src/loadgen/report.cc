// Workload names, option validation and the two report formats of loadgen/bench.h.
#include <cmath>
#include <cstdio>
#include <string>

#include "codec/json_text.h"
#include "loadgen/bench.h"
#include "loadgen/plan.h"

namespace kvc::loadgen {
namespace {

constexpr std::string_view kWorkloadNames[] = {"get", "set",   "cas",  "list",
                                               "sum", "mixed", "watch"};

// The largest V8 one-byte string whose serialization (header, tag, varint length) still fits
// the server's 65,536-byte value limit.
constexpr int kMaxValueSize = 65536 - 2 - 1 - 3;

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string JsonLatency(const LatencySummary& l) {
  return "{\"count\":" + std::to_string(l.count) + ",\"mean\":" + Fixed(l.mean_ms, 4) +
         ",\"p50\":" + Fixed(l.p50_ms, 4) + ",\"p90\":" + Fixed(l.p90_ms, 4) +
         ",\"p99\":" + Fixed(l.p99_ms, 4) + ",\"p999\":" + Fixed(l.p999_ms, 4) +
         ",\"max\":" + Fixed(l.max_ms, 4) + "}";
}

std::string TextLatency(const LatencySummary& l) {
  return "p50 " + Fixed(l.p50_ms, 3) + "  p90 " + Fixed(l.p90_ms, 3) + "  p99 " +
         Fixed(l.p99_ms, 3) + "  p99.9 " + Fixed(l.p999_ms, 3) + "  max " + Fixed(l.max_ms, 3) +
         "  (mean " + Fixed(l.mean_ms, 3) + ", " + std::to_string(l.count) + " samples)";
}

void Row(std::string* out, std::string_view label, const std::string& value) {
  std::string line = "  " + std::string(label);
  if (line.size() < 22) line.resize(22, ' ');
  *out += line + value + "\n";
}

}  // namespace

std::string_view WorkloadName(Workload w) { return kWorkloadNames[static_cast<int>(w)]; }

std::optional<Workload> ParseWorkload(std::string_view name) {
  for (size_t i = 0; i < std::size(kWorkloadNames); ++i) {
    if (kWorkloadNames[i] == name) return static_cast<Workload>(i);
  }
  return std::nullopt;
}

Status ValidateOptions(const BenchOptions& o) {
  if (o.token.empty()) {
    return InvalidArgument("no access token: pass --token or set DENO_KV_ACCESS_TOKEN");
  }
  if (o.connections < 1) return InvalidArgument("--connections must be at least 1");
  if (o.streams < 1) return InvalidArgument("--streams must be at least 1");
  if (o.threads < 0) return InvalidArgument("--threads must not be negative");
  if (!(o.duration_s > 0) || o.duration_s > 1e6) {
    return InvalidArgument("--duration must be a positive number of seconds");
  }
  if (!(o.warmup_s >= 0) || o.warmup_s > 1e6) {
    return InvalidArgument("--warmup must be zero or a positive number of seconds");
  }
  if (o.keys < 1) return InvalidArgument("--keys must be at least 1");
  if (o.workload == Workload::kList && o.keys < kListSize) {
    return InvalidArgument("the list workload reads 100 keys at a time: --keys must be >= 100");
  }
  if (o.value_size < 0 || o.value_size > kMaxValueSize) {
    return InvalidArgument("--value-size must be between 0 and " + std::to_string(kMaxValueSize));
  }
  if (o.hot_keys < 1) return InvalidArgument("--hot-keys must be at least 1");
  if (o.watchers < 1) return InvalidArgument("--watchers must be at least 1");
  if (o.watch_keys < 1) return InvalidArgument("--watch-keys must be at least 1");
  if (o.watch_interval_ms < 1) return InvalidArgument("--watch-interval-ms must be at least 1");
  if (o.timeout.count() < 1) return InvalidArgument("--timeout must be positive");
  if (!o.database.empty() && o.database.find_first_of("/?#% ") != std::string::npos) {
    return InvalidArgument("--db must be a plain database name or id");
  }
  return Status::Ok();
}

std::string FormatReportText(const BenchReport& r) {
  auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string out = "kvconnect bench: " + r.workload + " over " + r.protocol + ", " +
                    count(r.connections, "connection", "connections") + " x " +
                    std::to_string(r.streams) + " in flight, " +
                    count(r.threads, "thread", "threads") + "\n";
  Row(&out, "url", r.url);
  Row(&out, "endpoint",
      r.endpoint + " (protocol version " + std::to_string(r.protocol_version) + ")");
  Row(&out, "window",
      Fixed(r.seconds, 3) + " s (asked " + Fixed(r.duration_s, 3) + " s after " +
          Fixed(r.warmup_s, 3) + " s of warm-up)");
  Row(&out, r.watch ? "frames" : "ops", std::to_string(r.ops));
  Row(&out, r.watch ? "frames/s" : "ops/s", Fixed(r.ops_per_s, 1));
  Row(&out, r.watch ? "change->frame ms" : "latency ms", TextLatency(r.latency));
  std::string errors = std::to_string(r.errors.total());
  if (r.errors.total() > 0) {
    errors += " (";
    bool first = true;
    for (const auto& [kind, n] : r.errors.by_kind()) {
      errors += (first ? "" : ", ") + kind + " " + std::to_string(n);
      first = false;
    }
    errors += ")";
  }
  Row(&out, "errors", errors);
  if (r.workload == "cas") Row(&out, "conflicts", std::to_string(r.conflicts));
  if (r.misses > 0) Row(&out, "misses", std::to_string(r.misses));
  if (r.sum) {
    const SumCheck& s = *r.sum;
    const std::string unknown =
        s.unknown > 0 ? ", " + std::to_string(s.unknown) + " with unknown outcome" : "";
    if (s.final_read) {
      Row(&out, "sum check",
          std::string(s.ok ? "ok" : "MISMATCH") + ": counter " + std::to_string(s.start) + " -> " +
              std::to_string(s.final_value) + ", " + std::to_string(s.successes) +
              " sums acknowledged" + unknown);
    } else {
      Row(&out, "sum check",
          "NOT DONE: the counter could not be read back (" + std::to_string(s.successes) +
              " sums acknowledged" + unknown + ")");
    }
  }
  if (r.watch) {
    const WatchSummary& w = *r.watch;
    Row(&out, "watchers open",
        std::to_string(w.watchers_open) + " of " + std::to_string(w.watchers));
    Row(&out, "writes", std::to_string(w.writes));
  }
  return out;
}

std::string FormatReportJson(const BenchReport& r) {
  std::string out = "{";
  out += "\"workload\":" + codec::JsonQuote(r.workload);
  out += ",\"protocol\":" + codec::JsonQuote(r.protocol);
  out += ",\"url\":" + codec::JsonQuote(r.url);
  out += ",\"endpoint\":" + codec::JsonQuote(r.endpoint);
  out += ",\"protocol_version\":" + std::to_string(r.protocol_version);
  out += ",\"connections\":" + std::to_string(r.connections);
  out += ",\"streams\":" + std::to_string(r.streams);
  out += ",\"threads\":" + std::to_string(r.threads);
  out += ",\"duration_s\":" + Fixed(r.duration_s, 3);
  out += ",\"warmup_s\":" + Fixed(r.warmup_s, 3);
  out += ",\"seconds\":" + Fixed(r.seconds, 4);
  out += ",\"ops\":" + std::to_string(r.ops);
  out += ",\"ops_per_s\":" + Fixed(r.ops_per_s, 2);
  out += ",\"latency_ms\":" + JsonLatency(r.latency);
  out += ",\"errors\":{\"total\":" + std::to_string(r.errors.total()) + ",\"by_kind\":{";
  bool first = true;
  for (const auto& [kind, n] : r.errors.by_kind()) {
    out += (first ? "" : ",") + codec::JsonQuote(kind) + ":" + std::to_string(n);
    first = false;
  }
  out += "},\"samples\":[";
  first = true;
  for (const std::string& text : r.errors.samples()) {
    out += (first ? "" : ",") + codec::JsonQuote(text);
    first = false;
  }
  out += "]}";
  out += ",\"conflicts\":" + std::to_string(r.conflicts);
  out += ",\"misses\":" + std::to_string(r.misses);
  if (r.sum) {
    const SumCheck& s = *r.sum;
    out += ",\"sum_check\":{\"ok\":" + std::string(s.ok ? "true" : "false") +
           ",\"start\":" + std::to_string(s.start) +
           ",\"successes\":" + std::to_string(s.successes) +
           ",\"unknown\":" + std::to_string(s.unknown) +
           ",\"final\":" + (s.final_read ? std::to_string(s.final_value) : "null") + "}";
  } else {
    out += ",\"sum_check\":null";
  }
  if (r.watch) {
    const WatchSummary& w = *r.watch;
    out += ",\"watch\":{\"watchers\":" + std::to_string(w.watchers) +
           ",\"watchers_open\":" + std::to_string(w.watchers_open) +
           ",\"frames\":" + std::to_string(w.frames) + ",\"writes\":" + std::to_string(w.writes) +
           ",\"change_to_frame_ms\":" + JsonLatency(w.latency) + "}";
  } else {
    out += ",\"watch\":null";
  }
  out += ",\"ok\":" + std::string(r.ok() ? "true" : "false");
  out += "}";
  return out;
}

}  // namespace kvc::loadgen
