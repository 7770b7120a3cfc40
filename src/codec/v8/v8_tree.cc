#include "codec/v8/v8_tree.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codec/utf8.h"
#include "codec/v8/v8_wire.h"

namespace kvc::codec {
namespace {

// Node's lib/v8.js numbers the ArrayBufferView types of its host-object form like this; 10 is
// its Buffer (FastBuffer), a Uint8Array.
constexpr V8ViewType kNodeHostViewTypes[] = {
    V8ViewType::kInt8Array,      V8ViewType::kUint8Array,   V8ViewType::kUint8ClampedArray,
    V8ViewType::kInt16Array,     V8ViewType::kUint16Array,  V8ViewType::kInt32Array,
    V8ViewType::kUint32Array,    V8ViewType::kFloat32Array, V8ViewType::kFloat64Array,
    V8ViewType::kDataView,       V8ViewType::kUint8Array,   V8ViewType::kBigInt64Array,
    V8ViewType::kBigUint64Array,
};
constexpr uint32_t kNodeBufferType = 10;
// Deno's host-object form starts with this uint32 instead of a Node type index.
constexpr uint32_t kDenoHostObjectMarker = 0xFFFFFFFF;

// Regexp flags V8 knows (d g i l m s u v y); `l` (linear) needs a V8 flag Deno does not set, and
// `u` and `v` exclude each other.
constexpr uint32_t kRegExpFlagMask = (1u << 9) - 1;
constexpr uint32_t kRegExpLinear = 64;
constexpr uint32_t kRegExpUnicode = 16;
constexpr uint32_t kRegExpUnicodeSets = 256;

constexpr uint32_t kMaxArrayIndex = 0xFFFFFFFE;  // 2^32 - 2
// JS lengths are at most 2^53 - 1 (ToIndex); V8 refuses larger resizable-buffer maximums.
constexpr uint64_t kMaxSafeInteger = (uint64_t{1} << 53) - 1;

struct ViewTypeInfo {
  V8ViewType type;
  uint8_t tag;
  const char* name;
  size_t element_size;
};

constexpr ViewTypeInfo kViewTypes[] = {
    {V8ViewType::kInt8Array, v8view::kInt8Array, "Int8Array", 1},
    {V8ViewType::kUint8Array, v8view::kUint8Array, "Uint8Array", 1},
    {V8ViewType::kUint8ClampedArray, v8view::kUint8ClampedArray, "Uint8ClampedArray", 1},
    {V8ViewType::kInt16Array, v8view::kInt16Array, "Int16Array", 2},
    {V8ViewType::kUint16Array, v8view::kUint16Array, "Uint16Array", 2},
    {V8ViewType::kInt32Array, v8view::kInt32Array, "Int32Array", 4},
    {V8ViewType::kUint32Array, v8view::kUint32Array, "Uint32Array", 4},
    {V8ViewType::kFloat16Array, v8view::kFloat16Array, "Float16Array", 2},
    {V8ViewType::kFloat32Array, v8view::kFloat32Array, "Float32Array", 4},
    {V8ViewType::kFloat64Array, v8view::kFloat64Array, "Float64Array", 8},
    {V8ViewType::kBigInt64Array, v8view::kBigInt64Array, "BigInt64Array", 8},
    {V8ViewType::kBigUint64Array, v8view::kBigUint64Array, "BigUint64Array", 8},
    {V8ViewType::kDataView, v8view::kDataView, "DataView", 1},
};

const ViewTypeInfo& ViewInfo(V8ViewType type) { return kViewTypes[static_cast<size_t>(type)]; }

struct ErrorTypeInfo {
  V8ErrorType type;
  uint8_t tag;  // 0: none (plain Error)
  const char* name;
};

constexpr ErrorTypeInfo kErrorTypes[] = {
    {V8ErrorType::kError, 0, "Error"},
    {V8ErrorType::kEvalError, v8error::kEvalError, "EvalError"},
    {V8ErrorType::kRangeError, v8error::kRangeError, "RangeError"},
    {V8ErrorType::kReferenceError, v8error::kReferenceError, "ReferenceError"},
    {V8ErrorType::kSyntaxError, v8error::kSyntaxError, "SyntaxError"},
    {V8ErrorType::kTypeError, v8error::kTypeError, "TypeError"},
    {V8ErrorType::kUriError, v8error::kUriError, "URIError"},
};

// The JS property name of a key node: the string itself, or the number as JS prints it.
std::u16string PropertyName(const V8Value& key) {
  if (key.kind == V8Kind::kString) return key.string.units;
  std::u16string name;
  for (char c : V8NumberToString(key.number)) name.push_back(static_cast<char16_t>(c));
  return name;
}

// The array index a property name denotes (canonical decimal below 2^32 - 1), if any.
std::optional<uint32_t> ArrayIndex(std::u16string_view name) {
  if (name.empty() || name.size() > 10 || (name.size() > 1 && name[0] == u'0')) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (char16_t c : name) {
    if (c < u'0' || c > u'9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - u'0');
  }
  if (value > kMaxArrayIndex) return std::nullopt;
  return static_cast<uint32_t>(value);
}

bool IsStringTag(uint8_t tag) {
  return tag == v8tag::kOneByteString || tag == v8tag::kTwoByteString || tag == v8tag::kUtf8String;
}

// --------------------------------------------------------------------------------------------
// Decoder

// What the decoder remembers about each id: whether V8 would have registered it yet (so a
// back-reference to it resolves), and, for buffers, what a view over it needs.
struct IdInfo {
  bool registered = false;
  V8Kind kind = V8Kind::kUndefined;
  uint64_t buffer_length = 0;
  bool resizable = false;
};

class Decoder {
 public:
  Decoder(std::string_view data, const V8DecodeLimits& limits, bool view_flags_in_v13)
      : reader_(data), limits_(limits), view_flags_in_v13_(view_flags_in_v13) {}

  // Decodes the whole input; sets info->version when the header was read, the counts on
  // success.
  Result<V8Value> Run(V8DecodeInfo* info) {
    if (!reader_.ReadHeader(&version_)) return Invalid("bad or unsupported header");
    info->version = version_;
    V8Value value;
    Status status = ReadValue(&value, 0);
    if (!status.ok()) return status;
    if (!reader_.done()) return Invalid("trailing bytes after the value");
    info->node_host_views = node_host_views_;
    info->node_buffers = node_buffers_;
    info->wide_lengths = wide_lengths_;
    return value;
  }

 private:
  Status Invalid(const std::string& what) const {
    return InvalidArgument("invalid v8 value: " + what + " at byte " +
                           std::to_string(reader_.position()));
  }
  Status Unsupported(const std::string& what) const {
    return InvalidArgument("unsupported v8 value: " + what + " at byte " +
                           std::to_string(reader_.position()));
  }
  Status Truncated() const { return Invalid("truncated or malformed data"); }

  Status CountNode() {
    if (++nodes_ > limits_.max_nodes) return InvalidArgument("v8 value too large");
    return Status::Ok();
  }

  uint32_t NewId(V8Kind kind) {
    ids_.push_back(IdInfo{false, kind, 0, false});
    return next_id_++;
  }
  void Register(uint32_t id) { ids_[id].registered = true; }

  bool ReadLength(uint64_t* out) {
    if (version_ >= kV8FirstVersionWithWideLengths) {
      const size_t start = reader_.position();
      if (!reader_.ReadVarint64(out)) return false;
      // What ReadVarint32 would refuse in format 15.
      if (*out > UINT32_MAX || reader_.position() - start > 5) wide_lengths_ = true;
      return true;
    }
    uint32_t narrow;
    if (!reader_.ReadVarint32(&narrow)) return false;
    *out = narrow;
    return true;
  }

  // V8's ReadObject: one value, and the view that follows a buffer.
  Status ReadValue(V8Value* out, size_t depth) {
    if (depth > limits_.max_depth) return InvalidArgument("v8 value too deep");
    if (Status s = CountNode(); !s.ok()) return s;
    uint8_t tag;
    if (!reader_.ReadTag(&tag)) return Truncated();
    while (tag == v8tag::kVerifyObjectCount) {
      uint32_t unused;  // a count V8 reads and ignores
      if (!reader_.ReadVarint32(&unused) || !reader_.ReadTag(&tag)) return Truncated();
    }
    if (Status s = ReadTagged(tag, out, depth); !s.ok()) return s;
    uint8_t next;
    if (IsBuffer(*out) && reader_.PeekTag(&next) && next == v8tag::kArrayBufferView) {
      reader_.ReadTag(&next);
      return ReadView(out);
    }
    return Status::Ok();
  }

  bool IsBuffer(const V8Value& v) const {
    if (v.kind == V8Kind::kArrayBuffer) return true;
    return v.kind == V8Kind::kReference && ids_[v.target].kind == V8Kind::kArrayBuffer;
  }

  // A string in a place where V8 requires one (regexp source, error message, String object).
  Status ReadStringValue(V8String* out) {
    uint8_t tag;
    if (!reader_.ReadTag(&tag)) return Truncated();
    while (tag == v8tag::kVerifyObjectCount) {
      uint32_t unused;
      if (!reader_.ReadVarint32(&unused) || !reader_.ReadTag(&tag)) return Truncated();
    }
    if (!IsStringTag(tag)) return Invalid("expected a string");
    if (!ReadV8StringPayload(tag, &reader_, &out->units)) return Truncated();
    out->two_byte = tag == v8tag::kTwoByteString;
    return Status::Ok();
  }

  // A number in one of its three wire forms; the form is kept so a re-encode is byte-identical.
  Status ReadNumber(uint8_t tag, V8Value* out) {
    if (tag == v8tag::kInt32) {
      int32_t value;
      if (!reader_.ReadZigZag32(&value)) return Truncated();
      out->kind = V8Kind::kNumber;
      out->number = value;
      out->number_form = V8NumberForm::kInt32;
      return Status::Ok();
    }
    if (tag == v8tag::kUint32) {
      uint32_t value;
      if (!reader_.ReadVarint32(&value)) return Truncated();
      out->kind = V8Kind::kNumber;
      out->number = value;
      out->number_form = V8NumberForm::kUint32;
      return Status::Ok();
    }
    out->kind = V8Kind::kNumber;
    out->number_form = V8NumberForm::kDouble;
    return reader_.ReadDouble(&out->number) ? Status::Ok() : Truncated();
  }

  // A back-reference; only to an id V8 would have registered by now.
  Status ReadReference(V8Value* out) {
    uint32_t id;
    if (!reader_.ReadVarint32(&id)) return Truncated();
    if (id >= next_id_ || !ids_[id].registered) {
      return Invalid("reference to unknown object " + std::to_string(id));
    }
    *out = V8Value::Reference(id);
    return Status::Ok();
  }

  Status ReadDate(V8Value* out) {
    out->kind = V8Kind::kDate;
    if (!reader_.ReadDouble(&out->number)) return Truncated();
    out->id = NewId(V8Kind::kDate);
    Register(out->id);
    return Status::Ok();
  }

  // One value after its tag: a dispatch on the tag to the readers above and below.
  Status ReadTagged(uint8_t tag, V8Value* out, size_t depth) {
    switch (tag) {
      case v8tag::kUndefined:
        *out = V8Value::Undefined();
        return Status::Ok();
      case v8tag::kNull:
        *out = V8Value::Null();
        return Status::Ok();
      case v8tag::kTrue:
      case v8tag::kFalse:
        *out = V8Value::Boolean(tag == v8tag::kTrue);
        return Status::Ok();
      case v8tag::kInt32:
      case v8tag::kUint32:
      case v8tag::kDouble:
        return ReadNumber(tag, out);
      case v8tag::kBigInt:
        out->kind = V8Kind::kBigInt;
        return ReadV8BigIntPayload(&reader_, &out->bigint) ? Status::Ok() : Truncated();
      case v8tag::kOneByteString:
      case v8tag::kTwoByteString:
      case v8tag::kUtf8String:
        out->kind = V8Kind::kString;
        out->string.two_byte = tag == v8tag::kTwoByteString;
        return ReadV8StringPayload(tag, &reader_, &out->string.units) ? Status::Ok() : Truncated();
      case v8tag::kObjectReference:
        return ReadReference(out);
      case v8tag::kBeginObject:
        return ReadObject(out, depth);
      case v8tag::kBeginSparseArray:
      case v8tag::kBeginDenseArray:
        return ReadArray(tag == v8tag::kBeginDenseArray, out, depth);
      case v8tag::kDate:
        return ReadDate(out);
      case v8tag::kTrueObject:
      case v8tag::kFalseObject:
      case v8tag::kNumberObject:
      case v8tag::kBigIntObject:
      case v8tag::kStringObject:
        return ReadPrimitiveWrapper(tag, out);
      case v8tag::kRegExp:
        return ReadRegExp(out);
      case v8tag::kBeginMap:
      case v8tag::kBeginSet:
        return ReadCollection(tag == v8tag::kBeginMap, out, depth);
      case v8tag::kArrayBuffer:
      case v8tag::kResizableArrayBuffer:
        return ReadArrayBuffer(tag == v8tag::kResizableArrayBuffer, out);
      case v8tag::kError:
        return ReadError(out, depth);
      case v8tag::kHostObject:
        return ReadHostObject(out, depth);
      case v8tag::kTheHole:
        return Invalid("a hole outside a dense array");
      case v8tag::kArrayBufferTransfer:
      case v8tag::kSharedArrayBuffer:
      case v8tag::kSharedObject:
      case v8tag::kWasmModuleTransfer:
      case v8tag::kWasmMemoryTransfer:
        return Unsupported(std::string("tag '") + static_cast<char>(tag) +
                           "' (only meaningful inside one process)");
      default:
        return Invalid("unknown tag " + std::to_string(tag));
    }
  }

  // Reads key/value pairs up to `end_tag` into container->properties.
  Status ReadProperties(uint8_t end_tag, V8Value* container, size_t depth, uint32_t* count) {
    std::unordered_set<std::u16string> names;
    const bool is_array = container->kind == V8Kind::kArray;
    if (is_array) names.insert(u"length");  // an own property of every array
    *count = 0;
    while (true) {
      uint8_t tag;
      if (!reader_.PeekTag(&tag)) return Truncated();
      if (tag == end_tag) {
        reader_.ReadTag(&tag);
        return Status::Ok();
      }
      V8Property property;
      if (Status s = ReadValue(&property.key, depth + 1); !s.ok()) return s;
      if (property.key.kind != V8Kind::kString && property.key.kind != V8Kind::kNumber) {
        return Invalid("a property key that is not a string or number");
      }
      std::u16string name = PropertyName(property.key);
      bool taken = !names.insert(name).second;
      if (!taken && is_array && container->dense) {
        const std::optional<uint32_t> index = ArrayIndex(name);
        taken = index && *index < container->items.size() &&
                container->items[*index].kind != V8Kind::kHole;
      }
      if (taken) return Invalid("duplicate property " + Utf16ToUtf8(name));
      if (Status s = ReadValue(&property.value, depth + 1); !s.ok()) return s;
      container->properties.push_back(std::move(property));
      ++*count;
    }
  }

  Status ReadObject(V8Value* out, size_t depth) {
    out->kind = V8Kind::kObject;
    out->id = NewId(V8Kind::kObject);
    Register(out->id);
    uint32_t count;
    uint32_t expected;
    if (Status s = ReadProperties(v8tag::kEndObject, out, depth, &count); !s.ok()) return s;
    if (!reader_.ReadVarint32(&expected)) return Truncated();
    if (count != expected) return Invalid("object property count mismatch");
    return Status::Ok();
  }

  Status ReadArray(bool dense, V8Value* out, size_t depth) {
    out->kind = V8Kind::kArray;
    out->dense = dense;
    if (!reader_.ReadVarint32(&out->length)) return Truncated();
    // Every element takes at least one byte, which bounds the allocation by the input.
    if (dense && out->length > reader_.remaining()) return Invalid("dense array too long");
    out->id = NewId(V8Kind::kArray);
    Register(out->id);
    if (dense) {
      out->items.reserve(out->length);
      for (uint32_t i = 0; i < out->length; ++i) {
        uint8_t tag;
        if (reader_.PeekTag(&tag) && tag == v8tag::kTheHole) {
          reader_.ReadTag(&tag);
          if (Status s = CountNode(); !s.ok()) return s;
          out->items.push_back(V8Value::Hole());
          continue;
        }
        V8Value element;
        if (Status s = ReadValue(&element, depth + 1); !s.ok()) return s;
        out->items.push_back(std::move(element));
      }
    }
    uint32_t count;
    uint32_t expected_count;
    uint32_t expected_length;
    const uint8_t end_tag = dense ? v8tag::kEndDenseArray : v8tag::kEndSparseArray;
    if (Status s = ReadProperties(end_tag, out, depth, &count); !s.ok()) return s;
    if (!reader_.ReadVarint32(&expected_count) || !reader_.ReadVarint32(&expected_length)) {
      return Truncated();
    }
    if (count != expected_count || out->length != expected_length) {
      return Invalid("array property count or length mismatch");
    }
    return Status::Ok();
  }

  Status ReadPrimitiveWrapper(uint8_t tag, V8Value* out) {
    out->id = NewId(V8Kind::kBooleanObject);
    switch (tag) {
      case v8tag::kTrueObject:
      case v8tag::kFalseObject:
        out->kind = V8Kind::kBooleanObject;
        out->boolean = tag == v8tag::kTrueObject;
        break;
      case v8tag::kNumberObject:
        out->kind = V8Kind::kNumberObject;
        if (!reader_.ReadDouble(&out->number)) return Truncated();
        break;
      case v8tag::kBigIntObject:
        out->kind = V8Kind::kBigIntObject;
        if (!ReadV8BigIntPayload(&reader_, &out->bigint)) return Truncated();
        break;
      default:
        out->kind = V8Kind::kStringObject;
        if (Status s = ReadStringValue(&out->string); !s.ok()) return s;
        break;
    }
    ids_[out->id].kind = out->kind;
    Register(out->id);
    return Status::Ok();
  }

  Status ReadRegExp(V8Value* out) {
    out->kind = V8Kind::kRegExp;
    out->id = NewId(V8Kind::kRegExp);
    if (Status s = ReadStringValue(&out->string); !s.ok()) return s;
    if (!reader_.ReadVarint32(&out->regexp_flags)) return Truncated();
    const uint32_t flags = out->regexp_flags;
    if ((flags & ~kRegExpFlagMask) != 0 ||
        (flags & (kRegExpUnicode | kRegExpUnicodeSets)) == (kRegExpUnicode | kRegExpUnicodeSets)) {
      return Invalid("bad regexp flags " + std::to_string(flags));
    }
    if ((flags & kRegExpLinear) != 0) return Unsupported("regexp flag l (linear)");
    Register(out->id);
    return Status::Ok();
  }

  Status ReadCollection(bool is_map, V8Value* out, size_t depth) {
    out->kind = is_map ? V8Kind::kMap : V8Kind::kSet;
    out->id = NewId(out->kind);
    Register(out->id);
    const uint8_t end_tag = is_map ? v8tag::kEndMap : v8tag::kEndSet;
    while (true) {
      uint8_t tag;
      if (!reader_.PeekTag(&tag)) return Truncated();
      if (tag == end_tag) {
        reader_.ReadTag(&tag);
        break;
      }
      for (int i = is_map ? 2 : 1; i > 0; --i) {
        V8Value item;
        if (Status s = ReadValue(&item, depth + 1); !s.ok()) return s;
        out->items.push_back(std::move(item));
      }
    }
    uint32_t expected;
    if (!reader_.ReadVarint32(&expected)) return Truncated();
    if (expected != out->items.size()) return Invalid("map or set length mismatch");
    return Status::Ok();
  }

  Status ReadArrayBuffer(bool resizable, V8Value* out) {
    out->kind = V8Kind::kArrayBuffer;
    out->id = NewId(V8Kind::kArrayBuffer);
    uint64_t length;
    if (!ReadLength(&length)) return Truncated();
    if (resizable) {
      uint64_t max_length;
      if (!ReadLength(&max_length)) return Truncated();
      if (length > max_length) return Invalid("resizable buffer longer than its maximum");
      if (max_length > kMaxSafeInteger) return Invalid("resizable buffer maximum over 2^53-1");
      out->max_byte_length = max_length;
    }
    std::string_view bytes;
    if (length > reader_.remaining() || !reader_.ReadBytes(length, &bytes)) return Truncated();
    out->bytes.assign(bytes);
    IdInfo& info = ids_[out->id];
    info.buffer_length = length;
    info.resizable = resizable;
    Register(out->id);
    return Status::Ok();
  }

  // The view after a buffer (or a reference to one) already in *out.
  Status ReadView(V8Value* out) {
    const uint32_t buffer_id = out->kind == V8Kind::kReference ? out->target : out->id;
    const IdInfo buffer = ids_[buffer_id];
    V8Value view;
    view.kind = V8Kind::kArrayBufferView;
    uint32_t subtag;
    uint32_t flags = 0;
    if (!reader_.ReadVarint32(&subtag) || !ReadLength(&view.byte_offset) ||
        !ReadLength(&view.byte_length)) {
      return Truncated();
    }
    if (view.byte_offset > buffer.buffer_length ||
        view.byte_length > buffer.buffer_length - view.byte_offset) {
      return Invalid("view outside its buffer");
    }
    if ((version_ >= kV8FirstVersionWithViewFlags || view_flags_in_v13_) &&
        !reader_.ReadVarint32(&flags)) {
      return Truncated();
    }
    const ViewTypeInfo* info = nullptr;
    for (const ViewTypeInfo& candidate : kViewTypes) {
      if (candidate.tag == subtag) info = &candidate;
    }
    if (info == nullptr) return Invalid("unknown view type " + std::to_string(subtag));
    if (view.byte_offset % info->element_size != 0 || view.byte_length % info->element_size != 0) {
      return Invalid("misaligned typed array");
    }
    const bool length_tracking = (flags & v8view::kFlagLengthTracking) != 0;
    const bool backed_by_resizable = (flags & v8view::kFlagBackedByResizable) != 0;
    if (((length_tracking || backed_by_resizable) && !buffer.resizable) ||
        (buffer.resizable && !backed_by_resizable)) {
      return Invalid("view flags do not match the buffer");
    }
    if (Status s = CountNode(); !s.ok()) return s;
    view.view_type = info->type;
    view.view_flags = flags;
    view.id = NewId(V8Kind::kArrayBufferView);
    Register(view.id);
    view.items.push_back(std::move(*out));
    *out = std::move(view);
    return Status::Ok();
  }

  Status ReadError(V8Value* out, size_t depth) {
    out->kind = V8Kind::kError;
    out->id = NewId(V8Kind::kError);
    while (true) {
      uint32_t subtag;
      if (!reader_.ReadVarint32(&subtag)) return Truncated();
      if (subtag == v8error::kEnd) break;
      if (out->error_layout.find(static_cast<char>(subtag)) != std::string::npos) {
        return Invalid("repeated error field");
      }
      switch (subtag) {
        case v8error::kMessage:
          out->message.emplace();
          if (Status s = ReadStringValue(&*out->message); !s.ok()) return s;
          break;
        case v8error::kStack:
          out->stack.emplace();
          if (Status s = ReadStringValue(&*out->stack); !s.ok()) return s;
          break;
        case v8error::kCause: {
          V8Value cause;
          if (Status s = ReadValue(&cause, depth + 1); !s.ok()) return s;
          out->items.push_back(std::move(cause));
          out->has_cause = true;
          break;
        }
        default: {
          const ErrorTypeInfo* info = nullptr;
          for (const ErrorTypeInfo& candidate : kErrorTypes) {
            if (candidate.tag != 0 && candidate.tag == subtag) info = &candidate;
          }
          if (info == nullptr) return Invalid("unknown error field " + std::to_string(subtag));
          // V8 lets a later prototype tag win; one per error is what it writes.
          if (out->error_type != V8ErrorType::kError) return Invalid("two error prototypes");
          out->error_type = info->type;
          break;
        }
      }
      out->error_layout.push_back(static_cast<char>(subtag));
    }
    Register(out->id);
    return Status::Ok();
  }

  Status ReadHostObject(V8Value* out, size_t depth) {
    const uint32_t id = NewId(V8Kind::kHostObject);
    uint32_t type;
    if (!reader_.ReadVarint32(&type)) return Truncated();
    if (type == kDenoHostObjectMarker) {
      out->kind = V8Kind::kHostObject;
      out->id = id;
      V8Value inner;
      if (Status s = ReadValue(&inner, depth + 1); !s.ok()) return s;
      out->items.push_back(std::move(inner));
      Register(id);
      return Status::Ok();
    }
    if (type >= std::size(kNodeHostViewTypes)) {
      return Unsupported("host object of type " + std::to_string(type));
    }
    const V8ViewType view_type = kNodeHostViewTypes[type];
    ++node_host_views_;
    if (type == kNodeBufferType) ++node_buffers_;
    uint32_t length;
    std::string_view bytes;
    if (!reader_.ReadVarint32(&length) || !reader_.ReadBytes(length, &bytes)) return Truncated();
    if (length % ViewInfo(view_type).element_size != 0) return Invalid("misaligned typed array");
    if (Status s = CountNode(); !s.ok()) return s;
    *out = V8Value::View(kV8NoId, id, view_type, std::string(bytes));
    ids_[id].kind = V8Kind::kArrayBufferView;
    Register(id);
    return Status::Ok();
  }

  V8Reader reader_;
  const V8DecodeLimits& limits_;
  size_t node_host_views_ = 0;
  size_t node_buffers_ = 0;
  bool wide_lengths_ = false;
  const bool view_flags_in_v13_;
  uint32_t version_ = 0;
  uint32_t next_id_ = 0;
  std::vector<IdInfo> ids_;
  size_t nodes_ = 0;
};

// --------------------------------------------------------------------------------------------
// Encoder

// What the encoder knows about a label (an id of the input tree) once it met its node: what the
// decoder knows of an id, and the id it has in the output.
struct Label : IdInfo {
  uint32_t out_id = 0;
};

class Encoder {
 public:
  Encoder(uint32_t version, size_t max_depth) : version_(version), max_depth_(max_depth) {}

  Result<std::string> Run(const V8Value& value) {
    AppendV8Header(version_, &out_);
    if (Status s = Write(value, 0); !s.ok()) return s;
    return std::move(out_);
  }

 private:
  static Status Fail(const std::string& what) {
    return InvalidArgument("cannot encode v8 value: " + what);
  }

  void Tag(uint8_t tag) { out_.push_back(static_cast<char>(tag)); }

  void AppendLength(uint64_t value) {
    // Versions before 16 have 32-bit lengths; callers check the range.
    AppendVarint64(value, &out_);
  }

  // Gives the node its output id (V8 numbers objects as their serialization begins).
  Status Begin(const V8Value& v, Label** label) {
    const uint32_t out_id = next_out_id_++;
    *label = nullptr;
    if (v.id == kV8NoId) return Status::Ok();
    auto [it, inserted] = labels_.try_emplace(v.id);
    if (!inserted) return Fail("duplicate id " + std::to_string(v.id));
    it->second.out_id = out_id;
    it->second.kind = v.kind;
    *label = &it->second;
    return Status::Ok();
  }
  static void Complete(Label* label) {
    if (label != nullptr) label->registered = true;
  }

  Status WriteNumber(const V8Value& v) {
    const double d = v.number;
    const bool negative_zero = d == 0 && std::signbit(d);
    if (v.number_form == V8NumberForm::kInt32 && !negative_zero && d >= INT32_MIN &&
        d <= INT32_MAX && d == std::trunc(d)) {
      Tag(v8tag::kInt32);
      AppendZigZag32(static_cast<int32_t>(d), &out_);
    } else if (v.number_form == V8NumberForm::kUint32 && !negative_zero && d >= 0 &&
               d <= UINT32_MAX && d == std::trunc(d)) {
      Tag(v8tag::kUint32);
      AppendVarint32(static_cast<uint32_t>(d), &out_);
    } else {
      Tag(v8tag::kDouble);
      AppendDouble(d, &out_);
    }
    return Status::Ok();
  }

  Status WriteProperties(const V8Value& v, size_t depth) {
    for (const V8Property& p : v.properties) {
      if (p.key.kind != V8Kind::kString && p.key.kind != V8Kind::kNumber) {
        return Fail("a property key that is not a string or number");
      }
      if (Status s = Write(p.key, depth + 1); !s.ok()) return s;
      if (Status s = Write(p.value, depth + 1); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status WriteArray(const V8Value& v, size_t depth) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Complete(label);  // arrays can be referred to from inside
    if (v.dense) {
      if (v.items.size() != v.length) return Fail("dense array length differs from its items");
      Tag(v8tag::kBeginDenseArray);
      AppendVarint32(v.length, &out_);
      for (const V8Value& item : v.items) {
        if (item.kind == V8Kind::kHole) {
          Tag(v8tag::kTheHole);
        } else if (Status s = Write(item, depth + 1); !s.ok()) {
          return s;
        }
      }
    } else {
      if (!v.items.empty()) return Fail("a sparse array with items");
      Tag(v8tag::kBeginSparseArray);
      AppendVarint32(v.length, &out_);
    }
    if (Status s = WriteProperties(v, depth); !s.ok()) return s;
    Tag(v.dense ? v8tag::kEndDenseArray : v8tag::kEndSparseArray);
    AppendVarint32(static_cast<uint32_t>(v.properties.size()), &out_);
    AppendVarint32(v.length, &out_);
    return Status::Ok();
  }

  Status WriteBuffer(const V8Value& v) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    const uint64_t length = v.bytes.size();
    const uint64_t max_length = v.max_byte_length.value_or(length);
    if (max_length < length) return Fail("resizable buffer longer than its maximum");
    if (max_length > kMaxSafeInteger) return Fail("resizable buffer maximum over 2^53-1");
    if (version_ < kV8FirstVersionWithWideLengths && max_length > UINT32_MAX) {
      return Fail("buffer over 4 GiB before format 16");
    }
    if (v.max_byte_length) {
      Tag(v8tag::kResizableArrayBuffer);
      AppendLength(length);
      AppendLength(max_length);
    } else {
      Tag(v8tag::kArrayBuffer);
      AppendLength(length);
    }
    out_.append(v.bytes);
    if (label != nullptr) {
      label->buffer_length = length;
      label->resizable = v.max_byte_length.has_value();
    }
    Complete(label);
    return Status::Ok();
  }

  Status WriteView(const V8Value& v) {
    if (v.items.size() != 1) return Fail("a view without exactly one buffer");
    const V8Value& buffer = v.items[0];
    uint64_t buffer_length;
    bool resizable;
    if (buffer.kind == V8Kind::kArrayBuffer) {
      if (Status s = WriteBuffer(buffer); !s.ok()) return s;
      buffer_length = buffer.bytes.size();
      resizable = buffer.max_byte_length.has_value();
    } else if (buffer.kind == V8Kind::kReference) {
      auto it = labels_.find(buffer.target);
      if (it == labels_.end() || !it->second.registered ||
          it->second.kind != V8Kind::kArrayBuffer) {
        return Fail("a view whose buffer reference is not an earlier buffer");
      }
      Tag(v8tag::kObjectReference);
      AppendVarint32(it->second.out_id, &out_);
      buffer_length = it->second.buffer_length;
      resizable = it->second.resizable;
    } else {
      return Fail("a view whose buffer is not a buffer");
    }
    const size_t element_size = V8ViewElementSize(v.view_type);
    if (v.byte_offset > buffer_length || v.byte_length > buffer_length - v.byte_offset) {
      return Fail("view outside its buffer");
    }
    if (v.byte_offset % element_size != 0 || v.byte_length % element_size != 0) {
      return Fail("misaligned typed array");
    }
    const bool length_tracking = (v.view_flags & v8view::kFlagLengthTracking) != 0;
    const bool backed_by_resizable = (v.view_flags & v8view::kFlagBackedByResizable) != 0;
    if (((length_tracking || backed_by_resizable) && !resizable) ||
        (resizable && !backed_by_resizable)) {
      return Fail("view flags do not match the buffer");
    }
    if (version_ < kV8FirstVersionWithViewFlags && v.view_flags != 0) {
      return Fail("view flags need format 14 or later");
    }
    Tag(v8tag::kArrayBufferView);
    AppendVarint32(ViewInfo(v.view_type).tag, &out_);
    AppendLength(v.byte_offset);
    AppendLength(v.byte_length);
    if (version_ >= kV8FirstVersionWithViewFlags) AppendVarint32(v.view_flags, &out_);
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Complete(label);
    return Status::Ok();
  }

  // The error's sub-tags in the order to write them.
  static std::string ErrorLayout(const V8Value& v) {
    const uint8_t proto = kErrorTypes[static_cast<size_t>(v.error_type)].tag;
    std::string wanted;
    if (proto != 0) wanted.push_back(static_cast<char>(proto));
    if (v.message) wanted.push_back(static_cast<char>(v8error::kMessage));
    if (v.stack) wanted.push_back(static_cast<char>(v8error::kStack));
    if (v.has_cause) wanted.push_back(static_cast<char>(v8error::kCause));
    std::string sorted_layout = v.error_layout;
    std::string sorted_wanted = wanted;
    std::sort(sorted_layout.begin(), sorted_layout.end());
    std::sort(sorted_wanted.begin(), sorted_wanted.end());
    return sorted_layout == sorted_wanted ? v.error_layout : wanted;
  }

  Status WriteError(const V8Value& v, size_t depth) {
    if (v.has_cause != (v.items.size() == 1) || v.items.size() > 1) {
      return Fail("an error's cause does not match has_cause");
    }
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Tag(v8tag::kError);
    for (char c : ErrorLayout(v)) {
      const auto subtag = static_cast<uint8_t>(c);
      AppendVarint32(subtag, &out_);
      if (subtag == v8error::kMessage) {
        AppendV8String(v.message->units, v.message->two_byte, &out_);
      } else if (subtag == v8error::kStack) {
        AppendV8String(v.stack->units, v.stack->two_byte, &out_);
      } else if (subtag == v8error::kCause) {
        if (Status s = Write(v.items[0], depth + 1); !s.ok()) return s;
      }
    }
    AppendVarint32(v8error::kEnd, &out_);
    Complete(label);  // V8 registers an error once it is complete
    return Status::Ok();
  }

  // A back-reference, allowed only to a node V8 has registered by this point.
  Status WriteReference(const V8Value& v) {
    auto it = labels_.find(v.target);
    if (it == labels_.end() || !it->second.registered) {
      return Fail("a reference to " + std::to_string(v.target) +
                  ", which is no earlier complete object");
    }
    Tag(v8tag::kObjectReference);
    AppendVarint32(it->second.out_id, &out_);
    return Status::Ok();
  }

  Status WriteObject(const V8Value& v, size_t depth) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Complete(label);  // objects can be referred to from inside
    Tag(v8tag::kBeginObject);
    if (Status s = WriteProperties(v, depth); !s.ok()) return s;
    Tag(v8tag::kEndObject);
    AppendVarint32(static_cast<uint32_t>(v.properties.size()), &out_);
    return Status::Ok();
  }

  Status WriteDate(const V8Value& v) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Tag(v8tag::kDate);
    AppendDouble(v.number, &out_);
    Complete(label);
    return Status::Ok();
  }

  Status WriteRegExp(const V8Value& v) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Tag(v8tag::kRegExp);
    AppendV8String(v.string.units, v.string.two_byte, &out_);
    AppendVarint32(v.regexp_flags, &out_);
    Complete(label);
    return Status::Ok();
  }

