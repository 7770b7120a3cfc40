#include "codec/key_codec.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "codec/json_text.h"
#include "codec/utf8.h"

namespace kvc::codec {
namespace {

// Tags of the tuple encoding. Wire format: do not change.
constexpr uint8_t kTagBytes = 0x01;
constexpr uint8_t kTagString = 0x02;
constexpr uint8_t kTagNegIntLong = 0x0B;  // length byte (n XOR FF), then NOT(magnitude)
constexpr uint8_t kTagIntZero = 0x14;     // 0x14 - n / 0x14 + n for magnitudes of n <= 8 bytes
constexpr uint8_t kTagPosIntLong = 0x1D;  // length byte n, then magnitude
constexpr uint8_t kTagFloat = 0x21;
constexpr uint8_t kTagFalse = 0x26;
constexpr uint8_t kTagTrue = 0x27;

constexpr size_t kMaxShortIntBytes = 8;
constexpr uint64_t kSignBit = uint64_t{1} << 63;

constexpr char kHexLower[] = "0123456789abcdef";

void AppendHex(std::string_view bytes, std::string* out) {
  for (unsigned char c : bytes) {
    out->push_back(kHexLower[c >> 4]);
    out->push_back(kHexLower[c & 0x0F]);
  }
}

// Quiet NaN with the sign of value, so that every NaN of a given sign encodes the same.
double CanonicalizeFloat(double value) {
  if (!std::isnan(value)) return value;
  return std::signbit(value) ? -std::numeric_limits<double>::quiet_NaN()
                             : std::numeric_limits<double>::quiet_NaN();
}

void StripLeadingZeros(std::vector<uint8_t>* magnitude_be) {
  auto first_nonzero = magnitude_be->begin();
  while (first_nonzero != magnitude_be->end() && *first_nonzero == 0) ++first_nonzero;
  magnitude_be->erase(magnitude_be->begin(), first_nonzero);
}

// Writes data with every 00 escaped as 00 FF, then the 00 terminator.
void AppendEscaped(std::string_view data, std::string* out) {
  for (char c : data) {
    out->push_back(c);
    if (c == '\0') out->push_back('\xFF');
  }
  out->push_back('\0');
}

void AppendInt(bool negative, const std::vector<uint8_t>& magnitude, std::string* out) {
  const size_t n = magnitude.size();
  if (n == 0) {
    out->push_back(static_cast<char>(kTagIntZero));
    return;
  }
  if (n <= kMaxShortIntBytes) {
    out->push_back(static_cast<char>(negative ? kTagIntZero - n : kTagIntZero + n));
  } else if (negative) {
    out->push_back(static_cast<char>(kTagNegIntLong));
    out->push_back(static_cast<char>(n ^ 0xFF));
  } else {
    out->push_back(static_cast<char>(kTagPosIntLong));
    out->push_back(static_cast<char>(n));
  }
  // Negative magnitudes are written as one's complement so larger magnitudes sort lower.
  const uint8_t flip = negative ? 0xFF : 0x00;
  for (uint8_t b : magnitude) out->push_back(static_cast<char>(b ^ flip));
}

void AppendFloat(double value, std::string* out) {
  uint64_t bits = std::bit_cast<uint64_t>(CanonicalizeFloat(value));
  // Negative: invert everything (larger magnitude sorts lower). Positive: set the sign bit so
  // positives sort above negatives.
  bits = (bits & kSignBit) ? ~bits : (bits ^ kSignBit);
  out->push_back(static_cast<char>(kTagFloat));
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((bits >> shift) & 0xFF));
  }
}

// Decimal digits of a big-endian magnitude (no sign).
std::string MagnitudeToDecimal(std::vector<uint8_t> magnitude_be) {
  StripLeadingZeros(&magnitude_be);
  if (magnitude_be.empty()) return "0";
  std::string digits;
  while (!magnitude_be.empty()) {
    // Divide by 10 in place, collecting the remainder as the next lowest digit.
    unsigned remainder = 0;
    for (uint8_t& b : magnitude_be) {
      const unsigned cur = (remainder << 8) | b;
      b = static_cast<uint8_t>(cur / 10);
      remainder = cur % 10;
    }
    digits.push_back(static_cast<char>('0' + remainder));
    StripLeadingZeros(&magnitude_be);
  }
  return std::string(digits.rbegin(), digits.rend());
}

