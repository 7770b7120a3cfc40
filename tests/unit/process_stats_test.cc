// common/process_stats: the /proc parsers on texts of our own (a command name with spaces and
// parentheses, truncated and malformed lines), and ReadProcessStats on this very process.
#include "common/process_stats.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace kvc {
namespace {

// A /proc/<pid>/stat line: fields 1..52, with `comm` as field 2 and the given values for
// utime (14), stime (15), starttime (22), vsize (23) and rss (24).
std::string StatLine(const std::string& comm, const std::string& utime, const std::string& stime,
                     const std::string& start, const std::string& vsize, const std::string& rss) {
  std::string s = "4242 (" + comm + ") S";
  for (int field = 4; field <= 52; ++field) {
    std::string v = std::to_string(field * 10);
    if (field == 14) v = utime;
    if (field == 15) v = stime;
    if (field == 22) v = start;
    if (field == 23) v = vsize;
    if (field == 24) v = rss;
    s += " " + v;
  }
  return s + "\n";
}

TEST(ProcessStats, ParsesProcStat) {
  auto s = ParseProcStat(StatLine("kvconnect", "150", "25", "987654", "123456789", "2048"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->utime_ticks, 150u);
  EXPECT_EQ(s->stime_ticks, 25u);
  EXPECT_EQ(s->starttime_ticks, 987654u);
  EXPECT_EQ(s->vsize_bytes, 123456789u);
  EXPECT_EQ(s->rss_pages, 2048);
}

// A thread or program may name itself anything, ") 1 2 (" included: fields count from the
// last ')'.
TEST(ProcessStats, CommandNameWithSpacesAndParentheses) {
  auto s = ParseProcStat(StatLine("a b) 1 2 (c", "7", "8", "9", "10", "11"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->utime_ticks, 7u);
  EXPECT_EQ(s->stime_ticks, 8u);
  EXPECT_EQ(s->starttime_ticks, 9u);
  EXPECT_EQ(s->vsize_bytes, 10u);
  EXPECT_EQ(s->rss_pages, 11);
}

TEST(ProcessStats, RefusesWhatIsNotAStatLine) {
  EXPECT_FALSE(ParseProcStat("").has_value());
  EXPECT_FALSE(ParseProcStat("4242 kvconnect S 1 2 3").has_value());
  EXPECT_FALSE(ParseProcStat("4242 (kvconnect) S 1 2 3 4 5 6 7 8 9 10").has_value());  // short
  EXPECT_FALSE(ParseProcStat(StatLine("x", "1", "x2", "3", "4", "5")).has_value());
  EXPECT_FALSE(ParseProcStat(StatLine("x", "-1", "2", "3", "4", "5")).has_value());
}

TEST(ProcessStats, ParsesBootTime) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\ncpu0 1 2 3\nintr 5\nctxt 9\nbtime 1764201600\n"
                          "processes 77\n"),
            1764201600);
  EXPECT_EQ(ParseBootTime("btime 17\n"), 17);
  EXPECT_FALSE(ParseBootTime("cpu 1 2 3\nprocesses 77\n").has_value());
  EXPECT_FALSE(ParseBootTime("btime soon\n").has_value());
  EXPECT_FALSE(ParseBootTime("xbtime 17\n").has_value());
}

// This process: figures that agree with what the test sees itself.
TEST(ProcessStats, ReadsThisProcess) {
  auto p = ReadProcessStats();
  ASSERT_TRUE(p.has_value()) << "no /proc?";
  EXPECT_GT(p->resident_bytes, 0);
  EXPECT_GE(p->virtual_bytes, p->resident_bytes);
  EXPECT_GE(p->cpu_seconds, 0);
  // A descriptor opened here is counted.
  const int64_t before = p->open_fds;
  ASSERT_GE(before, 3);  // stdin, stdout, stderr at least
  FILE* f = std::fopen("/proc/self/stat", "r");
  ASSERT_NE(f, nullptr);
  auto with_file = ReadProcessStats();
  std::fclose(f);
  ASSERT_TRUE(with_file.has_value());
  EXPECT_EQ(with_file->open_fds, before + 1);
  struct rlimit nofile {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  if (nofile.rlim_cur != RLIM_INFINITY) {
    EXPECT_EQ(p->max_fds, static_cast<int64_t>(nofile.rlim_cur));
  }
  // Started before now, and recently (a day is far more than any test binary has run when
  // this test starts).
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(p->start_time_seconds, now + 1);
  EXPECT_GT(p->start_time_seconds, now - 24 * 3600);
}

TEST(ProcessStats, ParsesCgroupMemoryLimits) {
  EXPECT_EQ(ParseCgroupMemoryLimit("1073741824\n"), 1073741824u);
  EXPECT_EQ(ParseCgroupMemoryLimit("9223372036854771712\n"), 9223372036854771712u);
  EXPECT_EQ(ParseCgroupMemoryLimit("max\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit(""), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("-1\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupMemoryLimit("12 34\n"), std::nullopt);
}

TEST(ProcessStats, FindsTheCgroupPathOfAController) {
  const std::string hybrid =
      "9:name=systemd:/\n4:memory:/jobs/a1\n2:cpu,cpuacct:/x\n0::/user.slice/app.service\n";
  EXPECT_EQ(ParseCgroupPath(hybrid, ""), "/user.slice/app.service");
  EXPECT_EQ(ParseCgroupPath(hybrid, "memory"), "/jobs/a1");
  EXPECT_EQ(ParseCgroupPath(hybrid, "cpuacct"), "/x");
  EXPECT_EQ(ParseCgroupPath(hybrid, "pids"), std::nullopt);
  EXPECT_EQ(ParseCgroupPath("0::/\n", ""), "/");
  EXPECT_EQ(ParseCgroupPath("4:memory:/a\n", ""), std::nullopt) << "v1 only: no v2 path";
  EXPECT_EQ(ParseCgroupPath("0::\n0:garbage\n", ""), std::nullopt);
  EXPECT_EQ(ParseCgroupPath("", "memory"), std::nullopt);
}

TEST(ProcessStats, TheMemoryLimitIsAtMostThePhysicalMemory) {
  const uint64_t physical = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                            static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const uint64_t limit = MemoryLimitBytes();
  EXPECT_GT(limit, 0u);
  EXPECT_LE(limit, physical);
}

}  // namespace
}  // namespace kvc
