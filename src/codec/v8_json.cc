#include "codec/v8_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codec/civil_time.h"
#include "codec/json_text.h"
#include "codec/utf8.h"
#include "codec/versionstamp.h"
#include "common/random.h"

// The JSON here is read and written by hand rather than with RapidJSON: JS strings may hold lone
// surrogates, which JSON.stringify writes as \uD800-style escapes and RapidJSON 1.1 rejects, and
// the reader must bound nesting and reject duplicate member names.

namespace kvc::codec {
namespace {

// --------------------------------------------------------------------------------------------
// A small JSON document model and reader.

struct JsonMember;

struct Json {
  enum class Type { kNull, kFalse, kTrue, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  double number = 0;
  std::u16string string;  // kString: UTF-16 code units (lone surrogates kept)
  std::vector<Json> items;
  std::vector<JsonMember> members;

  const Json* Find(std::u16string_view name) const;
  bool IsString() const { return type == Type::kString; }
};

struct JsonMember {
  std::u16string first;  // the name
  Json second;           // the value
};

const Json* Json::Find(std::u16string_view name) const {
  for (const auto& [key, value] : members) {
    if (key == name) return &value;
  }
  return nullptr;
}

class JsonReader {
 public:
  JsonReader(std::string_view text, size_t max_depth) : text_(text), max_depth_(max_depth) {}

  Result<Json> Run() {
    Json value;
    SkipSpace();
    if (Status s = ReadValue(&value, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the value");
    return value;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("invalid JSON: " + what + " at offset " + std::to_string(pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ReadValue(Json* out, size_t depth) {
    if (depth > max_depth_) return InvalidArgument("JSON too deep");
    if (pos_ >= text_.size()) return Error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return ReadObject(out, depth);
    if (c == '[') return ReadArray(out, depth);
    if (c == '"') {
      out->type = Json::Type::kString;
      return ReadString(&out->string);
    }
    if (Consume("null")) {
      out->type = Json::Type::kNull;
      return Status::Ok();
    }
    if (Consume("true")) {
      out->type = Json::Type::kTrue;
      return Status::Ok();
    }
    if (Consume("false")) {
      out->type = Json::Type::kFalse;
      return Status::Ok();
    }
    return ReadNumber(out);
  }

  Status ReadNumber(Json* out) {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    const size_t int_start = pos_;
    const size_t int_digits = digits();
    if (int_digits == 0 || (int_digits > 1 && text_[int_start] == '0')) {
      return Error("bad number");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("bad number");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("bad number");
    }
    const auto result = std::from_chars(text_.data() + start, text_.data() + pos_, out->number);
    if (result.ec != std::errc() || result.ptr != text_.data() + pos_) {
      return Error("number out of range");
    }
    out->type = Json::Type::kNumber;
    return Status::Ok();
  }

  bool ReadHex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return false;
    *out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
      *out = *out << 4 | digit;
    }
    return true;
  }

  // Reads a string literal into UTF-16 units. The raw text must be well-formed UTF-8.
  Status ReadString(std::u16string* out) {
    ++pos_;  // the opening quote
    out->clear();
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const auto c = static_cast<uint8_t>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c < 0x20) return Error("control character in string");
      if (c == '\\') {
        if (++pos_ >= text_.size()) return Error("unterminated string");
        const char e = text_[pos_++];
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out->push_back(static_cast<char16_t>(e));
            break;
          case 'b':
            out->push_back(u'\b');
            break;
          case 'f':
            out->push_back(u'\f');
            break;
          case 'n':
            out->push_back(u'\n');
            break;
          case 'r':
            out->push_back(u'\r');
            break;
          case 't':
            out->push_back(u'\t');
            break;
          case 'u': {
            uint32_t unit;
            if (!ReadHex4(&unit)) return Error("bad \\u escape");
            out->push_back(static_cast<char16_t>(unit));  // surrogates kept as they are
            break;
          }
          default:
            return Error("bad escape");
        }
        continue;
      }
      if (c < 0x80) {
        out->push_back(c);
        ++pos_;
        continue;
      }
      const std::optional<uint32_t> cp = NextCodePoint(text_, &pos_);
      if (!cp) return Error("malformed UTF-8");
      if (*cp < 0x10000) {
        out->push_back(static_cast<char16_t>(*cp));
      } else {
        out->push_back(static_cast<char16_t>(0xD800 + ((*cp - 0x10000) >> 10)));
        out->push_back(static_cast<char16_t>(0xDC00 + ((*cp - 0x10000) & 0x3FF)));
      }
    }
  }

  Status ReadArray(Json* out, size_t depth) {
    ++pos_;
    out->type = Json::Type::kArray;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      Json item;
      if (Status s = ReadValue(&item, depth + 1); !s.ok()) return s;
      out->items.push_back(std::move(item));
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated array");
      if (text_[pos_] == ']') {
        ++pos_;
        return Status::Ok();
      }
      if (text_[pos_++] != ',') return Error("expected , or ]");
    }
  }

  Status ReadObject(Json* out, size_t depth) {
    ++pos_;
    out->type = Json::Type::kObject;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Status::Ok();
    }
    std::unordered_set<std::u16string> names;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a member name");
      std::u16string name;
      if (Status s = ReadString(&name); !s.ok()) return s;
      if (!names.insert(name).second) return Error("duplicate member " + Utf16ToUtf8(name));
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_++] != ':') return Error("expected :");
      SkipSpace();
      Json value;
      if (Status s = ReadValue(&value, depth + 1); !s.ok()) return s;
      out->members.push_back(JsonMember{std::move(name), std::move(value)});
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated object");
      if (text_[pos_] == '}') {
        ++pos_;
        return Status::Ok();
      }
      if (text_[pos_++] != ',') return Error("expected , or }");
    }
  }

  std::string_view text_;
  size_t max_depth_;
  size_t pos_ = 0;
};

