#include "codec/v8/v8_wire.h"

#include <bit>

#include "codec/utf8.h"

namespace kvc::codec {

bool V8Reader::ReadVarint32(uint32_t* out) {
  // At most 5 bytes and no bits beyond bit 31.
  const size_t start = pos_;
  uint64_t value = 0;
  if (!ReadVarint64(&value) || value > UINT32_MAX || pos_ - start > 5) return false;
  *out = static_cast<uint32_t>(value);
  return true;
}

bool V8Reader::ReadVarint64(uint64_t* out) {
  uint64_t value = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    uint8_t byte;
    if (!ReadByte(&byte)) return false;
    const uint64_t bits = byte & 0x7F;
    if (shift == 63 && bits > 0x01) return false;  // would overflow 64 bits
    value |= bits << shift;
    if ((byte & 0x80) == 0) {
      *out = value;
      return true;
    }
  }
  return false;  // continuation bit on the tenth byte
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
  uint32_t version = 0;
  return ReadHeader(&version);
}

bool V8Reader::ReadHeader(uint32_t* version) {
  uint8_t tag = 0;
  return ReadByte(&tag) && tag == v8tag::kVersion && ReadVarint32(version) &&
         *version >= kV8MinReadVersion && *version <= kV8MaxReadVersion;
}

bool V8Reader::ReadTag(uint8_t* tag) {
  do {
    if (!ReadByte(tag)) return false;
  } while (*tag == v8tag::kPadding);
  return true;
}

bool V8Reader::PeekTag(uint8_t* tag) const {
  for (size_t pos = pos_; pos < data_.size(); ++pos) {
    *tag = static_cast<uint8_t>(data_[pos]);
    if (*tag != v8tag::kPadding) return true;
  }
  return false;
}

bool ReadV8StringPayload(uint8_t tag, V8Reader* reader, std::u16string* units) {
  uint32_t length = 0;
  std::string_view bytes;
  if (!reader->ReadVarint32(&length) || !reader->ReadBytes(length, &bytes)) return false;
  units->clear();
  switch (tag) {
    // Sized first and filled by index: a loop the compiler widens, where push_back checked the
    // capacity per unit (about 1.4% of the server's CPU under Deno-style sets).
    case v8tag::kOneByteString: {
      units->resize(bytes.size());
      char16_t* out = units->data();
      for (size_t i = 0; i < bytes.size(); ++i) out[i] = static_cast<uint8_t>(bytes[i]);
      return true;
    }
    case v8tag::kTwoByteString: {
      if (bytes.size() % 2 != 0) return false;
      units->resize(bytes.size() / 2);
      char16_t* out = units->data();
      for (size_t i = 0; i < units->size(); ++i) {
        out[i] = static_cast<char16_t>(static_cast<uint8_t>(bytes[2 * i]) |
                                       static_cast<uint8_t>(bytes[2 * i + 1]) << 8);
      }
      return true;
    }
    case v8tag::kUtf8String:
      *units = Utf8ToUtf16(bytes);
      return true;
    default:
      return false;
  }
}

void AppendV8Header(std::string* out) { AppendV8Header(kV8WriteVersion, out); }

void AppendV8Header(uint32_t version, std::string* out) {
  out->push_back(static_cast<char>(v8tag::kVersion));
  AppendVarint32(version, out);
}

void AppendVarint32(uint32_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendVarint64(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

size_t Varint32Size(uint32_t value) { return Varint64Size(value); }

size_t Varint64Size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void AppendZigZag32(int32_t value, std::string* out) {
  const auto bits = static_cast<uint32_t>(value);
  AppendVarint32((bits << 1) ^ (0u - (bits >> 31)), out);
}

void AppendDouble(double value, std::string* out) {
  const auto bits = std::bit_cast<uint64_t>(value);
  for (int shift = 0; shift < 64; shift += 8) out->push_back(static_cast<char>(bits >> shift));
}

void AppendV8String(std::u16string_view units, bool prefer_two_byte, std::string* out) {
  bool one_byte = !prefer_two_byte;
  for (size_t i = 0; one_byte && i < units.size(); ++i) one_byte = units[i] <= 0xFF;
  if (one_byte) {
    out->push_back(static_cast<char>(v8tag::kOneByteString));
    AppendVarint32(static_cast<uint32_t>(units.size()), out);
    for (char16_t u : units) out->push_back(static_cast<char>(u));
    return;
  }
  const auto byte_length = static_cast<uint32_t>(units.size() * 2);
  // V8 aligns two-byte character data to an even offset with one padding byte before the tag.
  if ((out->size() + 1 + Varint32Size(byte_length)) % 2 != 0) out->push_back('\0');
  out->push_back(static_cast<char>(v8tag::kTwoByteString));
  AppendVarint32(byte_length, out);
  for (char16_t u : units) {
    out->push_back(static_cast<char>(u & 0xFF));
    out->push_back(static_cast<char>(u >> 8));
  }
}

}  // namespace kvc::codec
