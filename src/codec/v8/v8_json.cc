#include "codec/v8/v8_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <utility>

#include "codec/iso_date.h"
#include "codec/json_text.h"
#include "codec/utf8.h"
#include "codec/v8/v8_json_internal.h"
#include "codec/v8/v8_json_reader.h"
#include "codec/versionstamp.h"
#include "common/random.h"

// The public functions of the KvValueJSON mapping: keys, whole KV values and entries, BigInt
// decimals; and the helpers its files share (v8_json_internal.h). Values themselves are written
// by v8_json_writer.cc and built by v8_json_builder.cc.

namespace kvc::codec {
namespace v8json {

Status Bad(const std::string& what) { return InvalidArgument("bad KvValueJSON: " + what); }

void AppendNumberValue(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("\"NaN\"");
  } else if (std::isinf(value)) {
    out->append(value < 0 ? "\"-Infinity\"" : "\"Infinity\"");
  } else if (value == 0 && std::signbit(value)) {
    out->append("-0");  // JSON.parse reads it back as -0; JSON.stringify would write 0
  } else {
    out->append(V8NumberToString(value));  // the digits JSON.stringify writes
  }
}

std::string Base64Url(std::string_view bytes) { return Base64UrlEncode(std::string(bytes)); }

Result<std::string> DecodeBase64(const std::u16string& text) {
  std::string normalized;
  normalized.reserve(text.size());
  for (char16_t c : text) {
    if (c > 0x7F) return InvalidArgument("bad base64");
    char a = static_cast<char>(c);
    if (a == '+') a = '-';
    if (a == '/') a = '_';
    normalized.push_back(a);
  }
  size_t padding = 0;
  while (!normalized.empty() && normalized.back() == '=' && padding < 2) {
    normalized.pop_back();
    ++padding;
  }
  if (padding > 0 && (normalized.size() + padding) % 4 != 0) return InvalidArgument("bad base64");
  std::string bytes;
  if (!Base64UrlDecode(normalized, &bytes)) return InvalidArgument("bad base64");
  return bytes;
}

Result<double> NumberFromJson(const JsonNode* value) {
  if (value == nullptr) return Bad("missing value");
  if (value->type == JsonNode::Type::kNumber) return value->number;
  if (value->IsString()) {
    if (value->string == u"NaN") return std::nan("");
    if (value->string == u"Infinity") return HUGE_VAL;
    if (value->string == u"-Infinity") return -HUGE_VAL;
  }
  return Bad("not a number");
}

Result<uint64_t> UintMember(const JsonNode& node, std::u16string_view name, uint64_t fallback) {
  const JsonNode* member = node.Find(name);
  if (member == nullptr) return fallback;
  if (member->type != JsonNode::Type::kNumber || member->number < 0 ||
      member->number != std::trunc(member->number) || member->number > 9007199254740991.0) {
    return Bad(Utf16ToUtf8(name) + " is not a non-negative integer");
  }
  return static_cast<uint64_t>(member->number);
}

bool IsArrayIndexName(std::u16string_view name, uint32_t* index) {
  if (name.empty() || name.size() > 10 || (name.size() > 1 && name[0] == u'0')) return false;
  uint64_t value = 0;
  for (char16_t c : name) {
    if (c < u'0' || c > u'9') return false;
    value = value * 10 + static_cast<uint64_t>(c - u'0');
  }
  if (value > 0xFFFFFFFEull) return false;
  *index = static_cast<uint32_t>(value);
  return true;
}

}  // namespace v8json