// --------------------------------------------------------------------------------------------
// Writing helpers.

void AppendQuoted(std::u16string_view units, std::string* out) {
  if (!HasLoneSurrogate(units)) {
    AppendJsonQuoted(Utf16ToUtf8(units), out);
    return;
  }
  // Runs without lone surrogates go through the one escaper; lone surrogates become \uXXXX.
  out->push_back('"');
  size_t start = 0;
  const auto flush = [&](size_t end) {
    std::string run;
    AppendJsonQuoted(Utf16ToUtf8(units.substr(start, end - start)), &run);
    out->append(run, 1, run.size() - 2);
  };
  for (size_t i = 0; i < units.size(); ++i) {
    const uint32_t u = units[i];
    if (u >= 0xD800 && u <= 0xDBFF && i + 1 < units.size() && units[i + 1] >= 0xDC00 &&
        units[i + 1] <= 0xDFFF) {
      ++i;
      continue;
    }
    if (u < 0xD800 || u > 0xDFFF) continue;
    flush(i);
    static constexpr char kHex[] = "0123456789abcdef";
    out->append("\\u");
    for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(u >> shift) & 0xF]);
    start = i + 1;
  }
  flush(units.size());
  out->push_back('"');
}

// A JSON number, or "NaN" / "Infinity" / "-Infinity" as @deno/kv-utils writes them.
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

void AppendUint(uint64_t value, std::string* out) { out->append(std::to_string(value)); }

std::string Base64Url(std::string_view bytes) { return Base64UrlEncode(std::string(bytes)); }

// Accepts both base64 alphabets, with or without padding.
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
// Dates: milliseconds since the epoch <-> ISO 8601 as Date.prototype.toISOString writes it.

constexpr double kMaxTime = 8.64e15;
constexpr int64_t kMsPerDay = 86'400'000;

// Back from days since 1970-01-01 to a date (DaysFromCivil, civil_time.h, is the other way).
void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

// TimeClip: NaN outside +-8.64e15, else truncated toward zero (and -0 becomes +0).
double TimeClip(double ms) {
  if (!std::isfinite(ms) || std::fabs(ms) > kMaxTime) return std::nan("");
  return std::trunc(ms) + 0.0;
}

std::string FormatIsoDate(double ms) {
  const auto t = static_cast<int64_t>(ms);
  int64_t days = t / kMsPerDay;
  int64_t rem = t % kMsPerDay;
  if (rem < 0) {
    rem += kMsPerDay;
    --days;
  }
  int64_t y;
  int64_t m;
  int64_t d;
  CivilFromDays(days, &y, &m, &d);
  char buf[48];
  const int hh = static_cast<int>(rem / 3'600'000);
  const int mm = static_cast<int>(rem / 60'000 % 60);
  const int ss = static_cast<int>(rem / 1000 % 60);
  const int mss = static_cast<int>(rem % 1000);
  if (y >= 0 && y <= 9999) {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", static_cast<int>(y),
                  static_cast<int>(m), static_cast<int>(d), hh, mm, ss, mss);
  } else {
    std::snprintf(buf, sizeof(buf), "%c%06d-%02d-%02dT%02d:%02d:%02d.%03dZ", y < 0 ? '-' : '+',
                  static_cast<int>(y < 0 ? -y : y), static_cast<int>(m), static_cast<int>(d), hh,
                  mm, ss, mss);
  }
  return buf;
}

// Parses the ECMAScript date-time string format: YYYY[-MM[-DD]] or +-YYYYYY..., optionally
// THH:mm[:ss[.fraction]] and then Z or +-HH:mm (required with a time: without one, JS reads local
// time).
Result<double> ParseIsoDate(std::string_view s) {
  const Status bad = InvalidArgument("bad date string");
  size_t pos = 0;
  const auto number = [&](size_t n, int64_t* out) {
    if (s.size() - pos < n) return false;
    *out = 0;
    for (size_t i = 0; i < n; ++i) {
      const char c = s[pos + i];
      if (c < '0' || c > '9') return false;
      *out = *out * 10 + (c - '0');
    }
    pos += n;
    return true;
  };
  const auto take = [&](char c) {
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  };
  int64_t year;
  if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const bool negative = s[pos++] == '-';
    if (!number(6, &year) || (negative && year == 0)) return bad;
    if (negative) year = -year;
  } else if (!number(4, &year)) {
    return bad;
  }
  int64_t month = 1;
  int64_t day = 1;
  if (take('-')) {
    if (!number(2, &month) || month < 1 || month > 12) return bad;
    if (take('-') && !number(2, &day)) return bad;
  }
  const int64_t days_in_month = DaysFromCivil(month == 12 ? year + 1 : year, month % 12 + 1, 1) -
                                DaysFromCivil(year, month, 1);
  if (day < 1 || day > days_in_month) return bad;
  int64_t hh = 0;
  int64_t mi = 0;
  int64_t ss = 0;
  double fraction = 0;
  int64_t offset_minutes = 0;
  if (take('T')) {
    if (!number(2, &hh) || !take(':') || !number(2, &mi) || hh > 24 || mi > 59) return bad;
    if (take(':')) {
      if (!number(2, &ss) || ss > 59) return bad;
      if (take('.')) {
        const size_t start = pos;
        double scale = 100;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
          fraction += (s[pos++] - '0') * scale;
          scale /= 10;
        }
        if (pos == start) return bad;
        fraction = std::trunc(fraction);
      }
    }
    if (hh == 24 && (mi != 0 || ss != 0 || fraction != 0)) return bad;
    if (!take('Z')) {
      if (pos >= s.size() || (s[pos] != '+' && s[pos] != '-')) return bad;
      const bool negative = s[pos++] == '-';
      int64_t oh;
      int64_t om;
      if (!number(2, &oh) || !take(':') || !number(2, &om) || oh > 23 || om > 59) return bad;
      offset_minutes = (negative ? -1 : 1) * (oh * 60 + om);
    }
  }
  if (pos != s.size()) return bad;
  const double ms = static_cast<double>(DaysFromCivil(year, month, day)) * kMsPerDay +
                    static_cast<double>(((hh * 60 + mi - offset_minutes) * 60 + ss) * 1000) +
                    fraction;
  if (std::fabs(ms) > kMaxTime) return InvalidArgument("date out of range");
  return ms;
}

