// The primitives of the V8 ValueSerializer format (reference §5) shared by the V8 codecs
// (v8_value.h for numbers and BigInts, client_codec.h for strings): tags, versions, a
// bounds-checked reader and the writer's header and varints.
//
// Thread-safety: V8Reader is a cursor owned by one caller; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvc::codec {

// Serialization tags and versions. Wire format: do not change.
namespace v8tag {
inline constexpr uint8_t kVersion = 0xFF;
inline constexpr uint8_t kPadding = 0x00;
inline constexpr uint8_t kVerifyObjectCount = '?';
inline constexpr uint8_t kInt32 = 'I';
inline constexpr uint8_t kUint32 = 'U';
inline constexpr uint8_t kDouble = 'N';
inline constexpr uint8_t kBigInt = 'Z';
inline constexpr uint8_t kOneByteString = '"';
inline constexpr uint8_t kTwoByteString = 'c';
inline constexpr uint8_t kUtf8String = 'S';
}  // namespace v8tag

inline constexpr uint32_t kV8MinReadVersion = 13;
inline constexpr uint32_t kV8MaxReadVersion = 16;
inline constexpr uint8_t kV8WriteVersion = 15;  // every Deno reads it (reference §5)

// A cursor over serialized V8 bytes. Every read is bounds-checked: it returns false instead of
// reading past the end, and then the position is unspecified (callers give up on the value).
// Does not own the bytes. REQUIRES: they outlive the reader.
class V8Reader {
 public:
  explicit V8Reader(std::string_view data) : data_(data) {}

  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }

  bool ReadByte(uint8_t* out) {
    if (pos_ >= data_.size()) return false;
    *out = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }

  // The next n bytes, as a view into the input.
  bool ReadBytes(size_t n, std::string_view* out) {
    if (remaining() < n) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  // Unsigned LEB128 limited to 32 bits: at most 5 bytes and no bits beyond bit 31.
  bool ReadVarint32(uint32_t* out);
  // A varint holding a zigzag-encoded int32 (tag I).
  bool ReadZigZag32(int32_t* out);
  // 8 bytes of a little-endian IEEE-754 double (tag N).
  bool ReadDouble(double* out);

  // Reads the header: the version tag FF and a varint version in [kV8MinReadVersion,
  // kV8MaxReadVersion]. False if the header is missing, truncated or of another version.
  bool ReadHeader();
  // Reads the next tag, skipping padding bytes (00) before it, as V8 does.
  bool ReadTag(uint8_t* tag);

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// Appends the header written by Deno: FF 0F.
void AppendV8Header(std::string* out);
// Appends `value` as an unsigned LEB128 varint.
void AppendVarint32(uint32_t value, std::string* out);
// The length in bytes of AppendVarint32(value).
size_t Varint32Size(uint32_t value);

}  // namespace kvc::codec