namespace {

using v8json::AppendNumberValue;
using v8json::Bad;
using v8json::Base64Url;
using v8json::DecodeBase64;
using v8json::NumberFromJson;
using v8json::UintMember;

// --------------------------------------------------------------------------------------------
// BigInt decimal conversion (little-endian byte magnitudes, 64-bit limbs).

constexpr uint32_t kTen9 = 1'000'000'000;

std::vector<uint32_t> ToLimbs(const std::vector<uint8_t>& magnitude) {
  std::vector<uint32_t> limbs((magnitude.size() + 3) / 4, 0);
  for (size_t i = 0; i < magnitude.size(); ++i) {
    limbs[i / 4] |= static_cast<uint32_t>(magnitude[i]) << (8 * (i % 4));
  }
  return limbs;
}

// --------------------------------------------------------------------------------------------
// Keys

Result<JsonNode> ParseJson(std::string_view text, const V8JsonOptions& options) {
  return ReadJsonNode(text, options.max_depth);
}

Result<KeyPart> KeyPartFromNode(const JsonNode& node) {
  const Status bad = InvalidArgument("bad KvKeyPartJSON");
  if (node.type != JsonNode::Type::kObject) return bad;
  const JsonNode* type = node.Find(u"type");
  const JsonNode* value = node.Find(u"value");
  if (type == nullptr || !type->IsString() || value == nullptr) return bad;
  if (type->string == u"string") {
    if (!value->IsString() || HasLoneSurrogate(value->string)) return bad;
    return KeyPart::String(Utf16ToUtf8(value->string));
  }
  if (type->string == u"number") {
    Result<double> number = NumberFromJson(value);
    if (!number.ok()) return bad;
    return KeyPart::Float(*number);
  }
  if (type->string == u"bigint") {
    if (!value->IsString()) return bad;
    Result<BigInt> bigint = BigIntFromDecimal(Utf16ToUtf8(value->string));
    if (!bigint.ok()) return bigint.status();
    std::vector<uint8_t> big_endian(bigint->magnitude.rbegin(), bigint->magnitude.rend());
    return KeyPart::BigIntFromMagnitude(bigint->negative, std::move(big_endian));
  }
  if (type->string == u"boolean") {
    if (value->type != JsonNode::Type::kTrue && value->type != JsonNode::Type::kFalse) return bad;
    return KeyPart::Bool(value->type == JsonNode::Type::kTrue);
  }
  if (type->string == u"Uint8Array") {
    if (!value->IsString()) return bad;
    Result<std::string> bytes = DecodeBase64(value->string);
    if (!bytes.ok()) return bad;
    return KeyPart::Bytes(*bytes);
  }
  return InvalidArgument("bad KvKeyPartJSON: unknown type " + Utf16ToUtf8(type->string));
}

// Whether `node` is a raw key part, {"type": "raw", ...}.
bool IsRawKeyPart(const JsonNode& node) {
  if (node.type != JsonNode::Type::kObject) return false;
  const JsonNode* type = node.Find(u"type");
  return type != nullptr && type->IsString() && type->string == u"raw";
}

Result<std::vector<KeyPart>> KeyFromNode(const JsonNode& node) {
  if (node.type != JsonNode::Type::kArray) return InvalidArgument("bad KvKeyJSON: not an array");
  std::vector<KeyPart> key;
  for (const JsonNode& item : node.items) {
    if (IsRawKeyPart(item)) {
      return InvalidArgument("bad KvKeyJSON: a raw part names bytes, not a Deno key part");
    }
    Result<KeyPart> part = KeyPartFromNode(item);
    if (!part.ok()) return part.status();
    key.push_back(std::move(*part));
  }
  return key;
}

// The bytes a KvKeyJSON names: each part's encoding in turn, a raw part's bytes as they are.
Result<std::string> KeyBytesFromNode(const JsonNode& node) {
  if (node.type != JsonNode::Type::kArray) return InvalidArgument("bad KvKeyJSON: not an array");
  std::string out;
  for (const JsonNode& item : node.items) {
    if (IsRawKeyPart(item)) {
      const JsonNode* value = item.Find(u"value");
      if (value == nullptr || !value->IsString()) {
        return InvalidArgument("bad KvKeyPartJSON: a raw part's value is base64 of its bytes");
      }
      Result<std::string> bytes = DecodeBase64(value->string);
      if (!bytes.ok()) return InvalidArgument("bad KvKeyPartJSON: " + bytes.status().message());
      out += *bytes;
      continue;
    }
    Result<KeyPart> part = KeyPartFromNode(item);
    if (!part.ok()) return part.status();
    out += EncodeKey({std::move(*part)});
  }
  return out;
}

Result<KvValue> KvValueFromNode(const JsonNode& node, uint32_t format_version,
                                const V8JsonOptions& options) {
  if (node.type == JsonNode::Type::kObject) {
    const JsonNode* type = node.Find(u"type");
    const JsonNode* value = node.Find(u"value");
    if (type != nullptr && type->IsString()) {
      if (type->string == u"KvU64") {
        if (value == nullptr || !value->IsString()) return Bad("KvU64 value is not a string");
        Result<BigInt> number = BigIntFromDecimal(Utf16ToUtf8(value->string));
        if (!number.ok()) return number.status();
        std::optional<uint64_t> u64 = number->ToU64();
        if (!u64) return Bad("KvU64 outside 0..2^64-1");
        std::string bytes;
        for (int shift = 0; shift < 64; shift += 8)
          bytes.push_back(static_cast<char>(*u64 >> shift));
        return KvValue{std::move(bytes), ValueEncoding::kLe64};
      }
      if (type->string == u"v8") {
        if (value == nullptr || !value->IsString()) return Bad("v8 value is not a string");
        Result<std::string> bytes = DecodeBase64(value->string);
        if (!bytes.ok()) return Bad(bytes.status().message());
        V8Reader reader(*bytes);
        if (!reader.ReadHeader()) return Bad("v8 bytes without a V8 header");
        return KvValue{std::move(*bytes), ValueEncoding::kV8};
      }
      if (type->string == u"Uint8Array" && node.Find(u"buffer") == nullptr &&
          node.Find(u"maxByteLength") == nullptr && node.Find(u"byteOffset") == nullptr &&
          node.Find(u"lengthTracking") == nullptr && value != nullptr && value->IsString()) {
        Result<std::string> bytes = DecodeBase64(value->string);
        if (!bytes.ok()) return Bad(bytes.status().message());
        Result<uint64_t> length = UintMember(node, u"byteLength", bytes->size());
        if (length.ok() && *length == bytes->size()) {
          return KvValue{std::move(*bytes), ValueEncoding::kBytes};
        }
      }
    }
  }
  Result<V8Value> tree = v8json::BuildValue(node, options);
  if (!tree.ok()) return tree.status();
  Result<std::string> bytes = EncodeV8Value(*tree, format_version, options.max_depth);
  if (!bytes.ok()) return bytes.status();
  return KvValue{std::move(*bytes), ValueEncoding::kV8};
}

}  // namespace