std::string FloatToString(double value) {
  if (std::isnan(value)) return std::signbit(value) ? "-NaN" : "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

std::string HexByte(uint8_t b) {
  std::string s = "0x";
  s.push_back(kHexLower[b >> 4]);
  s.push_back(kHexLower[b & 0x0F]);
  return s;
}

// Cursor over an encoded key; every read is bounds-checked.
class KeyReader {
 public:
  explicit KeyReader(std::string_view in) : in_(in) {}

  bool done() const { return pos_ >= in_.size(); }
  size_t pos() const { return pos_; }

  bool ReadByte(uint8_t* b) {
    if (pos_ >= in_.size()) return false;
    *b = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }

  bool ReadBytes(size_t n, std::string_view* out) {
    if (in_.size() - pos_ < n) return false;
    *out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }

  // Reads an escaped byte string up to and including its 00 terminator.
  bool ReadEscaped(std::string* out) {
    while (pos_ < in_.size()) {
      const char c = in_[pos_++];
      if (c != '\0') {
        out->push_back(c);
        continue;
      }
      if (pos_ < in_.size() && in_[pos_] == '\xFF') {
        out->push_back('\0');
        ++pos_;
        continue;
      }
      return true;
    }
    return false;
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

Status Truncated(const char* what, size_t offset) {
  return InvalidArgument(std::string("invalid key: truncated ") + what + " part at offset " +
                         std::to_string(offset));
}

Result<KeyPart> ReadInt(KeyReader* reader, uint8_t tag, size_t tag_offset) {
  bool negative;
  size_t n;
  if (tag == kTagNegIntLong || tag == kTagPosIntLong) {
    negative = tag == kTagNegIntLong;
    uint8_t len_byte;
    if (!reader->ReadByte(&len_byte)) return Truncated("integer", tag_offset);
    n = negative ? (len_byte ^ 0xFF) : len_byte;
  } else {
    negative = tag < kTagIntZero;
    n = negative ? kTagIntZero - tag : tag - kTagIntZero;
  }
  std::string_view body;
  if (!reader->ReadBytes(n, &body)) return Truncated("integer", tag_offset);
  const uint8_t flip = negative ? 0xFF : 0x00;
  std::vector<uint8_t> magnitude;
  magnitude.reserve(n);
  for (char c : body) magnitude.push_back(static_cast<uint8_t>(c) ^ flip);
  // Cannot fail: n <= 255 by construction of the encoding.
  return KeyPart::BigIntFromMagnitude(negative, std::move(magnitude));
}

Result<KeyPart> ReadFloat(KeyReader* reader, size_t tag_offset) {
  std::string_view body;
  if (!reader->ReadBytes(8, &body)) return Truncated("float", tag_offset);
  uint64_t bits = 0;
  for (char c : body) bits = (bits << 8) | static_cast<uint8_t>(c);
  bits = (bits & kSignBit) ? (bits ^ kSignBit) : ~bits;
  return KeyPart::Float(std::bit_cast<double>(bits));
}

// Reads one part at the reader's position. Errors: as DecodeKey.
Result<KeyPart> ReadPart(KeyReader* reader) {
  const size_t offset = reader->pos();
  uint8_t tag = 0;
  if (!reader->ReadByte(&tag)) return Truncated("key", offset);
  if (tag == kTagBytes || tag == kTagString) {
    std::string data;
    const bool is_string = tag == kTagString;
    if (!reader->ReadEscaped(&data)) return Truncated(is_string ? "string" : "bytes", offset);
    if (!is_string) return KeyPart::Bytes(data);
    if (!IsValidUtf8(data)) {
      return InvalidArgument("invalid key: string part at offset " + std::to_string(offset) +
                             " is not valid UTF-8");
    }
    return KeyPart::String(data);
  }
  if (tag >= kTagNegIntLong && tag <= kTagPosIntLong) return ReadInt(reader, tag, offset);
  if (tag == kTagFloat) return ReadFloat(reader, offset);
  if (tag == kTagFalse || tag == kTagTrue) return KeyPart::Bool(tag == kTagTrue);
  return InvalidArgument("invalid key: unknown tag " + HexByte(tag) + " at offset " +
                         std::to_string(offset));
}

}  // namespace

KeyPart KeyPart::Bytes(std::string_view data) {
  KeyPart part;
  part.type_ = Type::kBytes;
  part.data_.assign(data);
  return part;
}

KeyPart KeyPart::Bytes(const std::vector<uint8_t>& data) {
  KeyPart part;
  part.type_ = Type::kBytes;
  part.data_.assign(data.begin(), data.end());
  return part;
}

KeyPart KeyPart::String(std::string_view utf8) {
  KeyPart part;
  part.type_ = Type::kString;
  part.data_.assign(utf8);
  return part;
}

KeyPart KeyPart::Int(int64_t value) {
  KeyPart part;
  part.type_ = Type::kBigInt;
  part.negative_ = value < 0;
  // Two's-complement negation in uint64_t is exact even for INT64_MIN.
  const auto bits = static_cast<uint64_t>(value);
  const uint64_t magnitude = part.negative_ ? ~bits + 1 : bits;
  for (int shift = 56; shift >= 0; shift -= 8) {
    part.magnitude_.push_back(static_cast<uint8_t>(magnitude >> shift));
  }
  StripLeadingZeros(&part.magnitude_);
  return part;
}

Result<KeyPart> KeyPart::BigIntFromMagnitude(bool negative, std::vector<uint8_t> magnitude_be) {
  StripLeadingZeros(&magnitude_be);
  if (magnitude_be.size() > kMaxKeyBigIntBytes) {
    return InvalidArgument("bigint key part too large: " + std::to_string(magnitude_be.size()) +
                           " bytes (max " + std::to_string(kMaxKeyBigIntBytes) + ")");
  }
  KeyPart part;
  part.type_ = Type::kBigInt;
  part.negative_ = negative && !magnitude_be.empty();
  part.magnitude_ = std::move(magnitude_be);
  return part;
}

KeyPart KeyPart::Float(double value) {
  KeyPart part;
  part.type_ = Type::kFloat;
  part.number_ = CanonicalizeFloat(value);
  return part;
}

KeyPart KeyPart::Bool(bool value) {
  KeyPart part;
  part.type_ = value ? Type::kTrue : Type::kFalse;
  return part;
}

std::optional<int64_t> KeyPart::ToInt64() const {
  if (type_ != Type::kBigInt || magnitude_.size() > 8) return std::nullopt;
  uint64_t magnitude = 0;
  for (uint8_t b : magnitude_) magnitude = (magnitude << 8) | b;
  if (!negative_) {
    if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(magnitude);
  }
  if (magnitude > kSignBit) return std::nullopt;
  // 0 - magnitude in uint64_t, reinterpreted: exact for every magnitude in [1, 2^63].
  return static_cast<int64_t>(~magnitude + 1);
}

std::string KeyPart::ToString() const {
  std::string out;
  switch (type_) {
    case Type::kBytes:
      out = "Uint8Array(";
      AppendHex(data_, &out);
      out.push_back(')');
      break;
    case Type::kString:
      AppendJsonQuoted(data_, &out);
      break;
    case Type::kBigInt:
      if (negative_) out.push_back('-');
      out += MagnitudeToDecimal(magnitude_);
      out.push_back('n');
      break;
    case Type::kFloat:
      out = FloatToString(number_);
      break;
    case Type::kFalse:
      out = "false";
      break;
    case Type::kTrue:
      out = "true";
      break;
  }
  return out;
}

bool KeyPart::operator==(const KeyPart& other) const {
  return type_ == other.type_ && data_ == other.data_ && negative_ == other.negative_ &&
         magnitude_ == other.magnitude_ &&
         std::bit_cast<uint64_t>(number_) == std::bit_cast<uint64_t>(other.number_);
}

std::string EncodeKey(const std::vector<KeyPart>& key) {
  std::string out;
  for (const KeyPart& part : key) {
    switch (part.type()) {
      case KeyPart::Type::kBytes:
        out.push_back(static_cast<char>(kTagBytes));
        AppendEscaped(part.data(), &out);
        break;
      case KeyPart::Type::kString:
        out.push_back(static_cast<char>(kTagString));
        AppendEscaped(part.data(), &out);
        break;
      case KeyPart::Type::kBigInt:
        AppendInt(part.negative(), part.magnitude(), &out);
        break;
      case KeyPart::Type::kFloat:
        AppendFloat(part.number(), &out);
        break;
      case KeyPart::Type::kFalse:
        out.push_back(static_cast<char>(kTagFalse));
        break;
      case KeyPart::Type::kTrue:
        out.push_back(static_cast<char>(kTagTrue));
        break;
    }
  }
  return out;
}

Result<std::vector<KeyPart>> DecodeKey(std::string_view encoded) {
  std::vector<KeyPart> parts;
  KeyReader reader(encoded);
  while (!reader.done()) {
    KVC_ASSIGN_OR_RETURN(KeyPart part, ReadPart(&reader));
    parts.push_back(std::move(part));
  }
  return parts;
}

std::vector<KeyPart> DecodeCanonicalKeyPrefix(std::string_view encoded, size_t* consumed) {
  std::vector<KeyPart> parts;
  KeyReader reader(encoded);
  size_t end = 0;
  while (!reader.done()) {
    Result<KeyPart> part = ReadPart(&reader);
    if (!part.ok()) break;
    // A part counts only if it names exactly its bytes: a non-minimal integer or a NaN with
    // other payload bits decodes, but would encode differently.
    const std::string again = EncodeKey({*part});
    if (encoded.substr(end, reader.pos() - end) != again) break;
    // Every NaN reads back from JSON as the one canonical NaN: a NaN with other payload or sign
    // bits (which EncodeKey keeps) is named only by a raw part (key_codec_fuzzer found one).
    if (part->type() == KeyPart::Type::kFloat && std::isnan(part->number()) &&
        again != EncodeKey({KeyPart::Float(std::numeric_limits<double>::quiet_NaN())})) {
      break;
    }
    end = reader.pos();
    parts.push_back(std::move(*part));
  }
  *consumed = end;
  return parts;
}

std::string KeyToString(std::string_view encoded) {
  Result<std::vector<KeyPart>> parts = DecodeKey(encoded);
  if (!parts.ok()) {
    std::string out = "<invalid key: ";
    AppendHex(encoded, &out);
    out.push_back('>');
    return out;
  }
  std::string out = "[";
  for (size_t i = 0; i < parts->size(); ++i) {
    if (i > 0) out.push_back(',');
    out += (*parts)[i].ToString();
  }
  out.push_back(']');
  return out;
}

}  // namespace kvc::codec
