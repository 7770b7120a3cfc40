#include "common/process_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kvc {
namespace {

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos || text.find('(') > close) return std::nullopt;
  // Fields after the command name, space-separated; the first is field 3 (state).
  std::vector<std::string_view> fields;
  size_t i = close + 1;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n') ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  auto field = [&](size_t n) { return fields[n - 3]; };
  if (fields.size() < 24 - 2) return std::nullopt;
  ProcStat s;
  if (!ParseNumber(field(14), &s.utime_ticks) || !ParseNumber(field(15), &s.stime_ticks) ||
      !ParseNumber(field(22), &s.starttime_ticks) || !ParseNumber(field(23), &s.vsize_bytes) ||
      !ParseNumber(field(24), &s.rss_pages)) {
    return std::nullopt;
  }
  return s;
}

std::optional<int64_t> ParseBootTime(std::string_view proc_stat) {
  constexpr std::string_view kKey = "btime ";
  size_t at = 0;
  while (at < proc_stat.size()) {
    size_t eol = proc_stat.find('\n', at);
    if (eol == std::string_view::npos) eol = proc_stat.size();
    const std::string_view line = proc_stat.substr(at, eol - at);
    if (line.substr(0, kKey.size()) == kKey) {
      int64_t v = 0;
      if (ParseNumber(line.substr(kKey.size()), &v)) return v;
      return std::nullopt;
    }
    at = eol + 1;
  }
  return std::nullopt;
}

std::optional<ProcessStats> ReadProcessStats() {
  const std::optional<std::string> stat_text = ReadFile("/proc/self/stat");
  if (!stat_text) return std::nullopt;
  const std::optional<ProcStat> st = ParseProcStat(*stat_text);
  if (!st) return std::nullopt;
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  ProcessStats out;
  if (ticks > 0) {
    out.cpu_seconds =
        static_cast<double>(st->utime_ticks + st->stime_ticks) / static_cast<double>(ticks);
  }
  out.resident_bytes = st->rss_pages * (page > 0 ? page : 4096);
  out.virtual_bytes = static_cast<int64_t>(st->vsize_bytes);
  if (const std::optional<std::string> boot = ReadFile("/proc/stat"); boot && ticks > 0) {
    if (const std::optional<int64_t> btime = ParseBootTime(*boot)) {
      out.start_time_seconds =
          static_cast<double>(*btime) +
          static_cast<double>(st->starttime_ticks) / static_cast<double>(ticks);
    }
  }
  std::error_code ec;
  int64_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) out.open_fds = fds;
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    out.max_fds = static_cast<int64_t>(nofile.rlim_cur);
  }
  return out;
}

std::optional<uint64_t> ParseCgroupMemoryLimit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t bytes = 0;
  if (!ParseNumber(text, &bytes)) return std::nullopt;  // "max", or not a limit file
  return bytes;
}

std::optional<std::string> ParseCgroupPath(std::string_view proc_self_cgroup,
                                           std::string_view controller) {
  size_t at = 0;
  while (at < proc_self_cgroup.size()) {
    size_t eol = proc_self_cgroup.find('\n', at);
    if (eol == std::string_view::npos) eol = proc_self_cgroup.size();
    const std::string_view line = proc_self_cgroup.substr(at, eol - at);
    at = eol + 1;
    // HIERARCHY:CONTROLLERS:PATH; cgroup v2 is hierarchy 0 with no controllers.
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos || c2 + 1 >= line.size() || line[c2 + 1] != '/') continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    bool match = controller.empty() && line.substr(0, c1) == "0" && controllers.empty();
    for (size_t from = 0; !controller.empty() && !match && from <= controllers.size();) {
      size_t comma = controllers.find(',', from);
      if (comma == std::string_view::npos) comma = controllers.size();
      match = controllers.substr(from, comma - from) == controller;
      from = comma + 1;
    }
    if (match) return std::string(line.substr(c2 + 1));
  }
  return std::nullopt;
}

uint64_t MemoryLimitBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  uint64_t limit = pages > 0 && page_size > 0
                       ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                       : 0;
  const std::optional<std::string> cgroups = ReadFile("/proc/self/cgroup");
  if (!cgroups) return limit;
  // The limit file of the process's cgroup and of each one above it, under a mount point: the
  // tightest binds. Inside a container the cgroup namespace makes its own cgroup the root.
  auto lower_along = [&](std::optional<std::string> path, const std::string& mount,
                         const char* file) {
    while (path) {
      const std::string dir = mount + (*path == "/" ? std::string() : *path);
      const std::optional<std::string> text = ReadFile((dir + "/" + file).c_str());
      const std::optional<uint64_t> bytes = text ? ParseCgroupMemoryLimit(*text) : std::nullopt;
      if (bytes && *bytes > 0 && (limit == 0 || *bytes < limit)) limit = *bytes;
      if (*path == "/") break;
      path->erase(std::max<size_t>(path->rfind('/'), 1));
    }
  };
  const std::optional<std::string> v2 = ParseCgroupPath(*cgroups, "");
  lower_along(v2, "/sys/fs/cgroup", "memory.max");          // a cgroup v2 system
  lower_along(v2, "/sys/fs/cgroup/unified", "memory.max");  // hybrid: v2 beside v1
  lower_along(ParseCgroupPath(*cgroups, "memory"), "/sys/fs/cgroup/memory",
              "memory.limit_in_bytes");  // cgroup v1
  return limit;
}

}  // namespace kvc