  // A Map (items are key, value, key, value, ...) or a Set.
  Status WriteCollection(const V8Value& v, size_t depth) {
    const bool is_map = v.kind == V8Kind::kMap;
    if (is_map && v.items.size() % 2 != 0) return Fail("a map with an odd item count");
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Complete(label);
    Tag(is_map ? v8tag::kBeginMap : v8tag::kBeginSet);
    for (const V8Value& item : v.items) {
      if (Status s = Write(item, depth + 1); !s.ok()) return s;
    }
    Tag(is_map ? v8tag::kEndMap : v8tag::kEndSet);
    AppendVarint32(static_cast<uint32_t>(v.items.size()), &out_);
    return Status::Ok();
  }

  // new Boolean / Number / BigInt / String objects.
  Status WritePrimitiveWrapper(const V8Value& v) {
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    if (v.kind == V8Kind::kBooleanObject) {
      Tag(v.boolean ? v8tag::kTrueObject : v8tag::kFalseObject);
    } else if (v.kind == V8Kind::kNumberObject) {
      Tag(v8tag::kNumberObject);
      AppendDouble(v.number, &out_);
    } else if (v.kind == V8Kind::kBigIntObject) {
      Tag(v8tag::kBigIntObject);
      AppendV8BigIntPayload(v.bigint, &out_);
    } else {
      Tag(v8tag::kStringObject);
      AppendV8String(v.string.units, v.string.two_byte, &out_);
    }
    Complete(label);
    return Status::Ok();
  }

