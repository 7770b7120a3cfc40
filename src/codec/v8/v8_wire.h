// The primitives of the V8 ValueSerializer format (reference §5) shared by every V8 codec here
// (v8_value.h for numbers and BigInts, client_codec.h for strings, v8_tree.h for whole values):
// tags, versions, the one bounds-checked reader, and the writer's header, varints, doubles and
// strings.
//
// Thread-safety: V8Reader is a cursor owned by one caller; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvc::codec {

// Serialization tags. Wire format: do not change.
namespace v8tag {
inline constexpr uint8_t kVersion = 0xFF;
inline constexpr uint8_t kPadding = 0x00;
inline constexpr uint8_t kVerifyObjectCount = '?';
inline constexpr uint8_t kTheHole = '-';
inline constexpr uint8_t kUndefined = '_';
inline constexpr uint8_t kNull = '0';
inline constexpr uint8_t kTrue = 'T';
inline constexpr uint8_t kFalse = 'F';
inline constexpr uint8_t kInt32 = 'I';
inline constexpr uint8_t kUint32 = 'U';
inline constexpr uint8_t kDouble = 'N';
inline constexpr uint8_t kBigInt = 'Z';
inline constexpr uint8_t kOneByteString = '"';
inline constexpr uint8_t kTwoByteString = 'c';
inline constexpr uint8_t kUtf8String = 'S';
inline constexpr uint8_t kObjectReference = '^';
inline constexpr uint8_t kBeginObject = 'o';
inline constexpr uint8_t kEndObject = '{';
inline constexpr uint8_t kBeginSparseArray = 'a';
inline constexpr uint8_t kEndSparseArray = '@';
inline constexpr uint8_t kBeginDenseArray = 'A';
inline constexpr uint8_t kEndDenseArray = '$';
inline constexpr uint8_t kDate = 'D';
inline constexpr uint8_t kTrueObject = 'y';
inline constexpr uint8_t kFalseObject = 'x';
inline constexpr uint8_t kNumberObject = 'n';
inline constexpr uint8_t kBigIntObject = 'z';
inline constexpr uint8_t kStringObject = 's';
inline constexpr uint8_t kRegExp = 'R';
inline constexpr uint8_t kBeginMap = ';';
inline constexpr uint8_t kEndMap = ':';
inline constexpr uint8_t kBeginSet = '\'';
inline constexpr uint8_t kEndSet = ',';
inline constexpr uint8_t kArrayBuffer = 'B';
inline constexpr uint8_t kResizableArrayBuffer = '~';
inline constexpr uint8_t kArrayBufferView = 'V';
inline constexpr uint8_t kError = 'r';
inline constexpr uint8_t kHostObject = '\\';
// Tags that only make sense inside one process (transfers, shared memory); never stored.
inline constexpr uint8_t kArrayBufferTransfer = 't';
inline constexpr uint8_t kSharedArrayBuffer = 'u';
inline constexpr uint8_t kSharedObject = 'p';
inline constexpr uint8_t kWasmModuleTransfer = 'w';
inline constexpr uint8_t kWasmMemoryTransfer = 'm';
}  // namespace v8tag

// ArrayBufferView sub-tags (the varint after `V`). Wire format: do not change.
namespace v8view {
inline constexpr uint8_t kInt8Array = 'b';
inline constexpr uint8_t kUint8Array = 'B';
inline constexpr uint8_t kUint8ClampedArray = 'C';
inline constexpr uint8_t kInt16Array = 'w';
inline constexpr uint8_t kUint16Array = 'W';
inline constexpr uint8_t kInt32Array = 'd';
inline constexpr uint8_t kUint32Array = 'D';
inline constexpr uint8_t kFloat16Array = 'h';
inline constexpr uint8_t kFloat32Array = 'f';
inline constexpr uint8_t kFloat64Array = 'F';
inline constexpr uint8_t kBigInt64Array = 'q';
inline constexpr uint8_t kBigUint64Array = 'Q';
inline constexpr uint8_t kDataView = '?';
// The view flags varint (format version 14 and later).
inline constexpr uint32_t kFlagLengthTracking = 1;
inline constexpr uint32_t kFlagBackedByResizable = 2;
}  // namespace v8view

