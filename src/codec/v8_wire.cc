#include "codec/v8_wire.h"

#include <bit>

namespace kvc::codec {

bool V8Reader::ReadVarint32(uint32_t* out) {
  uint32_t value = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    uint8_t byte;
    if (!ReadByte(&byte)) return false;
    const uint32_t bits = byte & 0x7F;
    if (shift == 28 && bits > 0x0F) return false;  // would overflow 32 bits
    value |= bits << shift;
    if ((byte & 0x80) == 0) {
      *out = value;
      return true;
    }
  }
  return false;  // continuation bit on the fifth byte
}

bool V8Reader::ReadZigZag32(int32_t* out) {
  uint32_t zigzag;
  if (!ReadVarint32(&zigzag)) return false;
  *out = static_cast<int32_t>((zigzag >> 1) ^ (0u - (zigzag & 1)));
  return true;
}

bool V8Reader::ReadDouble(double* out) {
  std::string_view bytes;
  if (!ReadBytes(8, &bytes)) return false;
  uint64_t bits = 0;
  for (size_t i = 8; i-- > 0;) bits = (bits << 8) | static_cast<uint8_t>(bytes[i]);
  *out = std::bit_cast<double>(bits);
  return true;
}

bool V8Reader::ReadHeader() {
  uint8_t tag = 0;
  uint32_t version = 0;
  return ReadByte(&tag) && tag == v8tag::kVersion && ReadVarint32(&version) &&
         version >= kV8MinReadVersion && version <= kV8MaxReadVersion;
}

bool V8Reader::ReadTag(uint8_t* tag) {
  do {
    if (!ReadByte(tag)) return false;
  } while (*tag == v8tag::kPadding);
  return true;
}

void AppendV8Header(std::string* out) {
  out->push_back(static_cast<char>(v8tag::kVersion));
  out->push_back(static_cast<char>(kV8WriteVersion));
}

void AppendVarint32(uint32_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

size_t Varint32Size(uint32_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

}  // namespace kvc::codec