// --------------------------------------------------------------------------------------------
// RegExp flags in the order of RegExp.prototype.flags.

constexpr std::u16string_view kRegExpFlagLetters = u"dgilmsuvy";
constexpr uint32_t kRegExpFlagBits[] = {128, 1, 2, 64, 4, 32, 16, 256, 8};

// --------------------------------------------------------------------------------------------
// V8Value -> JSON

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

std::u16string KeyName(const V8Value& key) {
  if (key.kind == V8Kind::kString) return key.string.units;
  const std::string text = V8NumberToString(key.number);
  return std::u16string(text.begin(), text.end());
}

class JsonWriter {
 public:
  explicit JsonWriter(const V8JsonOptions& options) : options_(options) {}

  Result<std::string> Run(const V8Value& value) {
    Index(value);
    if (Status s = Write(value, 0); !s.ok()) return s;
    return std::move(out_);
  }

 private:
  // Remembers where each id is, for expanding references.
  void Index(const V8Value& v) {
    if (v.id != kV8NoId) nodes_.emplace(v.id, &v);
    for (const V8Value& item : v.items) Index(item);
    for (const V8Property& p : v.properties) {
      Index(p.key);
      Index(p.value);
    }
  }

  Status Count(size_t n = 1) {
    written_ += n;
    if (written_ > options_.max_output_values) return InvalidArgument("JSON view too large");
    return Status::Ok();
  }

  // Numbers the JSON object that starts now; `v` may have no tree id (a Node host view's buffer).
  void BeginObject(const V8Value& v) {
    const uint32_t json_id = next_json_id_++;
    if (v.id != kV8NoId) {
      json_id_of_[v.id] = json_id;
      ++open_[v.id];
    }
  }
  void EndObject(const V8Value& v) {
    if (v.id != kV8NoId) --open_[v.id];
  }

  void TypeOpen(const char* type) {
    out_.append("{\"type\":\"");
    out_.append(type);
    out_.append("\"");
  }

  void WriteBytesMember(const char* name, std::string_view bytes) {
    out_.append(",\"");
    out_.append(name);
    out_.append("\":\"");
    out_.append(Base64Url(bytes));
    out_.push_back('"');
  }

  void WriteUintMember(const char* name, uint64_t value) {
    out_.append(",\"");
    out_.append(name);
    out_.append("\":");
    AppendUint(value, &out_);
  }

  Status WriteReference(uint32_t target, size_t depth) {
    auto node = nodes_.find(target);
    auto json_id = json_id_of_.find(target);
    if (node == nodes_.end() || json_id == json_id_of_.end()) {
      return InvalidArgument("unresolved reference " + std::to_string(target));
    }
    if (options_.expand_shared && open_[target] == 0) return Write(*node->second, depth);
    out_.append("{\"type\":\"ref\",\"value\":");
    AppendUint(json_id->second, &out_);
    out_.push_back('}');
    return Status::Ok();
  }

  Status WriteProperties(const std::vector<const V8Property*>& properties, size_t depth) {
    std::unordered_set<std::u16string> names;
    out_.push_back('{');
    bool first = true;
    for (const V8Property* p : properties) {
      std::u16string name = KeyName(p->key);
      if (!names.insert(name).second) {
        return InvalidArgument("duplicate property " + Utf16ToUtf8(name));
      }
      if (!first) out_.push_back(',');
      first = false;
      AppendQuoted(name, &out_);
      out_.push_back(':');
      if (Status s = Write(p->value, depth + 1); !s.ok()) return s;
    }
    out_.push_back('}');
    return Status::Ok();
  }