  // Deno's host-object form: the marker, then the one wrapped value.
  Status WriteHostObject(const V8Value& v, size_t depth) {
    if (v.items.size() != 1) return Fail("a host object without exactly one value");
    Label* label;
    if (Status s = Begin(v, &label); !s.ok()) return s;
    Tag(v8tag::kHostObject);
    AppendVarint32(kDenoHostObjectMarker, &out_);
    if (Status s = Write(v.items[0], depth + 1); !s.ok()) return s;
    Complete(label);
    return Status::Ok();
  }

  // One node: a dispatch on its kind to the writers above.
  Status Write(const V8Value& v, size_t depth) {
    if (depth > max_depth_) return Fail("nesting too deep");
    switch (v.kind) {
      case V8Kind::kUndefined:
        Tag(v8tag::kUndefined);
        return Status::Ok();
      case V8Kind::kNull:
        Tag(v8tag::kNull);
        return Status::Ok();
      case V8Kind::kBoolean:
        Tag(v.boolean ? v8tag::kTrue : v8tag::kFalse);
        return Status::Ok();
      case V8Kind::kNumber:
        return WriteNumber(v);
      case V8Kind::kBigInt:
        Tag(v8tag::kBigInt);
        AppendV8BigIntPayload(v.bigint, &out_);
        return Status::Ok();
      case V8Kind::kString:
        AppendV8String(v.string.units, v.string.two_byte, &out_);
        return Status::Ok();
      case V8Kind::kHole:
        return Fail("a hole outside a dense array");
      case V8Kind::kReference:
        return WriteReference(v);
      case V8Kind::kObject:
        return WriteObject(v, depth);
      case V8Kind::kArray:
        return WriteArray(v, depth);
      case V8Kind::kDate:
        return WriteDate(v);
      case V8Kind::kRegExp:
        return WriteRegExp(v);
      case V8Kind::kMap:
      case V8Kind::kSet:
        return WriteCollection(v, depth);
      case V8Kind::kArrayBuffer:
        return WriteBuffer(v);
      case V8Kind::kArrayBufferView:
        return WriteView(v);
      case V8Kind::kBooleanObject:
      case V8Kind::kNumberObject:
      case V8Kind::kBigIntObject:
      case V8Kind::kStringObject:
        return WritePrimitiveWrapper(v);
      case V8Kind::kError:
        return WriteError(v, depth);
      case V8Kind::kHostObject:
        return WriteHostObject(v, depth);
    }
    return Fail("unknown kind");
  }

