#include "common/process_stats.h"

#include <sys/resource.h>
#include <unistd.h>

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

}  // namespace kvc