  Status WriteArray(const V8Value& v, size_t depth) {
    // Elements by index (dense items and index-named properties), the rest as "properties".
    std::map<uint32_t, const V8Value*> elements;
    std::vector<const V8Property*> others;
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (v.items[i].kind != V8Kind::kHole) elements.emplace(static_cast<uint32_t>(i), &v.items[i]);
    }
    for (const V8Property& p : v.properties) {
      uint32_t index;
      if (IsArrayIndexName(KeyName(p.key), &index)) {
        if (!elements.emplace(index, &p.value).second) {
          return InvalidArgument("duplicate array element " + std::to_string(index));
        }
      } else {
        others.push_back(&p);
      }
    }
    const uint64_t listed = elements.empty() ? 0 : uint64_t{elements.rbegin()->first} + 1;
    const uint64_t length = std::max<uint64_t>(v.length, listed);
    if (Status s = Count(listed); !s.ok()) return s;
    TypeOpen("Array");
    out_.append(",\"value\":[");
    uint64_t next = 0;
    for (const auto& [index, element] : elements) {
      for (; next < index; ++next) out_.append(next == 0 ? "null" : ",null");
      if (next > 0) out_.push_back(',');
      if (Status s = Write(*element, depth + 1); !s.ok()) return s;
      next = uint64_t{index} + 1;
    }
    out_.push_back(']');
    if (length > listed) WriteUintMember("length", length);
    if (!others.empty()) {
      out_.append(",\"properties\":");
      if (Status s = WriteProperties(others, depth); !s.ok()) return s;
    }
    out_.push_back('}');
    return Status::Ok();
  }

  Status WriteView(const V8Value& v, size_t depth) {
    if (v.items.size() != 1) return InvalidArgument("a view without exactly one buffer");
    const V8Value* buffer = &v.items[0];
    bool inline_buffer = true;
    if (buffer->kind == V8Kind::kReference) {
      auto it = nodes_.find(buffer->target);
      if (it == nodes_.end() || json_id_of_.count(buffer->target) == 0) {
        return InvalidArgument("unresolved reference " + std::to_string(buffer->target));
      }
      inline_buffer = options_.expand_shared;
      if (inline_buffer) buffer = it->second;
    }
    if (buffer->kind != V8Kind::kArrayBuffer && inline_buffer) {
      return InvalidArgument("a view whose buffer is not a buffer");
    }
    if (inline_buffer) BeginObject(*buffer);
    BeginObject(v);
    TypeOpen(V8ViewTypeName(v.view_type));
    // A length-tracking view's length is its buffer's (V8 writes 0 for it).
    const bool length_tracking = (v.view_flags & v8view::kFlagLengthTracking) != 0;
    if (inline_buffer) {
      WriteBytesMember("value", buffer->bytes);
      if (length_tracking) {
        if (v.byte_offset != 0) WriteUintMember("byteOffset", v.byte_offset);
        if (v.byte_length != 0) WriteUintMember("byteLength", v.byte_length);
      } else if (v.byte_offset != 0 || v.byte_length != buffer->bytes.size()) {
        WriteUintMember("byteOffset", v.byte_offset);
        WriteUintMember("byteLength", v.byte_length);
      }
      if (buffer->max_byte_length) WriteUintMember("maxByteLength", *buffer->max_byte_length);
      EndObject(*buffer);
    } else {
      out_.append(",\"buffer\":");
      if (Status s = WriteReference(v.items[0].target, depth + 1); !s.ok()) return s;
      WriteUintMember("byteOffset", v.byte_offset);
      WriteUintMember("byteLength", v.byte_length);
    }
    if (length_tracking) out_.append(",\"lengthTracking\":true");
    out_.push_back('}');
    EndObject(v);
    return Status::Ok();
  }

  Status WriteError(const V8Value& v, size_t depth) {
    TypeOpen(V8ErrorTypeName(v.error_type));
    out_.append(",\"value\":{");
    bool first = true;
    const auto member = [&](const char* name) {
      if (!first) out_.push_back(',');
      first = false;
      out_.push_back('"');
      out_.append(name);
      out_.append("\":");
    };
    if (v.message) {
      member("message");
      AppendQuoted(v.message->units, &out_);
    }
    if (v.has_cause && !v.items.empty()) {
      member("cause");
      if (Status s = Write(v.items[0], depth + 1); !s.ok()) return s;
    }
    if (v.stack) {
      member("stack");
      AppendQuoted(v.stack->units, &out_);
    }
    out_.append("}}");
    return Status::Ok();
  }

  Status Write(const V8Value& v, size_t depth) {
    if (depth > options_.max_depth) return InvalidArgument("JSON view too deep");
    if (Status s = Count(); !s.ok()) return s;
    if (v.kind == V8Kind::kReference) return WriteReference(v.target, depth);
    if (v.kind == V8Kind::kArrayBufferView) return WriteView(v, depth);
    const bool object_like = v.IsObjectLike();
    if (object_like) BeginObject(v);
    Status status = WriteBody(v, depth);
    if (object_like) EndObject(v);
    return status;
  }

  Status WriteBody(const V8Value& v, size_t depth) {
    switch (v.kind) {
      case V8Kind::kUndefined:
        out_.append("{\"type\":\"undefined\"}");
        return Status::Ok();
      case V8Kind::kNull:
        out_.append("{\"type\":\"null\",\"value\":null}");
        return Status::Ok();
      case V8Kind::kBoolean:
      case V8Kind::kBooleanObject:
        TypeOpen(v.kind == V8Kind::kBoolean ? "boolean" : "BooleanObject");
        out_.append(v.boolean ? ",\"value\":true}" : ",\"value\":false}");
        return Status::Ok();
      case V8Kind::kNumber:
      case V8Kind::kNumberObject:
        TypeOpen(v.kind == V8Kind::kNumber ? "number" : "NumberObject");
        out_.append(",\"value\":");
        AppendNumberValue(v.number, &out_);
        out_.push_back('}');
        return Status::Ok();
      case V8Kind::kBigInt:
      case V8Kind::kBigIntObject:
        TypeOpen(v.kind == V8Kind::kBigInt ? "bigint" : "BigIntObject");
        out_.append(",\"value\":\"");
        out_.append(BigIntToDecimal(v.bigint));
        out_.append("\"}");
        return Status::Ok();
      case V8Kind::kString:
      case V8Kind::kStringObject:
        TypeOpen(v.kind == V8Kind::kString ? "string" : "StringObject");
        out_.append(",\"value\":");
        AppendQuoted(v.string.units, &out_);
        out_.push_back('}');
        return Status::Ok();
      case V8Kind::kHole:
        return InvalidArgument("a hole outside an array");
      case V8Kind::kObject: {
        TypeOpen("object");
        out_.append(",\"value\":");
        std::vector<const V8Property*> properties;
        for (const V8Property& p : v.properties) properties.push_back(&p);
        if (Status s = WriteProperties(properties, depth); !s.ok()) return s;
        out_.push_back('}');
        return Status::Ok();
      }
      case V8Kind::kArray:
        return WriteArray(v, depth);
      case V8Kind::kDate: {
        TypeOpen("Date");
        const double ms = TimeClip(v.number);
        out_.append(",\"value\":");
        if (std::isnan(ms)) {
          out_.append("null");
        } else {
          out_.push_back('"');
          out_.append(FormatIsoDate(ms));
          out_.push_back('"');
        }
        out_.push_back('}');
        return Status::Ok();
      }
      case V8Kind::kRegExp: {
        TypeOpen("RegExp");
        std::u16string text = u"/" + v.string.units + u"/";
        for (size_t i = 0; i < kRegExpFlagLetters.size(); ++i) {
          if ((v.regexp_flags & kRegExpFlagBits[i]) != 0) text.push_back(kRegExpFlagLetters[i]);
        }
        out_.append(",\"value\":");
        AppendQuoted(text, &out_);
        out_.push_back('}');
        return Status::Ok();
      }
      case V8Kind::kMap:
      case V8Kind::kSet: {
        const bool is_map = v.kind == V8Kind::kMap;
        TypeOpen(is_map ? "Map" : "Set");
        out_.append(",\"value\":[");
        for (size_t i = 0; i < v.items.size(); ++i) {
          if (i > 0) out_.push_back(',');
          if (is_map && i % 2 == 0) out_.push_back('[');
          if (Status s = Write(v.items[i], depth + 2); !s.ok()) return s;
          if (is_map && i % 2 == 1) out_.push_back(']');
        }
        if (is_map && v.items.size() % 2 != 0) return InvalidArgument("a map with an odd count");
        out_.append("]}");
        return Status::Ok();
      }
      case V8Kind::kArrayBuffer:
        TypeOpen("ArrayBuffer");
        WriteBytesMember("value", v.bytes);
        if (v.max_byte_length) WriteUintMember("maxByteLength", *v.max_byte_length);
        out_.push_back('}');
        return Status::Ok();
      case V8Kind::kError:
        return WriteError(v, depth);
      case V8Kind::kHostObject:
        if (v.items.size() != 1) return InvalidArgument("a host object without its value");
        TypeOpen("HostObject");
        out_.append(",\"value\":");
        if (Status s = Write(v.items[0], depth + 1); !s.ok()) return s;
        out_.push_back('}');
        return Status::Ok();
      case V8Kind::kArrayBufferView:
      case V8Kind::kReference:
        break;  // handled in Write()
    }
    return InvalidArgument("unknown kind");
  }

  const V8JsonOptions& options_;
  std::string out_;
  size_t written_ = 0;
  uint32_t next_json_id_ = 0;
  std::unordered_map<uint32_t, const V8Value*> nodes_;
  std::unordered_map<uint32_t, uint32_t> json_id_of_;  // the latest JSON number of a tree id
  std::unordered_map<uint32_t, int> open_;             // emissions of a tree id not yet closed
};

