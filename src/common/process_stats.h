// This process's resource use as the kernel reports it in /proc (Linux), for the standard
// Prometheus `process_*` metrics: CPU time, resident and virtual memory, open and allowed file
// descriptors, and the start time. The parsers are pure, so tests feed them any text.
//
// Thread-safety: free functions without shared state; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvc {

// The fields of /proc/<pid>/stat we use (proc(5)), in the kernel's units.
struct ProcStat {
  uint64_t utime_ticks = 0;      // field 14: user CPU time, clock ticks
  uint64_t stime_ticks = 0;      // field 15: system CPU time, clock ticks
  uint64_t starttime_ticks = 0;  // field 22: start, clock ticks after boot
  uint64_t vsize_bytes = 0;      // field 23: virtual memory size
  int64_t rss_pages = 0;         // field 24: resident set size, pages
};

// Parses the text of /proc/<pid>/stat; nullopt if it is not that. The command name (field 2,
// in parentheses) may hold spaces and parentheses itself: fields are counted after its last ')'.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// The `btime` line of /proc/stat: boot time in seconds since the Unix epoch; nullopt if absent.
std::optional<int64_t> ParseBootTime(std::string_view proc_stat);

struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  int64_t open_fds = -1;          // -1: unknown
  int64_t max_fds = -1;           // the soft RLIMIT_NOFILE; -1: unknown or unlimited
  double start_time_seconds = 0;  // Unix time; 0: unknown
};

// Reads this process's figures; nullopt where /proc is missing (not Linux, or not mounted).
std::optional<ProcessStats> ReadProcessStats();

}  // namespace kvc
