// The one status -> HTTP table (service/http_status.h): throttling is 503 with Retry-After,
// quotas stay 429.
#include "service/http_status.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace kvc {
namespace {

TEST(StatusTable, ThrottledIs503WithRetryAfterAndQuotasStay429) {
  EXPECT_EQ(service::HttpStatusFor(StatusCode::kThrottled), 503);
  EXPECT_EQ(service::HttpStatusFor(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(static_cast<int>(StatusCode::kThrottled), 12);  // do not renumber
  auto header = [](const service::HttpResponse& r) {
    for (const auto& [k, v] : r.headers) {
      if (k == "retry-after") return v;
    }
    return std::string("(none)");
  };
  // Whole seconds, rounded up, at least 1.
  for (auto [ms, seconds] : std::vector<std::pair<int64_t, std::string>>{
           {1, "1"}, {999, "1"}, {1000, "1"}, {1001, "2"}, {2500, "3"}}) {
    const service::HttpResponse r = service::ErrorResponse(Throttled("slow down", ms));
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.body, "slow down");
    EXPECT_EQ(header(r), seconds) << ms;
  }
  // No hint, no header; the hint survives KVC_RETURN_IF_ERROR-style copies.
  EXPECT_EQ(header(service::ErrorResponse(Unavailable("busy"))), "(none)");
  EXPECT_EQ(header(service::ErrorResponse(ResourceExhausted("quota used up"))), "(none)");
  const Status copy = Throttled("x", 42);
  EXPECT_EQ(copy.retry_after_ms(), 42);
  EXPECT_EQ(copy.ToString(), "THROTTLED: x");
}

}  // namespace
}  // namespace kvc