  const uint32_t version_;
  const size_t max_depth_;
  std::string out_;
  uint32_t next_out_id_ = 0;
  std::unordered_map<uint32_t, Label> labels_;
};

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

bool SameString(const V8String& a, const V8String& b, bool wire) {
  return a.units == b.units && (!wire || a.two_byte == b.two_byte);
}

}  // namespace

const char* V8ViewTypeName(V8ViewType type) { return ViewInfo(type).name; }
const char* V8ErrorTypeName(V8ErrorType type) {
  return kErrorTypes[static_cast<size_t>(type)].name;
}
size_t V8ViewElementSize(V8ViewType type) { return ViewInfo(type).element_size; }

std::string V8NumberToString(double value) {
  if (std::isnan(value)) return "NaN";
  if (value == 0) return "0";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  // Shortest round-trip digits, then laid out as ECMAScript Number::toString does.
  char buf[64];
  const auto result =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(value), std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // the decimal point goes after n digits
  std::string out = value < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 < 0 ? "e-" : "e+") + std::to_string(std::abs(n - 1));
  }
  return out;
}

V8String V8String::FromUtf8(std::string_view utf8) { return V8String{Utf8ToUtf16(utf8), false}; }
std::string V8String::ToUtf8() const { return Utf16ToUtf8(units); }