// --------------------------------------------------------------------------------------------
// JSON -> V8Value

Status Bad(const std::string& what) { return InvalidArgument("bad KvValueJSON: " + what); }

std::optional<V8ViewType> ViewTypeFromName(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(V8ViewType::kDataView); ++i) {
    if (name == V8ViewTypeName(static_cast<V8ViewType>(i))) return static_cast<V8ViewType>(i);
  }
  return std::nullopt;
}

std::optional<V8ErrorType> ErrorTypeFromName(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(V8ErrorType::kUriError); ++i) {
    if (name == V8ErrorTypeName(static_cast<V8ErrorType>(i))) return static_cast<V8ErrorType>(i);
  }
  return std::nullopt;
}

Result<double> NumberFromJson(const Json* value) {
  if (value == nullptr) return Bad("missing value");
  if (value->type == Json::Type::kNumber) return value->number;
  if (value->IsString()) {
    if (value->string == u"NaN") return std::nan("");
    if (value->string == u"Infinity") return HUGE_VAL;
    if (value->string == u"-Infinity") return -HUGE_VAL;
  }
  return Bad("not a number");
}

Result<uint64_t> UintMember(const Json& node, std::u16string_view name, uint64_t fallback) {
  const Json* member = node.Find(name);
  if (member == nullptr) return fallback;
  if (member->type != Json::Type::kNumber || member->number < 0 ||
      member->number != std::trunc(member->number) || member->number > 9007199254740991.0) {
    return Bad(Utf16ToUtf8(name) + " is not a non-negative integer");
  }
  return static_cast<uint64_t>(member->number);
}

class ValueBuilder {
 public:
  explicit ValueBuilder(const V8JsonOptions& options) : options_(options) {}