std::string BigIntToDecimal(const BigInt& value) {
  std::vector<uint32_t> limbs = ToLimbs(value.magnitude);
  while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
  if (limbs.empty()) return "0";
  std::vector<uint32_t> chunks;  // base 10^9, least significant first
  while (!limbs.empty()) {
    uint64_t remainder = 0;
    for (size_t i = limbs.size(); i-- > 0;) {
      const uint64_t current = remainder << 32 | limbs[i];
      limbs[i] = static_cast<uint32_t>(current / kTen9);
      remainder = current % kTen9;
    }
    chunks.push_back(static_cast<uint32_t>(remainder));
    while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
  }
  std::string out = value.negative ? "-" : "";
  out += std::to_string(chunks.back());
  for (size_t i = chunks.size() - 1; i-- > 0;) {
    const std::string digits = std::to_string(chunks[i]);
    out += std::string(9 - digits.size(), '0') + digits;
  }
  return out;
}

Result<BigInt> BigIntFromDecimal(std::string_view text) {
  BigInt result;
  if (!text.empty() && text[0] == '-') {
    result.negative = true;
    text.remove_prefix(1);
  }
  if (text.empty()) return InvalidArgument("bad bigint: no digits");
  std::vector<uint32_t> limbs;
  for (size_t start = 0; start < text.size();) {
    const size_t n = std::min<size_t>(9, text.size() - start);
    uint32_t chunk = 0;
    uint32_t scale = 1;
    for (size_t i = 0; i < n; ++i) {
      const char c = text[start + i];
      if (c < '0' || c > '9') return InvalidArgument("bad bigint: not a decimal integer");
      chunk = chunk * 10 + static_cast<uint32_t>(c - '0');
      scale *= 10;
    }
    start += n;
    uint64_t carry = chunk;
    for (uint32_t& limb : limbs) {
      const uint64_t current = static_cast<uint64_t>(limb) * scale + carry;
      limb = static_cast<uint32_t>(current);
      carry = current >> 32;
    }
    if (carry != 0) limbs.push_back(static_cast<uint32_t>(carry));
  }
  for (uint32_t limb : limbs) {
    for (int shift = 0; shift < 32; shift += 8) {
      result.magnitude.push_back(static_cast<uint8_t>(limb >> shift));
    }
  }
  result.Normalize();
  return result;
}