namespace {
// A value of `kind` (labelled `id` if object-like), every other member at its default.
V8Value OfKind(V8Kind kind, uint32_t id = kV8NoId) {
  V8Value v;
  v.kind = kind;
  v.id = id;
  return v;
}
}  // namespace

V8Value V8Value::Undefined() { return V8Value(); }
V8Value V8Value::Null() { return OfKind(V8Kind::kNull); }
V8Value V8Value::Hole() { return OfKind(V8Kind::kHole); }

V8Value V8Value::Boolean(bool value) {
  V8Value v = OfKind(V8Kind::kBoolean);
  v.boolean = value;
  return v;
}

V8Value V8Value::Number(double value) {
  V8Value v = OfKind(V8Kind::kNumber);
  v.number = value;
  const bool is_int32 = value >= INT32_MIN && value <= INT32_MAX && value == std::trunc(value) &&
                        !(value == 0 && std::signbit(value));
  v.number_form = is_int32 ? V8NumberForm::kInt32 : V8NumberForm::kDouble;
  return v;
}

V8Value V8Value::FromBigInt(BigInt value) {
  V8Value v = OfKind(V8Kind::kBigInt);
  v.bigint = std::move(value);
  return v;
}

V8Value V8Value::String(std::string_view utf8) { return StringUtf16(Utf8ToUtf16(utf8)); }