  Status Build(const Json& node, V8Value* out, size_t depth) {
    if (depth > options_.max_depth) return InvalidArgument("JSON too deep");
    if (node.type != Json::Type::kObject) return Bad("a value is not an object");
    const Json* type_node = node.Find(u"type");
    if (type_node == nullptr || !type_node->IsString()) return Bad("missing type");
    const std::string type = Utf16ToUtf8(type_node->string);
    const Json* value = node.Find(u"value");

    if (type == "undefined") {
      *out = V8Value::Undefined();
    } else if (type == "null") {
      *out = V8Value::Null();
    } else if (type == "boolean" || type == "BooleanObject") {
      if (value == nullptr ||
          (value->type != Json::Type::kTrue && value->type != Json::Type::kFalse)) {
        return Bad(type + " value is not a boolean");
      }
      *out = V8Value::Boolean(value->type == Json::Type::kTrue);
      if (type == "BooleanObject") Boxed(V8Kind::kBooleanObject, out);
    } else if (type == "number" || type == "NumberObject") {
      Result<double> number = NumberFromJson(value);
      if (!number.ok()) return number.status();
      *out = V8Value::Number(*number);
      if (type == "NumberObject") Boxed(V8Kind::kNumberObject, out);
    } else if (type == "bigint" || type == "BigIntObject") {
      if (value == nullptr || !value->IsString()) return Bad("bigint value is not a string");
      Result<BigInt> bigint = BigIntFromDecimal(Utf16ToUtf8(value->string));
      if (!bigint.ok()) return bigint.status();
      *out = V8Value::FromBigInt(std::move(*bigint));
      if (type == "BigIntObject") Boxed(V8Kind::kBigIntObject, out);
    } else if (type == "string" || type == "StringObject") {
      if (value == nullptr || !value->IsString()) return Bad("string value is not a string");
      *out = V8Value::StringUtf16(value->string);
      if (type == "StringObject") Boxed(V8Kind::kStringObject, out);
    } else if (type == "object" || type == "json_object") {
      return BuildObject(value, out, depth);
    } else if (type == "Array" || type == "json_array") {
      return BuildArray(node, value, out, depth);
    } else if (type == "Map" || type == "json_map" || type == "Set" || type == "json_set") {
      return BuildCollection(type == "Map" || type == "json_map", value, out, depth);
    } else if (type == "Date") {
      return BuildDate(value, out);
    } else if (type == "RegExp") {
      return BuildRegExp(value, out);
    } else if (type == "ArrayBuffer") {
      return BuildBuffer(node, value, out);
    } else if (std::optional<V8ViewType> view = ViewTypeFromName(type)) {
      return BuildView(*view, node, value, out, depth);
    } else if (std::optional<V8ErrorType> error = ErrorTypeFromName(type)) {
      return BuildError(*error, value, out, depth);
    } else if (type == "HostObject") {
      if (value == nullptr) return Bad("HostObject without value");
      out->kind = V8Kind::kHostObject;
      out->id = next_id_++;
      V8Value inner;
      if (Status s = Build(*value, &inner, depth + 1); !s.ok()) return s;
      out->items.push_back(std::move(inner));
    } else if (type == "ref") {
      if (value == nullptr || value->type != Json::Type::kNumber || value->number < 0 ||
          value->number != std::trunc(value->number) || value->number >= next_id_) {
        return Bad("ref to no earlier object");
      }
      *out = V8Value::Reference(static_cast<uint32_t>(value->number));
    } else if (type == "KvU64" || type == "v8") {
      return Bad(type + " can only be a whole KV value");
    } else {
      return Bad("unknown type " + type);
    }
    return Status::Ok();
  }

 private:
  void Boxed(V8Kind kind, V8Value* v) {
    v->kind = kind;
    v->id = next_id_++;
  }

  // A property key: array-index names as numbers, as V8 writes them, others as strings.
  static V8Value Key(const std::u16string& name) {
    uint32_t index;
    if (IsArrayIndexName(name, &index)) {
      V8Value key = V8Value::Number(index);
      return key;
    }
    return V8Value::StringUtf16(name);
  }

