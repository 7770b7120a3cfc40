// Deno KV tuple key codec (reference §4; FoundationDB tuple layer as used by denokv).
//
// A key is a sequence of KeyParts; its encoding is the concatenation of the encoded parts. The
// encoding is order-preserving: comparing encoded keys as unsigned byte strings orders them part
// by part, across types as bytes < string < bigint < float < false < true, and numerically
// within bigints and within floats (-NaN < -Inf < ... < -0.0 < +0.0 < ... < +Inf < NaN).
//
// Thread-safety: KeyPart is a value type; the free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::codec {

// Largest bigint magnitude, in bytes, that the key encoding can represent (one length byte).
inline constexpr size_t kMaxKeyBigIntBytes = 255;

// One element of a key tuple. Invariants, kept by the factories: a bigint magnitude has no
// leading zero bytes and is at most kMaxKeyBigIntBytes long, and zero is never negative; a
// float NaN is canonical (quiet NaN, sign preserved), so equal parts encode identically.
class KeyPart {
 public:
  // Declared in cross-type sort order. Do not reorder: tests and ranges rely on it.
  enum class Type { kBytes, kString, kBigInt, kFloat, kFalse, kTrue };

  // A byte-string part (JS Uint8Array).
  static KeyPart Bytes(std::string_view data);
  static KeyPart Bytes(const std::vector<uint8_t>& data);
  // A string part (JS string). REQUIRES: utf8 is valid UTF-8 (DecodeKey rejects anything else).
  static KeyPart String(std::string_view utf8);
  // An integer part (JS bigint).
  static KeyPart Int(int64_t value);
  // An integer part of any size: sign plus big-endian magnitude (leading zeros are stripped).
  // Returns InvalidArgument if the magnitude needs more than kMaxKeyBigIntBytes bytes.
  static Result<KeyPart> BigIntFromMagnitude(bool negative, std::vector<uint8_t> magnitude_be);
  // A float part (JS number; Deno encodes every number this way, integral or not).
  static KeyPart Float(double value);
  // A boolean part.
  static KeyPart Bool(bool value);

  Type type() const { return type_; }
  // kBytes: the raw bytes; kString: the UTF-8 text. Empty for other types.
  const std::string& data() const { return data_; }
  // kBigInt: the sign (false for zero) and big-endian magnitude without leading zeros (empty for
  // zero). False/empty for other types.
  bool negative() const { return negative_; }
  const std::vector<uint8_t>& magnitude() const { return magnitude_; }
  // kBigInt: the value if it fits in int64_t; nullopt otherwise or for other types.
  std::optional<int64_t> ToInt64() const;
  // kFloat: the value. 0 for other types.
  double number() const { return number_; }
  // kTrue: true; every other type: false.
  bool boolean() const { return type_ == Type::kTrue; }

  // Debug form of this part, in JS-like syntax: "users", 1n, 2.5, true, Uint8Array(00ff).
  std::string ToString() const;

  // Structural equality; floats compare by bit pattern (so NaN == NaN and -0.0 != +0.0).
  bool operator==(const KeyPart& other) const;

 private:
  KeyPart() = default;

  Type type_ = Type::kBytes;
  std::string data_;
  bool negative_ = false;
  std::vector<uint8_t> magnitude_;
  double number_ = 0;
};

// Returns the order-preserving encoding of key.
std::string EncodeKey(const std::vector<KeyPart>& key);

// Decodes an encoded key. The empty string is the empty key. Non-minimal integer encodings are
// accepted and normalised (so re-encoding may differ from the input). Returns InvalidArgument on
// an unknown tag, a truncated part, or a string part that is not valid UTF-8.
Result<std::vector<KeyPart>> DecodeKey(std::string_view encoded);

// Keys are opaque bytes on the wire, so a client may store bytes no Deno client would write.
// Returns the longest run of whole parts at the start of `encoded` that each decode and encode
// back to exactly their bytes, and sets `*consumed` to the length of that run:
// EncodeKey(result) == encoded.substr(0, *consumed). For a key Deno wrote, *consumed is
// encoded.size(). Never fails. REQUIRES: consumed != nullptr.
std::vector<KeyPart> DecodeCanonicalKeyPrefix(std::string_view encoded, size_t* consumed);

// Returns a readable debug form such as ["users",1n,2.5,true,Uint8Array(00ff)]. If encoded does
// not decode, returns "<invalid key: HEX>" with the raw bytes in lowercase hex.
std::string KeyToString(std::string_view encoded);

}  // namespace kvc::codec
