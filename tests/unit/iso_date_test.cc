// JavaScript Date times <-> ISO 8601 text (codec/iso_date.h), as Date.prototype.toISOString
// writes them and Date.parse reads them.
#include "codec/iso_date.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace kvc::codec {
namespace {

TEST(IsoDate, TimeClipKeepsDatesRange) {
  EXPECT_EQ(TimeClip(1.9), 1);
  EXPECT_EQ(TimeClip(-1.9), -1);
  EXPECT_FALSE(std::signbit(TimeClip(-0.0)));
  EXPECT_EQ(TimeClip(kMaxDateMs), kMaxDateMs);
  EXPECT_TRUE(std::isnan(TimeClip(kMaxDateMs + 1)));
  EXPECT_TRUE(std::isnan(TimeClip(-kMaxDateMs - 1)));
  EXPECT_TRUE(std::isnan(TimeClip(INFINITY)));
}

TEST(IsoDate, FormatsAsToIsoStringDoes) {
  EXPECT_EQ(FormatIsoDate(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIsoDate(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatIsoDate(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatIsoDate(kMaxDateMs), "+275760-09-13T00:00:00.000Z");
  EXPECT_EQ(FormatIsoDate(-kMaxDateMs), "-271821-04-20T00:00:00.000Z");
  EXPECT_EQ(FormatIsoDate(-62'198'755'200'000), "-000001-01-01T00:00:00.000Z");
}

TEST(IsoDate, ParsesWhatDateParseReadsExactly) {
  EXPECT_EQ(*ParseIsoDate("2023-11-14T22:13:20.123Z"), 1'700'000'000'123);
  EXPECT_EQ(*ParseIsoDate("2023-11-14T23:13:20.123+01:00"), 1'700'000'000'123);
  EXPECT_EQ(*ParseIsoDate("2023-11-14T22:13:20.1239Z"), 1'700'000'000'123);  // truncated
  EXPECT_EQ(*ParseIsoDate("1970-01-02"), 86'400'000);                        // UTC midnight
  EXPECT_EQ(*ParseIsoDate("1970-01"), 0);
  EXPECT_EQ(*ParseIsoDate("1970-01-01T24:00Z"), 86'400'000);
  EXPECT_EQ(*ParseIsoDate("+275760-09-13T00:00:00.000Z"), kMaxDateMs);
  EXPECT_EQ(*ParseIsoDate("-000001-01-01T00:00:00.000Z"), -62'198'755'200'000);
  for (const char* bad : {"", "2023-11-14T22:13:20", "2023-02-29", "2023-13-01", "-000000-01-01",
                          "2023-11-14T24:00:01Z", "2023-11-14 22:13Z", "2023-11-14T22:13:20.Z",
                          "2023-11-14T22:13+0100", "23-11-14"}) {
    EXPECT_EQ(ParseIsoDate(bad).status().message(), "bad date string") << bad;
  }
  EXPECT_EQ(ParseIsoDate("+275760-09-13T00:00:00.001Z").status().message(), "date out of range");
}

}  // namespace
}  // namespace kvc::codec
