// service::PortableValues: which values of an atomic write are converted (V8 set values and
// enqueue payloads, not raw bytes, KvU64s or sum operands), the size-limit fallback, read-time
// conversion of format 16 only, watch frames, and what the observer is told.
#include "service/kvconnect/portable_values.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "codec/datapath_codec.h"
#include "datapath.pb.h"
#include "testutil/hex.h"

namespace kvc::service {
namespace {

using codec::V8PortableOutcome;
using testutil::FromHex;
using testutil::ToHex;

const std::string kDeno16 = FromHex("FF 10 49 54");          // 42 in format 16
const std::string kNodeView = FromHex("FF 0F 5C 01 01 07");  // Uint8Array [7], Node's form
const std::string kV8View = FromHex("FF 0F 42 01 07 56 42 00 01 00");

class Recorder : public PortableValueObserver {
 public:
  void CountPortableV8(bool on_write, V8PortableOutcome outcome) override {
    ++counts[{on_write, codec::V8PortableOutcomeName(outcome)}];
  }
  std::map<std::pair<bool, std::string>, int> counts;
};

Mutation V8Set(std::string key, std::string value, MutationType type = MutationType::kSet) {
  Mutation m;
  m.key = std::move(key);
  m.type = type;
  m.value = KvValue{std::move(value), ValueEncoding::kV8};
  return m;
}

TEST(PortableValuesTest, WriteConvertsSetValuesAndQueuePayloads) {
  Recorder rec;
  PortableValues portable(&rec);
  AtomicWrite w;
  w.mutations.push_back(V8Set("a", kDeno16));
  w.mutations.push_back(V8Set("b", kNodeView, MutationType::kSetSuffixVersionstampedKey));
  Mutation bytes = V8Set("c", kDeno16);
  bytes.value.encoding = ValueEncoding::kBytes;  // raw bytes that look like format 16
  w.mutations.push_back(bytes);
  Mutation sum = V8Set("d", kDeno16, MutationType::kSum);  // operands stay as sent
  sum.sum_min = kDeno16;
  w.mutations.push_back(sum);
  w.mutations.push_back(V8Set("e", FromHex("FF 0F 49 54")));  // already portable
  w.enqueues.push_back(Enqueue{kNodeView, 0, {}, {}});
  portable.OnWrite(&w, engine::Limits{}, 0);
  EXPECT_EQ(ToHex(w.mutations[0].value.data), "FF 0F 49 54");
  EXPECT_EQ(ToHex(w.mutations[1].value.data), ToHex(kV8View));
  EXPECT_EQ(ToHex(w.mutations[2].value.data), ToHex(kDeno16));
  EXPECT_EQ(ToHex(w.mutations[3].value.data), ToHex(kDeno16));
  EXPECT_EQ(ToHex(w.mutations[3].sum_min), ToHex(kDeno16));
  EXPECT_EQ(ToHex(w.mutations[4].value.data), "FF 0F 49 54");
  EXPECT_EQ(ToHex(w.enqueues[0].payload), ToHex(kV8View));
  EXPECT_EQ((rec.counts[{true, "format_16_to_15"}]), 1);
  EXPECT_EQ((rec.counts[{true, "rewritten"}]), 2);
  EXPECT_EQ(rec.counts.size(), 2u);
}

TEST(PortableValuesTest, AGrownValueOverTheLimitStaysAsSent) {
  // A Node value exactly at the value size limit: its V8 views are 4 bytes longer.
  engine::Limits limits;
  limits.max_value_bytes = kNodeView.size();
  Recorder rec;
  PortableValues portable(&rec);
  AtomicWrite w;
  w.mutations.push_back(V8Set("a", kNodeView));
  w.mutations.push_back(V8Set("b", kDeno16));  // same size: converted regardless
  portable.OnWrite(&w, limits, 0);
  EXPECT_EQ(ToHex(w.mutations[0].value.data), ToHex(kNodeView));
  EXPECT_EQ(ToHex(w.mutations[1].value.data), "FF 0F 49 54");
  EXPECT_EQ((rec.counts[{true, "kept"}]), 1);
  EXPECT_EQ((rec.counts[{true, "format_16_to_15"}]), 1);
  // With room for it, converted.
  limits.max_value_bytes = kV8View.size();
  w.mutations[0] = V8Set("a", kNodeView);
  portable.OnWrite(&w, limits, 0);
  EXPECT_EQ(ToHex(w.mutations[0].value.data), ToHex(kV8View));
}

TEST(PortableValuesTest, ReadsConvertFormat16Only) {
  Recorder rec;
  PortableValues portable(&rec);
  std::vector<std::vector<Entry>> ranges(2);
  ranges[0].push_back(Entry{"a", kDeno16, ValueEncoding::kV8, 1});
  ranges[0].push_back(Entry{"b", kNodeView, ValueEncoding::kV8, 1});  // written with switch off
  ranges[1].push_back(Entry{"c", kDeno16, ValueEncoding::kBytes, 1});
  ranges[1].push_back(Entry{"d", FromHex("FF 10 6F"), ValueEncoding::kV8, 1});  // undecodable
  portable.OnRead(&ranges);
  EXPECT_EQ(ToHex(ranges[0][0].value), "FF 0F 49 54");
  EXPECT_EQ(ToHex(ranges[0][1].value), ToHex(kNodeView));
  EXPECT_EQ(ToHex(ranges[1][0].value), ToHex(kDeno16));
  EXPECT_EQ(ToHex(ranges[1][1].value), "FF 10 6F");
  EXPECT_EQ((rec.counts[{false, "format_16_to_15"}]), 1);
  EXPECT_EQ((rec.counts[{false, "kept"}]), 1);
}

TEST(PortableValuesTest, WatchFramesCarryFormat15) {
  PortableValues portable;
  const WatchStream::FrameEncoder encode = portable.WatchFrameEncoder();
  std::vector<std::optional<Entry>> keys(3);
  keys[0] = Entry{"a", kDeno16, ValueEncoding::kV8, 1};
  keys[2] = Entry{"c", "raw", ValueEncoding::kBytes, 2};
  com::deno::kv::datapath::WatchOutput out;
  const std::string frame = encode(keys);  // a 4-byte length, then the WatchOutput
  ASSERT_GT(frame.size(), 4u);
  ASSERT_TRUE(out.ParseFromString(frame.substr(4)));
  ASSERT_EQ(out.keys_size(), 3);
  EXPECT_EQ(ToHex(out.keys(0).entry_if_changed().value()), "FF 0F 49 54");
  EXPECT_FALSE(out.keys(1).has_entry_if_changed());
  EXPECT_EQ(out.keys(2).entry_if_changed().value(), "raw");
  // Without format-16 values the frame is codec::EncodeWatchFrame's.
  keys[0]->value = FromHex("FF 0F 49 54");
  EXPECT_EQ(encode(keys), codec::EncodeWatchFrame(keys));
}

}  // namespace
}  // namespace kvc::service