  Status BuildObject(const Json* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != Json::Type::kObject) {
      return Bad("object value is not an object");
    }
    *out = V8Value::Object(next_id_++);
    // Built in document order (so ids follow it), then ordered as V8 writes keys: array
    // indices first, ascending, then the others in order.
    for (const auto& [name, member] : value->members) {
      V8Value item;
      if (Status s = Build(member, &item, depth + 2); !s.ok()) return s;
      out->Add(Key(name), std::move(item));
    }
    std::stable_sort(out->properties.begin(), out->properties.end(),
                     [](const V8Property& a, const V8Property& b) {
                       const bool a_index = a.key.kind == V8Kind::kNumber;
                       const bool b_index = b.key.kind == V8Kind::kNumber;
                       if (a_index != b_index) return a_index;
                       return a_index && a.key.number < b.key.number;
                     });
    return Status::Ok();
  }

  Status BuildArray(const Json& node, const Json* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != Json::Type::kArray) {
      return Bad("Array value is not an array");
    }
    Result<uint64_t> length = UintMember(node, u"length", value->items.size());
    if (!length.ok()) return length.status();
    if (*length < value->items.size() || *length > 0xFFFFFFFFull) return Bad("bad Array length");
    bool holes = *length != value->items.size();
    for (const Json& item : value->items) holes = holes || item.type == Json::Type::kNull;
    *out = V8Value::Array(next_id_++);
    out->length = static_cast<uint32_t>(*length);
    out->dense = !holes;
    for (size_t i = 0; i < value->items.size(); ++i) {
      const Json& item = value->items[i];
      if (item.type == Json::Type::kNull) continue;
      V8Value element;
      if (Status s = Build(item, &element, depth + 2); !s.ok()) return s;
      if (holes) {
        out->Add(V8Value::Number(static_cast<double>(i)), std::move(element));
      } else {
        out->items.push_back(std::move(element));
      }
    }
    if (const Json* properties = node.Find(u"properties")) {
      if (properties->type != Json::Type::kObject) return Bad("Array properties not an object");
      for (const auto& [name, item] : properties->members) {
        uint32_t index;
        if (IsArrayIndexName(name, &index) || name == u"length") {
          return Bad("Array properties may not hold indices or length");
        }
        V8Value element;
        if (Status s = Build(item, &element, depth + 2); !s.ok()) return s;
        out->Add(V8Value::StringUtf16(name), std::move(element));
      }
    }
    return Status::Ok();
  }

  Status BuildCollection(bool is_map, const Json* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != Json::Type::kArray) {
      return Bad("Map or Set value is not an array");
    }
    *out = is_map ? V8Value::Map(next_id_++) : V8Value::Set(next_id_++);
    for (const Json& entry : value->items) {
      if (is_map && (entry.type != Json::Type::kArray || entry.items.size() != 2)) {
        return Bad("a Map entry is not a [key, value] pair");
      }
      const std::vector<const Json*> parts =
          is_map ? std::vector<const Json*>{&entry.items[0], &entry.items[1]}
                 : std::vector<const Json*>{&entry};
      for (const Json* part : parts) {
        V8Value item;
        if (Status s = Build(*part, &item, depth + 2); !s.ok()) return s;
        out->items.push_back(std::move(item));
      }
    }
    return Status::Ok();
  }

  Status BuildDate(const Json* value, V8Value* out) {
    double ms;
    if (value == nullptr || value->type == Json::Type::kNull) {
      ms = std::nan("");
    } else if (value->IsString()) {
      Result<double> parsed = ParseIsoDate(Utf16ToUtf8(value->string));
      if (!parsed.ok()) return Bad(parsed.status().message());
      ms = *parsed;
    } else {
      return Bad("Date value is not a string");
    }
    *out = V8Value::Date(next_id_++, ms);
    return Status::Ok();
  }

  Status BuildRegExp(const Json* value, V8Value* out) {
    if (value == nullptr || !value->IsString()) return Bad("RegExp value is not a string");
    const std::u16string& text = value->string;
    const size_t slash = text.rfind(u'/');
    if (text.empty() || text[0] != u'/' || slash == 0) return Bad("RegExp is not /source/flags");
    out->kind = V8Kind::kRegExp;
    out->id = next_id_++;
    out->string.units = text.substr(1, slash - 1);
    for (char16_t c : text.substr(slash + 1)) {
      const size_t i = kRegExpFlagLetters.find(c);
      if (i == std::u16string_view::npos || (out->regexp_flags & kRegExpFlagBits[i]) != 0) {
        return Bad("bad RegExp flags");
      }
      out->regexp_flags |= kRegExpFlagBits[i];
    }
    return Status::Ok();
  }

  static Result<std::string> Bytes(const Json* value) {
    if (value == nullptr || !value->IsString()) return Bad("bytes value is not a string");
    Result<std::string> bytes = DecodeBase64(value->string);
    if (!bytes.ok()) return Bad(bytes.status().message());
    return bytes;
  }

  Status BuildBuffer(const Json& node, const Json* value, V8Value* out) {
    Result<std::string> bytes = Bytes(value);
    if (!bytes.ok()) return bytes.status();
    Result<uint64_t> byte_length = UintMember(node, u"byteLength", bytes->size());
    if (!byte_length.ok()) return byte_length.status();
    if (*byte_length != bytes->size()) return Bad("ArrayBuffer byteLength differs from value");
    *out = V8Value::ArrayBuffer(next_id_++, std::move(*bytes));
    if (node.Find(u"maxByteLength") != nullptr) {
      Result<uint64_t> max = UintMember(node, u"maxByteLength", 0);
      if (!max.ok()) return max.status();
      out->max_byte_length = *max;
    }
    buffers_[out->id] = {out->bytes.size(), out->max_byte_length.has_value()};
    return Status::Ok();
  }

  Status BuildView(V8ViewType type, const Json& node, const Json* value, V8Value* out,
                   size_t depth) {
    V8Value buffer;
    uint64_t buffer_length = 0;
    bool resizable = false;
    if (const Json* buffer_node = node.Find(u"buffer")) {
      if (value != nullptr) return Bad("a view with both value and buffer");
      if (Status s = Build(*buffer_node, &buffer, depth + 1); !s.ok()) return s;
      if (buffer.kind == V8Kind::kArrayBuffer) {
        buffer_length = buffer.bytes.size();
        resizable = buffer.max_byte_length.has_value();
      } else if (buffer.kind == V8Kind::kReference && buffers_.count(buffer.target) != 0) {
        buffer_length = buffers_[buffer.target].first;
        resizable = buffers_[buffer.target].second;
      } else {
        return Bad("a view buffer that is not an ArrayBuffer or ref");
      }
    } else {
      Result<std::string> bytes = Bytes(value);
      if (!bytes.ok()) return bytes.status();
      buffer_length = bytes->size();
      buffer = V8Value::ArrayBuffer(next_id_++, std::move(*bytes));
      if (node.Find(u"maxByteLength") != nullptr) {
        Result<uint64_t> max = UintMember(node, u"maxByteLength", 0);
        if (!max.ok()) return max.status();
        buffer.max_byte_length = *max;
        resizable = true;
      }
      buffers_[buffer.id] = {buffer_length, resizable};
    }
    const Json* tracking = node.Find(u"lengthTracking");
    if (tracking != nullptr && tracking->type != Json::Type::kTrue &&
        tracking->type != Json::Type::kFalse) {
      return Bad("lengthTracking is not a boolean");
    }
    const bool length_tracking = tracking != nullptr && tracking->type == Json::Type::kTrue;
    Result<uint64_t> offset = UintMember(node, u"byteOffset", 0);
    if (!offset.ok()) return offset.status();
    if (*offset > buffer_length) return Bad("byteOffset beyond the buffer");
    // V8 writes 0 as the length of a length-tracking view.
    Result<uint64_t> length =
        UintMember(node, u"byteLength", length_tracking ? 0 : buffer_length - *offset);
    if (!length.ok()) return length.status();
    out->kind = V8Kind::kArrayBufferView;
    out->view_type = type;
    out->byte_offset = *offset;
    out->byte_length = *length;
    if (length_tracking) out->view_flags |= v8view::kFlagLengthTracking;
    if (resizable) out->view_flags |= v8view::kFlagBackedByResizable;
    out->id = next_id_++;  // after its buffer, as V8 numbers them
    out->items.push_back(std::move(buffer));
    return Status::Ok();
  }

  Status BuildError(V8ErrorType type, const Json* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != Json::Type::kObject) {
      return Bad("error value is not an object");
    }
    out->kind = V8Kind::kError;
    out->error_type = type;
    out->id = next_id_++;
    for (const auto& [name, member] : value->members) {
      if (name == u"message" || name == u"stack") {
        if (!member.IsString()) return Bad("error message or stack is not a string");
        (name == u"message" ? out->message : out->stack) = V8String{member.string, false};
      } else if (name == u"cause") {
        V8Value cause;
        if (Status s = Build(member, &cause, depth + 2); !s.ok()) return s;
        out->items.push_back(std::move(cause));
        out->has_cause = true;
      } else {
        return Bad("unknown error member " + Utf16ToUtf8(name));
      }
    }
    return Status::Ok();
  }

  const V8JsonOptions& options_;
  uint32_t next_id_ = 0;
  // Buffers built so far, by id: their length and whether they are resizable (for views that
  // refer to them).
  std::unordered_map<uint32_t, std::pair<uint64_t, bool>> buffers_;
};

