#include "engine/mutation.h"

#include <cstring>
#include <string>

#include "codec/v8/v8_value.h"
#include "common/bytes.h"
#include "common/enum_names.h"

namespace kvc::engine {
namespace {

using codec::BigInt;
using codec::V8Numeric;
using storage::StoredRow;

constexpr EnumName<MutationType> kOpNames[] = {
    {MutationType::kSum, "sum"},
    {MutationType::kMin, "min"},
    {MutationType::kMax, "max"},
};

const char* OpName(MutationType t) { return NameIn(kOpNames, t, "?"); }

StoredRow MakeRow(std::string value, ValueEncoding enc, int64_t version) {
  StoredRow r;
  r.value = std::move(value);
  r.encoding = enc;
  r.version = version;
  r.expire_at_ms = -1;  // sum/min/max rewrite the row without expiry
  return r;
}

Result<StoredRow> ApplyLe64(const Mutation& m, const std::optional<StoredRow>& existing,
                            int64_t version) {
  if (m.value.data.size() != 8) {
    return InvalidArgument("A KvU64 value must be exactly 8 bytes.");
  }
  const uint64_t operand = DecodeLe64(m.value.data);
  if (!existing) return MakeRow(m.value.data, ValueEncoding::kLe64, version);
  if (existing->encoding != ValueEncoding::kLe64 || existing->value.size() != 8) {
    return InvalidArgument(std::string("Failed to perform '") + OpName(m.type) +
                           "' mutation on a non-U64 value in the database");
  }
  const uint64_t old = DecodeLe64(existing->value);
  uint64_t result = 0;
  switch (m.type) {
    case MutationType::kSum:
      result = old + operand;
      break;  // wraps mod 2^64
    case MutationType::kMin:
      result = old < operand ? old : operand;
      break;
    case MutationType::kMax:
      result = old > operand ? old : operand;
      break;
    default:
      return Internal("not a numeric mutation");
  }
  return MakeRow(EncodeLe64(result), ValueEncoding::kLe64, version);
}

const char* KindName(V8Numeric::Kind k) {
  return k == V8Numeric::Kind::kNumber ? "Number" : "BigInt";
}

// -1, 0, 1; for Numbers NaN compares as "not less and not greater" (0).
int CompareNumeric(const V8Numeric& a, const V8Numeric& b) {
  if (a.kind == V8Numeric::Kind::kNumber) {
    if (a.number < b.number) return -1;
    if (a.number > b.number) return 1;
    return 0;
  }
  return BigInt::Compare(a.bigint, b.bigint);
}

Result<StoredRow> ApplyV8Sum(const Mutation& m, const std::optional<StoredRow>& existing,
                             int64_t version) {
  constexpr char kNotV8[] = "Some of the parameters are not valid V8 values";
  if (m.value.encoding != ValueEncoding::kV8) return InvalidArgument(kNotV8);
  auto operand = codec::ParseV8Numeric(m.value.data);
  if (!operand.ok()) return InvalidArgument(kNotV8);
  std::optional<V8Numeric> min, max;
  if (!m.sum_min.empty()) {
    auto v = codec::ParseV8Numeric(m.sum_min);
    if (!v.ok()) return InvalidArgument(kNotV8);
    min = *v;
  }
  if (!m.sum_max.empty()) {
    auto v = codec::ParseV8Numeric(m.sum_max);
    if (!v.ok()) return InvalidArgument(kNotV8);
    max = *v;
  }
  if ((min && min->kind != operand->kind) || (max && max->kind != operand->kind)) {
    return InvalidArgument("Min/max parameters have different types than the operand");
  }
  if (!existing) return MakeRow(codec::EncodeV8Numeric(*operand), ValueEncoding::kV8, version);

  if (existing->encoding == ValueEncoding::kLe64) {
    // Compatibility: a non-negative BigInt that fits in 64 bits adds to a KvU64 with wrapping,
    // and the result stays a KvU64.
    if (operand->kind == V8Numeric::Kind::kBigInt && !min && !max && !m.sum_clamp &&
        existing->value.size() == 8) {
      if (auto u = operand->bigint.ToU64()) {
        return MakeRow(EncodeLe64(DecodeLe64(existing->value) + *u), ValueEncoding::kLe64, version);
      }
    }
    return InvalidArgument(std::string("Cannot sum KvU64 with ") + KindName(operand->kind));
  }
  if (existing->encoding != ValueEncoding::kV8) {
    return InvalidArgument("Cannot sum: the stored value is a Uint8Array, not a number or bigint");
  }
  auto old = codec::ParseV8Numeric(existing->value);
  if (!old.ok()) {
    return InvalidArgument("Cannot sum: the stored value is not a number or bigint (" +
                           old.status().message() + ")");
  }
  if (old->kind != operand->kind) {
    return InvalidArgument(std::string("Cannot sum ") + KindName(old->kind) + " with " +
                           KindName(operand->kind));
  }
  V8Numeric result;
  result.kind = operand->kind;
  if (result.kind == V8Numeric::Kind::kNumber) {
    result.number = old->number + operand->number;
  } else {
    result.bigint = BigInt::Add(old->bigint, operand->bigint);
  }
  if (min && CompareNumeric(result, *min) < 0) {
    if (!m.sum_clamp) {
      return InvalidArgument("The result of a Sum operation would exceed its range limit");
    }
    result = *min;
  }
  if (max && CompareNumeric(result, *max) > 0) {
    if (!m.sum_clamp) {
      return InvalidArgument("The result of a Sum operation would exceed its range limit");
    }
    result = *max;
  }
  return MakeRow(codec::EncodeV8Numeric(result), ValueEncoding::kV8, version);
}

}  // namespace

Result<StoredRow> ApplyNumericMutation(const Mutation& m, const std::optional<StoredRow>& existing,
                                       int64_t version) {
  if (m.value.encoding == ValueEncoding::kLe64) return ApplyLe64(m, existing, version);
  if (m.type != MutationType::kSum) {
    return InvalidArgument(std::string("Failed to perform '") + OpName(m.type) +
                           "' mutation on a non-U64 operand");
  }
  return ApplyV8Sum(m, existing, version);
}

}  // namespace kvc::engine