Result<std::string> V8ValueToJson(const V8Value& value, const V8JsonOptions& options) {
  return v8json::WriteValueJson(value, options);
}

Result<V8Value> V8ValueFromJson(std::string_view json, const V8JsonOptions& options) {
  Result<JsonNode> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  return v8json::BuildValue(*node, options);
}

std::string KeyPartToJson(const KeyPart& part) {
  std::string out = "{\"type\":\"";
  switch (part.type()) {
    case KeyPart::Type::kBytes:
      out += "Uint8Array\",\"value\":\"" + Base64Url(part.data()) + "\"}";
      return out;
    case KeyPart::Type::kString:
      out += "string\",\"value\":";
      AppendJsonQuoted(part.data(), &out);
      out.push_back('}');
      return out;
    case KeyPart::Type::kBigInt: {
      BigInt value;
      value.negative = part.negative();
      value.magnitude.assign(part.magnitude().rbegin(), part.magnitude().rend());
      out += "bigint\",\"value\":\"" + BigIntToDecimal(value) + "\"}";
      return out;
    }
    case KeyPart::Type::kFloat:
      out += "number\",\"value\":";
      AppendNumberValue(part.number(), &out);
      out.push_back('}');
      return out;
    case KeyPart::Type::kFalse:
    case KeyPart::Type::kTrue:
      out += part.boolean() ? "boolean\",\"value\":true}" : "boolean\",\"value\":false}";
      return out;
  }
  return out;
}

Result<KeyPart> KeyPartFromJson(std::string_view json) {
  Result<JsonNode> node = ParseJson(json, V8JsonOptions{});
  if (!node.ok()) return node.status();
  return KeyPartFromNode(*node);
}

std::string KeyToJson(std::string_view encoded) {
  size_t consumed = 0;
  const std::vector<KeyPart> key = DecodeCanonicalKeyPrefix(encoded, &consumed);
  std::string out = "[";
  for (size_t i = 0; i < key.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(KeyPartToJson(key[i]));
  }
  if (consumed < encoded.size()) {
    if (!key.empty()) out.push_back(',');
    out += "{\"type\":\"raw\",\"value\":\"" + Base64Url(encoded.substr(consumed)) + "\"}";
  }
  out.push_back(']');
  return out;
}

Result<std::vector<KeyPart>> KeyFromJson(std::string_view json) {
  Result<JsonNode> node = ParseJson(json, V8JsonOptions{});
  if (!node.ok()) return node.status();
  return KeyFromNode(*node);
}

Result<std::string> KeyBytesFromJson(std::string_view json) {
  Result<JsonNode> node = ParseJson(json, V8JsonOptions{});
  if (!node.ok()) return node.status();
  return KeyBytesFromNode(*node);
}

Result<std::string> KvValueToJson(const KvValue& value, const V8JsonOptions& options) {
  switch (value.encoding) {
    case ValueEncoding::kLe64: {
      if (value.data.size() != 8) return InvalidArgument("a KvU64 value is not 8 bytes");
      uint64_t number = 0;
      for (size_t i = 8; i-- > 0;) number = number << 8 | static_cast<uint8_t>(value.data[i]);
      return "{\"type\":\"KvU64\",\"value\":\"" + std::to_string(number) + "\"}";
    }
    case ValueEncoding::kBytes:
      return "{\"type\":\"Uint8Array\",\"value\":\"" + Base64Url(value.data) + "\"}";
    case ValueEncoding::kV8:
      break;
  }
  Result<V8Value> tree = DecodeV8Value(value.data);
  if (tree.ok()) {
    Result<std::string> json = V8ValueToJson(*tree, options);
    if (!json.ok() && options.expand_shared) {
      V8JsonOptions with_refs = options;
      with_refs.expand_shared = false;
      json = V8ValueToJson(*tree, with_refs);
    }
    if (json.ok()) return json;
  }
  return "{\"type\":\"v8\",\"value\":\"" + Base64Url(value.data) + "\"}";
}

