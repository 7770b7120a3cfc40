// The part of the V8 ValueSerializer format (reference §5) the server needs for sums on
// V8-encoded values (reference §3.5): parsing a top-level Number or BigInt, encoding one back,
// and exact BigInt arithmetic.
//
// Thread-safety: value types and pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/v8/v8_wire.h"
#include "common/status.h"

namespace kvc::codec {

// An arbitrary-precision integer as sign plus magnitude. Invariant (kept by every function
// here; call Normalize() after editing the fields directly): the magnitude is little-endian with
// no high zero bytes, and zero is non-negative with an empty magnitude.
struct BigInt {
  bool negative = false;
  std::vector<uint8_t> magnitude;  // little-endian

  static BigInt FromU64(uint64_t value);
  static BigInt FromI64(int64_t value);

  // Returns -1, 0 or 1 as a < b, a == b, a > b.
  static int Compare(const BigInt& a, const BigInt& b);
  // Returns the exact sum a + b.
  static BigInt Add(const BigInt& a, const BigInt& b);

  // Returns the value if 0 <= value < 2^64, else nullopt.
  std::optional<uint64_t> ToU64() const;
  bool IsZero() const { return magnitude.empty(); }
  // Restores the invariant: strips high zero bytes and clears the sign of zero.
  void Normalize();

  bool operator==(const BigInt& other) const = default;
};

// A sum operand parsed from a V8 value: a JS number or a JS bigint.
struct V8Numeric {
  enum class Kind { kNumber, kBigInt };

  static V8Numeric Number(double value) { return V8Numeric{Kind::kNumber, value, {}}; }
  static V8Numeric FromBigInt(BigInt value) {
    return V8Numeric{Kind::kBigInt, 0, std::move(value)};
  }

  Kind kind = Kind::kNumber;
  double number = 0;  // kNumber only
  BigInt bigint;      // kBigInt only
};

// Parses a whole serialized V8 value that must be a Number (tags I, U, N) or a BigInt (tag Z).
// Accepts header versions 13..16, 00 padding bytes before the tag, and a leading
// verify-object-count (`?` varint) as V8 does. Never reads outside data. Returns InvalidArgument:
//   "operand cannot be empty"  if data is empty;
//   "unsupported value type"   if the value is of another type (string, object, ...);
//   "invalid v8 value"         if the header is bad, the value is truncated or malformed, or
//                              bytes follow the value.
Result<V8Numeric> ParseV8Numeric(std::string_view data);

// Returns FF 0F 4E followed by value's 8 IEEE-754 bytes, little-endian.
std::string EncodeV8Number(double value);

// Returns FF 0F 5A, the varint bitfield (bit 0 sign, bits 1.. byte length) and the
// little-endian magnitude zero-padded to a multiple of 8 bytes, as V8 writes it (0n is FF 0F 5A
// 00). REQUIRES: value is normalised and its padded magnitude is shorter than 2^30 bytes.
std::string EncodeV8BigInt(const BigInt& value);

// Reads the payload of tags Z and z: the varint bitfield (bit 0 sign, bits 1..30 byte length) and
// the little-endian magnitude, of any length. False if truncated or the bitfield has bit 31 set.
bool ReadV8BigIntPayload(V8Reader* reader, BigInt* out);

// Appends the payload of tags Z and z as V8 writes it (magnitude padded to whole 64-bit digits).
// REQUIRES: as EncodeV8BigInt.
void AppendV8BigIntPayload(const BigInt& value, std::string* out);

// Encodes a Number or BigInt with EncodeV8Number or EncodeV8BigInt.
std::string EncodeV8Numeric(const V8Numeric& value);

}  // namespace kvc::codec