// Error sub-tags (varints after `r`, ending with kEnd). Wire format: do not change.
namespace v8error {
inline constexpr uint8_t kEvalError = 'E';
inline constexpr uint8_t kRangeError = 'R';
inline constexpr uint8_t kReferenceError = 'F';
inline constexpr uint8_t kSyntaxError = 'S';
inline constexpr uint8_t kTypeError = 'T';
inline constexpr uint8_t kUriError = 'U';
inline constexpr uint8_t kMessage = 'm';
inline constexpr uint8_t kCause = 'c';
inline constexpr uint8_t kStack = 's';
inline constexpr uint8_t kEnd = '.';
}  // namespace v8error

// Format versions. 13: explicit host-object tag; 14: the view flags varint; 15: the shared-object
// tag; 16: ArrayBuffer and view lengths and offsets are size_t varints (identical bytes below
// 2^32). See src/codec/README.md.
inline constexpr uint32_t kV8MinReadVersion = 13;
inline constexpr uint32_t kV8MaxReadVersion = 16;
inline constexpr uint8_t kV8WriteVersion = 15;  // every Deno and Node >= 18 reads it (reference §5)
inline constexpr uint32_t kV8FirstVersionWithViewFlags = 14;
inline constexpr uint32_t kV8FirstVersionWithWideLengths = 16;

// A cursor over serialized V8 bytes. Every read is bounds-checked: it returns false instead of
// reading past the end, and then the position is unspecified (callers give up on the value).
// Does not own the bytes. REQUIRES: they outlive the reader.
class V8Reader {
 public:
  explicit V8Reader(std::string_view data) : data_(data) {}

  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }
  size_t position() const { return pos_; }

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
  // Unsigned LEB128 limited to 64 bits: at most 10 bytes and no bits beyond bit 63.
  bool ReadVarint64(uint64_t* out);
  // A varint holding a zigzag-encoded int32 (tag I).
  bool ReadZigZag32(int32_t* out);
  // 8 bytes of a little-endian IEEE-754 double (tag N), bit pattern kept (NaNs included).
  bool ReadDouble(double* out);

  // Reads the header: the version tag FF and a varint version in [kV8MinReadVersion,
  // kV8MaxReadVersion]. False if the header is missing, truncated or of another version.
  bool ReadHeader();
  // As ReadHeader(), and stores the version.
  bool ReadHeader(uint32_t* version);
  // Reads the next tag, skipping padding bytes (00) before it, as V8 does.
  bool ReadTag(uint8_t* tag);
  // Returns the next tag like ReadTag() without consuming it or the padding before it.
  bool PeekTag(uint8_t* tag) const;

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// Reads the payload of a string whose tag (`"`, `c` or `S`) was just read, as UTF-16 code units
// (a JS string): Latin-1 bytes, UTF-16LE units (the byte length must be even), or UTF-8 (whose
// malformed sequences become U+FFFD, as V8 decodes them). False if truncated or malformed.
// REQUIRES: tag is one of the three string tags.
bool ReadV8StringPayload(uint8_t tag, V8Reader* reader, std::u16string* units);

// Appends the header written by Deno: FF 0F (kV8WriteVersion).
void AppendV8Header(std::string* out);
// Appends the header FF + varint `version`.
void AppendV8Header(uint32_t version, std::string* out);
// Appends `value` as an unsigned LEB128 varint.
void AppendVarint32(uint32_t value, std::string* out);
void AppendVarint64(uint64_t value, std::string* out);
// The length in bytes of AppendVarint32(value) / AppendVarint64(value). (LEB128 is also
// protobuf's varint: datapath_codec.cc writes its answers with these.)
size_t Varint32Size(uint32_t value);
size_t Varint64Size(uint64_t value);
// Appends `value` zigzag-encoded as a varint (the payload of tag I).
void AppendZigZag32(int32_t value, std::string* out);
// Appends the 8 little-endian bytes of `value` (the payload of tags N, D, n).
void AppendDouble(double value, std::string* out);

// Appends a string value (tag and payload) as V8 writes it: one-byte (`"`, Latin-1) if every
// unit is <= 0xFF and `prefer_two_byte` is false, else two-byte (`c`, UTF-16LE) preceded by one
// padding byte when needed to start the character data at an even offset. The offset counts
// from the start of `out`. REQUIRES: `out` holds the serialization from its header on.
void AppendV8String(std::u16string_view units, bool prefer_two_byte, std::string* out);

}  // namespace kvc::codec