Result<KvValue> KvValueFromJson(std::string_view json, uint32_t format_version,
                                const V8JsonOptions& options) {
  Result<JsonNode> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  return KvValueFromNode(*node, format_version, options);
}

std::string ExpiryToJsonTime(int64_t expire_at_ms) {
  const auto bound = static_cast<int64_t>(kMaxDateMs);
  return FormatIsoDate(static_cast<double>(std::clamp(expire_at_ms, -bound, bound)));
}

Result<int64_t> ExpiryFromJsonTime(std::string_view text) {
  Result<double> ms = ParseIsoDate(text);
  if (!ms.ok()) {
    return InvalidArgument("'" + std::string(text.substr(0, 64)) +
                           "' is not a time such as 2026-11-27T10:00:00.000Z (RFC 3339, as "
                           "Date.prototype.toISOString writes it; an offset such as +01:00 may "
                           "replace the Z)");
  }
  return static_cast<int64_t>(*ms);
}

Result<std::string> EntryToJson(const Entry& entry, const V8JsonOptions& options) {
  Result<std::string> value = KvValueToJson(KvValue{entry.value, entry.encoding}, options);
  if (!value.ok()) return value.status();
  std::string out = "{\"key\":" + KeyToJson(entry.key) + ",\"value\":" + *value +
                    ",\"versionstamp\":\"" +
                    VersionstampToHex(VersionToVersionstamp(entry.version)) + "\"";
  if (entry.expire_at_ms >= 0) {
    out += ",\"expires_at\":\"" + ExpiryToJsonTime(entry.expire_at_ms) + "\"";
  }
  out.push_back('}');
  return out;
}

Result<Entry> EntryFromJson(std::string_view json, uint32_t format_version,
                            const V8JsonOptions& options) {
  Result<JsonNode> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  if (node->type != JsonNode::Type::kObject)
    return InvalidArgument("bad KvEntryJSON: not an object");
  const JsonNode* key = node->Find(u"key");
  const JsonNode* value = node->Find(u"value");
  const JsonNode* stamp = node->Find(u"versionstamp");
  if (key == nullptr || value == nullptr || stamp == nullptr || !stamp->IsString()) {
    return InvalidArgument("bad KvEntryJSON: needs key, value and versionstamp");
  }
  Result<std::string> key_bytes = KeyBytesFromNode(*key);
  if (!key_bytes.ok()) return key_bytes.status();
  Result<KvValue> kv_value = KvValueFromNode(*value, format_version, options);
  if (!kv_value.ok()) return kv_value.status();
  const std::string hex = Utf16ToUtf8(stamp->string);
  Versionstamp bytes{};
  bool ok = hex.size() == 20;
  for (size_t i = 0; ok && i < 10; ++i) {
    const auto from = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, bytes[i], 16);
    ok = from.ec == std::errc() && from.ptr == hex.data() + 2 * i + 2;
  }
  if (!ok || bytes[8] != 0 || bytes[9] != 0 || VersionstampToVersion(bytes) < 0) {
    return InvalidArgument("bad KvEntryJSON: versionstamp is not 20 hex digits ending in 0000");
  }
  Entry entry;
  // Absent or null: it never expires (dumps written before expiry was exported have none).
  if (const JsonNode* expires = node->Find(u"expires_at");
      expires != nullptr && expires->type != JsonNode::Type::kNull) {
    if (!expires->IsString()) {
      return InvalidArgument("bad KvEntryJSON: expires_at is not an RFC 3339 time or null");
    }
    Result<int64_t> ms = ExpiryFromJsonTime(Utf16ToUtf8(expires->string));
    if (!ms.ok()) return InvalidArgument("bad KvEntryJSON: expires_at " + ms.status().message());
    entry.expire_at_ms = std::max<int64_t>(*ms, 0);  // before 1970: long expired, not "never"
  }
  entry.key = std::move(*key_bytes);
  entry.value = std::move(kv_value->data);
  entry.encoding = kv_value->encoding;
  entry.version = VersionstampToVersion(bytes);
  return entry;
}

}  // namespace kvc::codec
