// This process's resource use as the kernel reports it in /proc (Linux), for the standard
// Prometheus `process_*` metrics: CPU time, resident and virtual memory, open and allowed file
// descriptors, and the start time. The parsers are pure, so tests feed them any text.
//
// Thread-safety: free functions without shared state; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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

// The text of a cgroup memory limit file (v2 `memory.max`: bytes or "max"; v1
// `memory.limit_in_bytes`: bytes, a huge number when unlimited): the limit in bytes, or nullopt
// for "max" and for text that is not a number.
std::optional<uint64_t> ParseCgroupMemoryLimit(std::string_view text);
// This process's cgroup path from the text of /proc/self/cgroup: of the cgroup v1 hierarchy
// with `controller` (e.g. "memory"), or, for an empty `controller`, of cgroup v2 (the
// "0::/PATH" line); nullopt if there is none.
std::optional<std::string> ParseCgroupPath(std::string_view proc_self_cgroup,
                                           std::string_view controller);
// The memory this process may use: the machine's physical memory, or less when a cgroup (a
// container, a systemd MemoryMax=) limits it: the lowest limit of its cgroup v2 and the cgroups
// above it, or its cgroup v1 memory limit. 0 if unknown.
uint64_t MemoryLimitBytes();

}  // namespace kvc
