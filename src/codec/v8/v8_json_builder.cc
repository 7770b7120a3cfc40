#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <utility>

#include "codec/iso_date.h"
#include "codec/utf8.h"
#include "codec/v8/v8_json_internal.h"

// KvValueJSON -> V8 value tree (the layouts are in v8_json.h and codec/README.md).

namespace kvc::codec::v8json {
namespace {

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

// Builds one tree from a JsonNode: one use per tree. Object ids are numbered in document order,
// as v8_json.h describes; references are checked later, when the tree is encoded.
class ValueBuilder {
 public:
  explicit ValueBuilder(const V8JsonOptions& options) : options_(options) {}

  Status Build(const JsonNode& node, V8Value* out, size_t depth) {
    if (depth > options_.max_depth) return InvalidArgument("JSON too deep");
    if (node.type != JsonNode::Type::kObject) return Bad("a value is not an object");
    const JsonNode* type_node = node.Find(u"type");
    if (type_node == nullptr || !type_node->IsString()) return Bad("missing type");
    const std::string type = Utf16ToUtf8(type_node->string);
    const JsonNode* value = node.Find(u"value");

    if (type == "undefined") {
      *out = V8Value::Undefined();
    } else if (type == "null") {
      *out = V8Value::Null();
    } else if (type == "boolean" || type == "BooleanObject") {
      if (value == nullptr ||
          (value->type != JsonNode::Type::kTrue && value->type != JsonNode::Type::kFalse)) {
        return Bad(type + " value is not a boolean");
      }
      *out = V8Value::Boolean(value->type == JsonNode::Type::kTrue);
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
      if (value == nullptr || value->type != JsonNode::Type::kNumber || value->number < 0 ||
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

  Status BuildObject(const JsonNode* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != JsonNode::Type::kObject) {
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

  Status BuildArray(const JsonNode& node, const JsonNode* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != JsonNode::Type::kArray) {
      return Bad("Array value is not an array");
    }
    Result<uint64_t> length = UintMember(node, u"length", value->items.size());
    if (!length.ok()) return length.status();
    if (*length < value->items.size() || *length > 0xFFFFFFFFull) return Bad("bad Array length");
    bool holes = *length != value->items.size();
    for (const JsonNode& item : value->items) holes = holes || item.type == JsonNode::Type::kNull;
    *out = V8Value::Array(next_id_++);
    out->length = static_cast<uint32_t>(*length);
    out->dense = !holes;
    for (size_t i = 0; i < value->items.size(); ++i) {
      const JsonNode& item = value->items[i];
      if (item.type == JsonNode::Type::kNull) continue;
      V8Value element;
      if (Status s = Build(item, &element, depth + 2); !s.ok()) return s;
      if (holes) {
        out->Add(V8Value::Number(static_cast<double>(i)), std::move(element));
      } else {
        out->items.push_back(std::move(element));
      }
    }
    if (const JsonNode* properties = node.Find(u"properties")) {
      if (properties->type != JsonNode::Type::kObject) return Bad("Array properties not an object");
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

  Status BuildCollection(bool is_map, const JsonNode* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != JsonNode::Type::kArray) {
      return Bad("Map or Set value is not an array");
    }
    *out = is_map ? V8Value::Map(next_id_++) : V8Value::Set(next_id_++);
    for (const JsonNode& entry : value->items) {
      if (is_map && (entry.type != JsonNode::Type::kArray || entry.items.size() != 2)) {
        return Bad("a Map entry is not a [key, value] pair");
      }
      const std::vector<const JsonNode*> parts =
          is_map ? std::vector<const JsonNode*>{&entry.items[0], &entry.items[1]}
                 : std::vector<const JsonNode*>{&entry};
      for (const JsonNode* part : parts) {
        V8Value item;
        if (Status s = Build(*part, &item, depth + 2); !s.ok()) return s;
        out->items.push_back(std::move(item));
      }
    }
    return Status::Ok();
  }

  Status BuildDate(const JsonNode* value, V8Value* out) {
    double ms;
    if (value == nullptr || value->type == JsonNode::Type::kNull) {
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

  Status BuildRegExp(const JsonNode* value, V8Value* out) {
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

  static Result<std::string> Bytes(const JsonNode* value) {
    if (value == nullptr || !value->IsString()) return Bad("bytes value is not a string");
    Result<std::string> bytes = DecodeBase64(value->string);
    if (!bytes.ok()) return Bad(bytes.status().message());
    return bytes;
  }

  Status BuildBuffer(const JsonNode& node, const JsonNode* value, V8Value* out) {
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

  Status BuildView(V8ViewType type, const JsonNode& node, const JsonNode* value, V8Value* out,
                   size_t depth) {
    V8Value buffer;
    uint64_t buffer_length = 0;
    bool resizable = false;
    if (const JsonNode* buffer_node = node.Find(u"buffer")) {
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
    const JsonNode* tracking = node.Find(u"lengthTracking");
    if (tracking != nullptr && tracking->type != JsonNode::Type::kTrue &&
        tracking->type != JsonNode::Type::kFalse) {
      return Bad("lengthTracking is not a boolean");
    }
    const bool length_tracking = tracking != nullptr && tracking->type == JsonNode::Type::kTrue;
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

  Status BuildError(V8ErrorType type, const JsonNode* value, V8Value* out, size_t depth) {
    if (value == nullptr || value->type != JsonNode::Type::kObject) {
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

}  // namespace

Result<V8Value> BuildValue(const JsonNode& node, const V8JsonOptions& options) {
  V8Value value;
  if (Status s = ValueBuilder(options).Build(node, &value, 0); !s.ok()) return s;
  return value;
}

}  // namespace kvc::codec::v8json