// --------------------------------------------------------------------------------------------
// Keys

Result<Json> ParseJson(std::string_view text, const V8JsonOptions& options) {
  return JsonReader(text, options.max_depth).Run();
}

Result<KeyPart> KeyPartFromNode(const Json& node) {
  const Status bad = InvalidArgument("bad KvKeyPartJSON");
  if (node.type != Json::Type::kObject) return bad;
  const Json* type = node.Find(u"type");
  const Json* value = node.Find(u"value");
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
    if (value->type != Json::Type::kTrue && value->type != Json::Type::kFalse) return bad;
    return KeyPart::Bool(value->type == Json::Type::kTrue);
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
bool IsRawKeyPart(const Json& node) {
  if (node.type != Json::Type::kObject) return false;
  const Json* type = node.Find(u"type");
  return type != nullptr && type->IsString() && type->string == u"raw";
}

Result<std::vector<KeyPart>> KeyFromNode(const Json& node) {
  if (node.type != Json::Type::kArray) return InvalidArgument("bad KvKeyJSON: not an array");
  std::vector<KeyPart> key;
  for (const Json& item : node.items) {
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
Result<std::string> KeyBytesFromNode(const Json& node) {
  if (node.type != Json::Type::kArray) return InvalidArgument("bad KvKeyJSON: not an array");
  std::string out;
  for (const Json& item : node.items) {
    if (IsRawKeyPart(item)) {
      const Json* value = item.Find(u"value");
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

Result<KvValue> KvValueFromNode(const Json& node, uint32_t format_version,
                                const V8JsonOptions& options) {
  if (node.type == Json::Type::kObject) {
    const Json* type = node.Find(u"type");
    const Json* value = node.Find(u"value");
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
  V8Value tree;
  if (Status s = ValueBuilder(options).Build(node, &tree, 0); !s.ok()) return s;
  Result<std::string> bytes = EncodeV8Value(tree, format_version, options.max_depth);
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
  return JsonWriter(options).Run(value);
}

Result<V8Value> V8ValueFromJson(std::string_view json, const V8JsonOptions& options) {
  Result<Json> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  V8Value value;
  if (Status s = ValueBuilder(options).Build(*node, &value, 0); !s.ok()) return s;
  return value;
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
  Result<Json> node = ParseJson(json, V8JsonOptions{});
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
  Result<Json> node = ParseJson(json, V8JsonOptions{});
  if (!node.ok()) return node.status();
  return KeyFromNode(*node);
}

Result<std::string> KeyBytesFromJson(std::string_view json) {
  Result<Json> node = ParseJson(json, V8JsonOptions{});
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
  Result<Json> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  return KvValueFromNode(*node, format_version, options);
}

std::string ExpiryToJsonTime(int64_t expire_at_ms) {
  const auto bound = static_cast<int64_t>(kMaxTime);
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
  Result<Json> node = ParseJson(json, options);
  if (!node.ok()) return node.status();
  if (node->type != Json::Type::kObject) return InvalidArgument("bad KvEntryJSON: not an object");
  const Json* key = node->Find(u"key");
  const Json* value = node->Find(u"value");
  const Json* stamp = node->Find(u"versionstamp");
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
  if (const Json* expires = node->Find(u"expires_at");
      expires != nullptr && expires->type != Json::Type::kNull) {
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
