#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codec/iso_date.h"
#include "codec/json_text.h"
#include "codec/utf8.h"
#include "codec/v8/v8_json_internal.h"

// V8 value tree -> KvValueJSON (the layouts are in v8_json.h and codec/README.md).

namespace kvc::codec::v8json {
namespace {

// A JSON string of UTF-16 units, lone surrogates as \uXXXX escapes (as JSON.stringify writes).
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

void AppendUint(uint64_t value, std::string* out) { out->append(std::to_string(value)); }

// A property name as JS sees it: a string, or a number's canonical text.
std::u16string KeyName(const V8Value& key) {
  if (key.kind == V8Kind::kString) return key.string.units;
  const std::string text = V8NumberToString(key.number);
  return std::u16string(text.begin(), text.end());
}

// Writes one tree as JSON: one use per tree. Shared objects are written in full again or as refs
// (options.expand_shared); the output is bounded by options.max_output_values and max_depth.
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
      case V8Kind::kNull:
      case V8Kind::kBoolean:
      case V8Kind::kBooleanObject:
      case V8Kind::kNumber:
      case V8Kind::kNumberObject:
      case V8Kind::kBigInt:
      case V8Kind::kBigIntObject:
      case V8Kind::kString:
      case V8Kind::kStringObject:
        WritePrimitive(v);
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
      case V8Kind::kDate:
        WriteDate(v);
        return Status::Ok();
      case V8Kind::kRegExp:
        WriteRegExp(v);
        return Status::Ok();
      case V8Kind::kMap:
      case V8Kind::kSet:
        return WriteCollection(v, depth);
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

  // Undefined, null, and booleans, numbers, bigints and strings, plain or boxed.
  void WritePrimitive(const V8Value& v) {
    switch (v.kind) {
      case V8Kind::kUndefined:
        out_.append("{\"type\":\"undefined\"}");
        return;
      case V8Kind::kNull:
        out_.append("{\"type\":\"null\",\"value\":null}");
        return;
      case V8Kind::kBoolean:
      case V8Kind::kBooleanObject:
        TypeOpen(v.kind == V8Kind::kBoolean ? "boolean" : "BooleanObject");
        out_.append(v.boolean ? ",\"value\":true}" : ",\"value\":false}");
        return;
      case V8Kind::kNumber:
      case V8Kind::kNumberObject:
        TypeOpen(v.kind == V8Kind::kNumber ? "number" : "NumberObject");
        out_.append(",\"value\":");
        AppendNumberValue(v.number, &out_);
        out_.push_back('}');
        return;
      case V8Kind::kBigInt:
      case V8Kind::kBigIntObject:
        TypeOpen(v.kind == V8Kind::kBigInt ? "bigint" : "BigIntObject");
        out_.append(",\"value\":\"");
        out_.append(BigIntToDecimal(v.bigint));
        out_.append("\"}");
        return;
      case V8Kind::kString:
      case V8Kind::kStringObject:
        TypeOpen(v.kind == V8Kind::kString ? "string" : "StringObject");
        out_.append(",\"value\":");
        AppendQuoted(v.string.units, &out_);
        out_.push_back('}');
        return;
      default:
        return;  // not a primitive; WriteBody writes it
    }
  }

  void WriteDate(const V8Value& v) {
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
  }

  void WriteRegExp(const V8Value& v) {
    TypeOpen("RegExp");
    std::u16string text = u"/" + v.string.units + u"/";
    for (size_t i = 0; i < kRegExpFlagLetters.size(); ++i) {
      if ((v.regexp_flags & kRegExpFlagBits[i]) != 0) text.push_back(kRegExpFlagLetters[i]);
    }
    out_.append(",\"value\":");
    AppendQuoted(text, &out_);
    out_.push_back('}');
  }

  // A Map's entries as [key, value] pairs, a Set's members as they are.
  Status WriteCollection(const V8Value& v, size_t depth) {
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

  const V8JsonOptions& options_;
  std::string out_;
  size_t written_ = 0;
  uint32_t next_json_id_ = 0;
  std::unordered_map<uint32_t, const V8Value*> nodes_;
  std::unordered_map<uint32_t, uint32_t> json_id_of_;  // the latest JSON number of a tree id
  std::unordered_map<uint32_t, int> open_;             // emissions of a tree id not yet closed
};

}  // namespace

Result<std::string> WriteValueJson(const V8Value& value, const V8JsonOptions& options) {
  return JsonWriter(options).Run(value);
}

}  // namespace kvc::codec::v8json
