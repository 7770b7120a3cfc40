// The pure parts of the load generator: latency percentiles, error bookkeeping, option
// validation and the JSON report.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "loadgen/bench.h"
#include "loadgen/stats.h"

namespace kvc::loadgen {
namespace {

TEST(Stats, ExactNearestRankPercentiles) {
  std::vector<uint64_t> samples(1000);
  std::iota(samples.begin(), samples.end(), 1);  // 1..1000 ns
  std::reverse(samples.begin(), samples.end());
  std::vector<uint64_t> ms;
  for (uint64_t v : samples) ms.push_back(v * 1000000);  // 1..1000 ms
  const LatencySummary s = Summarize(&ms);
  EXPECT_EQ(s.count, 1000u);
  EXPECT_DOUBLE_EQ(s.p50_ms, 500);
  EXPECT_DOUBLE_EQ(s.p90_ms, 900);
  EXPECT_DOUBLE_EQ(s.p99_ms, 990);
  EXPECT_DOUBLE_EQ(s.p999_ms, 999);
  EXPECT_DOUBLE_EQ(s.max_ms, 1000);
  EXPECT_DOUBLE_EQ(s.mean_ms, 500.5);

  std::vector<uint64_t> one = {2500000};
  const LatencySummary o = Summarize(&one);
  EXPECT_DOUBLE_EQ(o.p50_ms, 2.5);
  EXPECT_DOUBLE_EQ(o.p999_ms, 2.5);
  EXPECT_DOUBLE_EQ(o.max_ms, 2.5);

  std::vector<uint64_t> none;
  EXPECT_EQ(Summarize(&none).count, 0u);
}

TEST(Stats, ErrorCountsKeepFirstDistinctTexts) {
  ErrorCounts a;
  a.Add("http_400", "bad");
  a.Add("http_400", "bad");
  a.Add("transport", "reset");
  ErrorCounts b;
  for (int i = 0; i < 10; ++i) b.Add("decode", "text " + std::to_string(i));
  a.Merge(b);
  EXPECT_EQ(a.total(), 13u);
  EXPECT_EQ(a.by_kind().at("http_400"), 2u);
  EXPECT_EQ(a.by_kind().at("decode"), 10u);
  ASSERT_EQ(a.samples().size(), ErrorCounts::kMaxSamples);
  EXPECT_EQ(a.samples()[0], "bad");
  EXPECT_EQ(a.samples()[1], "reset");
  EXPECT_EQ(a.samples()[2], "text 0");
}

TEST(Bench, ValidatesOptions) {
  BenchOptions o;
  o.token = "t";
  EXPECT_TRUE(ValidateOptions(o).ok());
  EXPECT_FALSE(ValidateOptions(BenchOptions{}).ok());  // no token
  BenchOptions bad = o;
  bad.duration_s = 0;
  EXPECT_FALSE(ValidateOptions(bad).ok());
  bad = o;
  bad.workload = Workload::kList;
  bad.keys = 99;
  EXPECT_FALSE(ValidateOptions(bad).ok());
  bad = o;
  bad.value_size = 70000;
  EXPECT_FALSE(ValidateOptions(bad).ok());
  bad = o;
  bad.database = "a/b";
  EXPECT_FALSE(ValidateOptions(bad).ok());
  for (Workload w : {Workload::kGet, Workload::kSet, Workload::kCas, Workload::kList,
                     Workload::kSum, Workload::kMixed, Workload::kWatch}) {
    EXPECT_EQ(ParseWorkload(WorkloadName(w)), w);
  }
  EXPECT_FALSE(ParseWorkload("nope").has_value());
}

TEST(Bench, JsonReportEscapesAndSaysOk) {
  BenchReport r;
  r.workload = "sum";
  r.protocol = "h2";
  r.url = "http://h:1/";
  r.ops = 3;
  r.errors.Add("http_400", "quote \" backslash \\ newline \n ctrl \x01");
  SumCheck check;
  check.ok = true;
  r.sum = check;
  const std::string json = FormatReportJson(r);
  EXPECT_NE(json.find(R"("workload":"sum")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("by_kind":{"http_400":1})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"(quote \" backslash \\ newline \n ctrl \u0001)"), std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("sum_check":{"ok":true)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("ok":false})"), std::string::npos) << json;  // one error
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

}  // namespace
}  // namespace kvc::loadgen