V8Value V8Value::StringUtf16(std::u16string units) {
  V8Value v = OfKind(V8Kind::kString);
  v.string.units = std::move(units);
  return v;
}

V8Value V8Value::Reference(uint32_t target) {
  V8Value v = OfKind(V8Kind::kReference);
  v.target = target;
  return v;
}

V8Value V8Value::Object(uint32_t id) { return OfKind(V8Kind::kObject, id); }

V8Value V8Value::Array(uint32_t id) {
  V8Value v = OfKind(V8Kind::kArray, id);
  v.dense = true;
  return v;
}

V8Value V8Value::Map(uint32_t id) { return OfKind(V8Kind::kMap, id); }
V8Value V8Value::Set(uint32_t id) { return OfKind(V8Kind::kSet, id); }

V8Value V8Value::Date(uint32_t id, double ms) {
  V8Value v = OfKind(V8Kind::kDate, id);
  v.number = ms;
  return v;
}

V8Value V8Value::ArrayBuffer(uint32_t id, std::string bytes) {
  V8Value v = OfKind(V8Kind::kArrayBuffer, id);
  v.bytes = std::move(bytes);
  return v;
}

V8Value V8Value::View(uint32_t buffer_id, uint32_t view_id, V8ViewType type, std::string bytes) {
  V8Value v = OfKind(V8Kind::kArrayBufferView, view_id);
  v.view_type = type;
  v.byte_length = bytes.size();
  v.items.push_back(ArrayBuffer(buffer_id, std::move(bytes)));
  return v;
}

