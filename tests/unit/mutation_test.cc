// Sum/min/max semantics and request-limit texts (engine/mutation, engine/limits).
#include "engine/mutation.h"

#include <gtest/gtest.h>

#include <cstring>

#include "codec/v8/v8_value.h"
#include "common/bytes.h"
#include "engine/limits.h"

namespace kvc::engine {
namespace {

using storage::StoredRow;

std::string Le64(uint64_t v) { return EncodeLe64(v); }
uint64_t FromLe64(const std::string& b) { return DecodeLe64(b); }
Mutation Op(MutationType t, std::string data, ValueEncoding enc) {
  Mutation m;
  m.key = "k";
  m.type = t;
  m.value = KvValue{std::move(data), enc};
  return m;
}
StoredRow Row(std::string v, ValueEncoding enc) { return StoredRow{std::move(v), enc, 1, 123}; }

TEST(Le64Mutation, AbsentKeyStoresOperandWithoutExpiry) {
  auto r =
      ApplyNumericMutation(Op(MutationType::kSum, Le64(5), ValueEncoding::kLe64), std::nullopt, 7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(FromLe64(r->value), 5u);
  EXPECT_EQ(r->encoding, ValueEncoding::kLe64);
  EXPECT_EQ(r->version, 7);
  EXPECT_EQ(r->expire_at_ms, -1);
}

TEST(Le64Mutation, SumWrapsMinMaxAreUnsigned) {
  auto existing = Row(Le64(UINT64_MAX - 1), ValueEncoding::kLe64);
  auto sum =
      ApplyNumericMutation(Op(MutationType::kSum, Le64(3), ValueEncoding::kLe64), existing, 2);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(FromLe64(sum->value), 1u);
  EXPECT_EQ(sum->expire_at_ms, -1);  // sum clears expiry
  auto mn =
      ApplyNumericMutation(Op(MutationType::kMin, Le64(3), ValueEncoding::kLe64), existing, 2);
  EXPECT_EQ(FromLe64(mn->value), 3u);
  auto mx =
      ApplyNumericMutation(Op(MutationType::kMax, Le64(3), ValueEncoding::kLe64), existing, 2);
  EXPECT_EQ(FromLe64(mx->value), UINT64_MAX - 1);
}

TEST(Le64Mutation, ErrorsUseReferenceTexts) {
  auto v8 = Row(codec::EncodeV8Number(1), ValueEncoding::kV8);
  auto r = ApplyNumericMutation(Op(MutationType::kSum, Le64(1), ValueEncoding::kLe64), v8, 2);
  EXPECT_EQ(r.status().message(),
            "Failed to perform 'sum' mutation on a non-U64 value in the database");
  r = ApplyNumericMutation(Op(MutationType::kMax, Le64(1), ValueEncoding::kLe64), v8, 2);
  EXPECT_EQ(r.status().message(),
            "Failed to perform 'max' mutation on a non-U64 value in the database");
  r = ApplyNumericMutation(Op(MutationType::kMin, codec::EncodeV8Number(1), ValueEncoding::kV8),
                           std::nullopt, 2);
  EXPECT_EQ(r.status().message(), "Failed to perform 'min' mutation on a non-U64 operand");
  r = ApplyNumericMutation(Op(MutationType::kSum, "abc", ValueEncoding::kLe64), std::nullopt, 2);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

codec::V8Numeric Parse(const std::string& v) { return *codec::ParseV8Numeric(v); }

TEST(V8Sum, NumbersAndBigInts) {
  auto r =
      ApplyNumericMutation(Op(MutationType::kSum, codec::EncodeV8Number(2.5), ValueEncoding::kV8),
                           Row(codec::EncodeV8Number(1.25), ValueEncoding::kV8), 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->encoding, ValueEncoding::kV8);
  EXPECT_DOUBLE_EQ(Parse(r->value).number, 3.75);

  codec::BigInt big = codec::BigInt::FromU64(UINT64_MAX);
  r = ApplyNumericMutation(Op(MutationType::kSum, codec::EncodeV8BigInt(big), ValueEncoding::kV8),
                           Row(codec::EncodeV8BigInt(big), ValueEncoding::kV8), 3);
  ASSERT_TRUE(r.ok());
  auto sum = Parse(r->value);
  ASSERT_EQ(sum.kind, codec::V8Numeric::Kind::kBigInt);
  EXPECT_EQ(sum.bigint, codec::BigInt::Add(big, big));  // exact, beyond 64 bits
}

TEST(V8Sum, MismatchedKindsAreRejected) {
  auto r = ApplyNumericMutation(
      Op(MutationType::kSum, codec::EncodeV8BigInt(codec::BigInt::FromU64(1)), ValueEncoding::kV8),
      Row(codec::EncodeV8Number(1), ValueEncoding::kV8), 3);
  EXPECT_EQ(r.status().message(), "Cannot sum Number with BigInt");
  r = ApplyNumericMutation(Op(MutationType::kSum, "\xff\x0f\x22\x01x", ValueEncoding::kV8),
                           std::nullopt, 3);
  EXPECT_EQ(r.status().message(), "Some of the parameters are not valid V8 values");
  r = ApplyNumericMutation(Op(MutationType::kSum, codec::EncodeV8Number(1), ValueEncoding::kV8),
                           Row(Le64(1), ValueEncoding::kLe64), 3);
  EXPECT_EQ(r.status().message(), "Cannot sum KvU64 with Number");
}

TEST(V8Sum, NonNumericStoredValuesAreExplained) {
  const std::string object = "\xff\x0f\x6f\x22\x01\x61\x49\x02\x7b\x01";  // {a:1}
  auto r = ApplyNumericMutation(
      Op(MutationType::kSum, codec::EncodeV8BigInt(codec::BigInt::FromU64(1)), ValueEncoding::kV8),
      Row(object, ValueEncoding::kV8), 3);
  EXPECT_EQ(r.status().message(),
            "Cannot sum: the stored value is not a number or bigint (unsupported value type)");
  r = ApplyNumericMutation(Op(MutationType::kSum, codec::EncodeV8Number(1), ValueEncoding::kV8),
                           Row("raw", ValueEncoding::kBytes), 3);
  EXPECT_EQ(r.status().message(),
            "Cannot sum: the stored value is a Uint8Array, not a number or bigint");
}

TEST(V8Sum, BigIntOntoKvU64StaysKvU64) {
  auto r = ApplyNumericMutation(
      Op(MutationType::kSum, codec::EncodeV8BigInt(codec::BigInt::FromU64(2)), ValueEncoding::kV8),
      Row(Le64(UINT64_MAX), ValueEncoding::kLe64), 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->encoding, ValueEncoding::kLe64);
  EXPECT_EQ(FromLe64(r->value), 1u);
}

TEST(V8Sum, BoundsClampOrFail) {
  Mutation m = Op(MutationType::kSum, codec::EncodeV8Number(10), ValueEncoding::kV8);
  m.sum_max = codec::EncodeV8Number(12);
  auto existing = Row(codec::EncodeV8Number(5), ValueEncoding::kV8);
  auto r = ApplyNumericMutation(m, existing, 3);
  EXPECT_EQ(r.status().message(), "The result of a Sum operation would exceed its range limit");
  m.sum_clamp = true;
  r = ApplyNumericMutation(m, existing, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(Parse(r->value).number, 12);
  m.sum_min = codec::EncodeV8BigInt(codec::BigInt::FromU64(0));
  r = ApplyNumericMutation(m, existing, 3);
  EXPECT_EQ(r.status().message(), "Min/max parameters have different types than the operand");
}

TEST(Limits, SnapshotReadTexts) {
  Limits l;
  std::vector<ReadRange> ranges(11, ReadRange{"a", "b", 1, false});
  EXPECT_EQ(ValidateSnapshotRead(ranges, l).message(),
            "Too many read ranges requested in one read request.");
  ranges.resize(1);
  ranges[0].limit = 0;
  EXPECT_EQ(ValidateSnapshotRead(ranges, l).message(),
            "The read range limit of the snapshot read request is invalid.");
  ranges[0].limit = 1001;
  EXPECT_EQ(ValidateSnapshotRead(ranges, l).message(),
            "The total number of entries requested across read ranges in the read request is too "
            "large.");
  ranges[0] = ReadRange{std::string(2050, 'a'), "b", 1, false};
  EXPECT_EQ(ValidateSnapshotRead(ranges, l).message(), "A key exceeds the key size limit.");
  ranges[0] = ReadRange{std::string(2049, 'a'), "b", 1000, false};
  EXPECT_TRUE(ValidateSnapshotRead(ranges, l).ok());
}

TEST(Limits, AtomicWriteTexts) {
  Limits l;
  AtomicWrite w;
  w.checks.resize(100, Check{"k", ""});
  EXPECT_TRUE(ValidateAtomicWrite(w, l, 0).ok());  // Deno sends up to 100 checks
  w.checks.resize(101, Check{"k", ""});
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(), "Too many checks included in atomic write.");
  w.checks = {Check{"k", "123"}};
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(), "Invalid versionstamp.");
  w.checks.clear();
  w.mutations.resize(1001, Op(MutationType::kSet, "v", ValueEncoding::kBytes));
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(),
            "Too many mutations / enqueues included in atomic write.");
  w.mutations = {Op(MutationType::kSet, std::string(65537, 'x'), ValueEncoding::kBytes)};
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(), "A value exceeds the value size limit.");
  w.mutations = {Op(MutationType::kSet, "v", ValueEncoding::kBytes)};
  w.mutations[0].key = std::string(2049, 'k');
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(), "A key exceeds the key size limit.");
  w.mutations[0].key = "k";
  w.mutations[0].expire_at_ms = -2;
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(), "Invalid mutation expire at.");
  w.mutations.assign(13, Op(MutationType::kSet, std::string(65536, 'x'), ValueEncoding::kBytes));
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(),
            "The total size of the atomic write is too large.");
  w.mutations.clear();
  Enqueue e;
  e.deadline_ms = 10;
  e.backoff_schedule.assign(11, 1);
  w.enqueues = {e};
  EXPECT_EQ(ValidateAtomicWrite(w, l, 0).message(),
            "Too many backoff intervals for a single queue message.");
}

TEST(Limits, WatchTexts) {
  Limits l;
  EXPECT_EQ(ValidateWatch(std::vector<std::string>(11, "k"), l).message(),
            "Too many keys watched in a single watch request.");
  EXPECT_TRUE(ValidateWatch(std::vector<std::string>(10, "k"), l).ok());
}

TEST(Limits, WatchOfNoKeysIsRefused) {
  Limits l;
  const Status s = ValidateWatch({}, l);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "A watch request needs at least one key.");
  EXPECT_TRUE(ValidateWatch({"k"}, l).ok());
}

}  // namespace
}  // namespace kvc::engine
