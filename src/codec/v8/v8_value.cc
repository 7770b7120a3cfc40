#include "codec/v8/v8_value.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace kvc::codec {
namespace {

constexpr size_t kBigIntDigitBytes = 8;               // V8 writes whole 64-bit digits
constexpr uint32_t kMaxBigIntBytes = (1u << 30) - 1;  // bits 1..30 of the bitfield

constexpr char kEmptyOperand[] = "operand cannot be empty";
constexpr char kUnsupportedType[] = "unsupported value type";
constexpr char kInvalidValue[] = "invalid v8 value";

// Returns -1, 0, 1 comparing normalised magnitudes.
int CompareMagnitude(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return 0;
}

std::vector<uint8_t> AddMagnitude(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const std::vector<uint8_t>& longer = a.size() >= b.size() ? a : b;
  const std::vector<uint8_t>& shorter = a.size() >= b.size() ? b : a;
  std::vector<uint8_t> sum;
  sum.reserve(longer.size() + 1);
  unsigned carry = 0;
  for (size_t i = 0; i < longer.size(); ++i) {
    const unsigned digit = longer[i] + (i < shorter.size() ? shorter[i] : 0u) + carry;
    sum.push_back(static_cast<uint8_t>(digit));
    carry = digit >> 8;
  }
  if (carry != 0) sum.push_back(static_cast<uint8_t>(carry));
  return sum;
}

// REQUIRES: CompareMagnitude(a, b) >= 0.
std::vector<uint8_t> SubtractMagnitude(const std::vector<uint8_t>& a,
                                       const std::vector<uint8_t>& b) {
  std::vector<uint8_t> diff;
  diff.reserve(a.size());
  int borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    int digit = a[i] - (i < b.size() ? b[i] : 0) - borrow;
    borrow = digit < 0 ? 1 : 0;
    if (digit < 0) digit += 256;
    diff.push_back(static_cast<uint8_t>(digit));
  }
  assert(borrow == 0);
  return diff;
}

}  // namespace

BigInt BigInt::FromU64(uint64_t value) {
  BigInt result;
  for (; value != 0; value >>= 8) result.magnitude.push_back(static_cast<uint8_t>(value));
  return result;
}

BigInt BigInt::FromI64(int64_t value) {
  const auto bits = static_cast<uint64_t>(value);
  // Two's-complement negation in uint64_t is exact even for INT64_MIN.
  BigInt result = FromU64(value < 0 ? ~bits + 1 : bits);
  result.negative = value < 0;
  return result;
}

int BigInt::Compare(const BigInt& a, const BigInt& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int magnitude_order = CompareMagnitude(a.magnitude, b.magnitude);
  return a.negative ? -magnitude_order : magnitude_order;
}

BigInt BigInt::Add(const BigInt& a, const BigInt& b) {
  BigInt result;
  if (a.negative == b.negative) {
    result.negative = a.negative;
    result.magnitude = AddMagnitude(a.magnitude, b.magnitude);
  } else if (CompareMagnitude(a.magnitude, b.magnitude) >= 0) {
    result.negative = a.negative;
    result.magnitude = SubtractMagnitude(a.magnitude, b.magnitude);
  } else {
    result.negative = b.negative;
    result.magnitude = SubtractMagnitude(b.magnitude, a.magnitude);
  }
  result.Normalize();
  return result;
}

std::optional<uint64_t> BigInt::ToU64() const {
  if (negative || magnitude.size() > 8) return std::nullopt;
  uint64_t value = 0;
  for (size_t i = magnitude.size(); i-- > 0;) value = (value << 8) | magnitude[i];
  return value;
}

void BigInt::Normalize() {
  while (!magnitude.empty() && magnitude.back() == 0) magnitude.pop_back();
  if (magnitude.empty()) negative = false;
}

Result<V8Numeric> ParseV8Numeric(std::string_view data) {
  if (data.empty()) return InvalidArgument(kEmptyOperand);
  V8Reader reader(data);
  if (!reader.ReadHeader()) return InvalidArgument(kInvalidValue);
  uint8_t tag;
  while (true) {
    if (!reader.ReadTag(&tag)) return InvalidArgument(kInvalidValue);
    if (tag != v8tag::kVerifyObjectCount) break;
    uint32_t unused_count;  // a count V8 checks and ignores; the value follows
    if (!reader.ReadVarint32(&unused_count)) return InvalidArgument(kInvalidValue);
  }

  // A number read by `read`; nullopt if the input ends first.
  const auto number = [&reader]<typename T>(bool (V8Reader::*read)(T*)) {
    T value;
    return (reader.*read)(&value) ? std::optional(V8Numeric::Number(value)) : std::nullopt;
  };
  std::optional<V8Numeric> result;
  switch (tag) {
    case v8tag::kInt32:
      result = number(&V8Reader::ReadZigZag32);
      break;
    case v8tag::kUint32:
      result = number(&V8Reader::ReadVarint32);
      break;
    case v8tag::kDouble:
      result = number(&V8Reader::ReadDouble);
      break;
    case v8tag::kBigInt: {
      BigInt value;
      if (ReadV8BigIntPayload(&reader, &value)) result = V8Numeric::FromBigInt(std::move(value));
      break;
    }
    default:
      return InvalidArgument(kUnsupportedType);
  }
  if (!result || !reader.done()) return InvalidArgument(kInvalidValue);
  return *std::move(result);
}

std::string EncodeV8Number(double value) {
  std::string out;
  AppendV8Header(&out);
  out.push_back(static_cast<char>(v8tag::kDouble));
  AppendDouble(value, &out);
  return out;
}

bool ReadV8BigIntPayload(V8Reader* reader, BigInt* out) {
  uint32_t bitfield;
  if (!reader->ReadVarint32(&bitfield)) return false;
  const size_t length = bitfield >> 1;
  std::string_view bytes;
  // Checked against the input before allocating, so absurd lengths cost nothing.
  if (length > kMaxBigIntBytes || !reader->ReadBytes(length, &bytes)) return false;
  out->negative = (bitfield & 1) != 0;
  out->magnitude.assign(bytes.begin(), bytes.end());
  out->Normalize();
  return true;
}

void AppendV8BigIntPayload(const BigInt& value, std::string* out) {
  const size_t length =
      (value.magnitude.size() + kBigIntDigitBytes - 1) / kBigIntDigitBytes * kBigIntDigitBytes;
  assert(length <= kMaxBigIntBytes);
  const bool negative = value.negative && length != 0;
  AppendVarint32(static_cast<uint32_t>(length << 1) | (negative ? 1u : 0u), out);
  out->append(value.magnitude.begin(), value.magnitude.end());
  out->append(length - value.magnitude.size(), '\0');
}

std::string EncodeV8BigInt(const BigInt& value) {
  std::string out;
  AppendV8Header(&out);
  out.push_back(static_cast<char>(v8tag::kBigInt));
  AppendV8BigIntPayload(value, &out);
  return out;
}

std::string EncodeV8Numeric(const V8Numeric& value) {
  return value.kind == V8Numeric::Kind::kNumber ? EncodeV8Number(value.number)
                                                : EncodeV8BigInt(value.bigint);
}

}  // namespace kvc::codec