V8Value& V8Value::Add(V8Value key, V8Value value) {
  properties.push_back(V8Property{std::move(key), std::move(value)});
  return *this;
}

V8Value& V8Value::Add(std::string_view key, V8Value value) {
  return Add(String(key), std::move(value));
}

V8Value& V8Value::Push(V8Value element) {
  items.push_back(std::move(element));
  if (kind == V8Kind::kArray) length = static_cast<uint32_t>(items.size());
  return *this;
}

bool V8Value::IsObjectLike() const { return kind >= V8Kind::kObject && kind != V8Kind::kReference; }

bool V8ValueEquals(const V8Value& a, const V8Value& b, bool compare_wire_forms) {
  if (a.kind != b.kind || a.id != b.id) return false;
  const bool wire = compare_wire_forms;
  switch (a.kind) {
    case V8Kind::kUndefined:
    case V8Kind::kNull:
    case V8Kind::kHole:
      return true;
    case V8Kind::kBoolean:
    case V8Kind::kBooleanObject:
      return a.boolean == b.boolean;
    case V8Kind::kNumber:
      return SameBits(a.number, b.number) && (!wire || a.number_form == b.number_form);
    case V8Kind::kNumberObject:
    case V8Kind::kDate:
      return SameBits(a.number, b.number);
    case V8Kind::kBigInt:
    case V8Kind::kBigIntObject:
      return a.bigint == b.bigint;
    case V8Kind::kString:
    case V8Kind::kStringObject:
      return SameString(a.string, b.string, wire);
    case V8Kind::kRegExp:
      return SameString(a.string, b.string, wire) && a.regexp_flags == b.regexp_flags;
    case V8Kind::kArrayBuffer:
      return a.bytes == b.bytes && a.max_byte_length == b.max_byte_length;
    case V8Kind::kArrayBufferView:
      if (a.view_type != b.view_type || a.byte_offset != b.byte_offset ||
          a.byte_length != b.byte_length || a.view_flags != b.view_flags) {
        return false;
      }
      break;
    case V8Kind::kError:
      if (a.error_type != b.error_type || a.has_cause != b.has_cause ||
          a.message.has_value() != b.message.has_value() ||
          a.stack.has_value() != b.stack.has_value() ||
          (a.message && !SameString(*a.message, *b.message, wire)) ||
          (a.stack && !SameString(*a.stack, *b.stack, wire)) ||
          (wire && a.error_layout != b.error_layout)) {
        return false;
      }
      break;
    case V8Kind::kReference:
      return a.target == b.target;
    case V8Kind::kArray:
      if (a.length != b.length || (wire && a.dense != b.dense)) return false;
      break;
    case V8Kind::kObject:
    case V8Kind::kMap:
    case V8Kind::kSet:
    case V8Kind::kHostObject:
      break;
  }
  if (a.items.size() != b.items.size() || a.properties.size() != b.properties.size()) {
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!V8ValueEquals(a.items[i], b.items[i], wire)) return false;
  }
  for (size_t i = 0; i < a.properties.size(); ++i) {
    if (!V8ValueEquals(a.properties[i].key, b.properties[i].key, wire) ||
        !V8ValueEquals(a.properties[i].value, b.properties[i].value, wire)) {
      return false;
    }
  }
  return true;
}

namespace {

// Gives every object-like node of a tree the id V8 gives it when reading the tree's
// serialization (0, 1, 2, ... as each object's serialization begins; a view's buffer before the
// view, buffers that had no id of their own included) and points references at the new ids.
class Renumberer {
 public:
  void Run(V8Value* v) {
    if (v->kind == V8Kind::kReference) {
      auto it = ids_.find(v->target);
      v->target = it == ids_.end() ? kV8NoId : it->second;
      return;
    }
    if (v->kind == V8Kind::kArrayBufferView) {
      for (V8Value& item : v->items) Run(&item);  // the buffer comes first
      Assign(v);
      return;
    }
    if (v->IsObjectLike()) Assign(v);
    for (V8Value& item : v->items) Run(&item);
    for (V8Property& p : v->properties) {
      Run(&p.key);
      Run(&p.value);
    }
  }

 private:
  void Assign(V8Value* v) {
    const uint32_t fresh = next_++;
    if (v->id != kV8NoId) ids_[v->id] = fresh;
    v->id = fresh;
  }

  std::unordered_map<uint32_t, uint32_t> ids_;
  uint32_t next_ = 0;
};

}  // namespace

bool V8ValueEqualsRenumbered(const V8Value& a, const V8Value& b, bool compare_wire_forms) {
  V8Value x = a;
  V8Value y = b;
  Renumberer().Run(&x);
  Renumberer().Run(&y);
  return V8ValueEquals(x, y, compare_wire_forms);
}

Result<V8Value> DecodeV8Value(std::string_view data, const V8DecodeLimits& limits) {
  V8DecodeInfo unused;
  return DecodeV8Value(data, limits, &unused);
}

Result<V8Value> DecodeV8Value(std::string_view data, const V8DecodeLimits& limits,
                              V8DecodeInfo* info) {
  *info = V8DecodeInfo{};
  Result<V8Value> result = Decoder(data, limits, false).Run(info);
  // V8 reads version-13 data a second time with view flags when the first read fails: some
  // V8 releases wrote the flags while still declaring version 13 (crbug.com/1284506).
  if (!result.ok() && info->version == 13) {
    V8DecodeInfo retry_info;
    Result<V8Value> retry = Decoder(data, limits, true).Run(&retry_info);
    if (retry.ok()) {
      *info = retry_info;
      return retry;
    }
  }
  return result;
}

Result<std::string> EncodeV8Value(const V8Value& value, uint32_t format_version, size_t max_depth) {
  if (format_version < kV8MinReadVersion || format_version > kV8MaxReadVersion) {
    return InvalidArgument("cannot encode v8 value: format version " +
                           std::to_string(format_version) + " is not 13..16");
  }
  return Encoder(format_version, max_depth).Run(value);
}

}  // namespace kvc::codec
