// Whole V8 values (reference §5): a tree type, V8Value, for every value a Deno KV value can hold,
// with a decoder from V8 ValueSerializer bytes (format versions 13..16, plus the host-object
// forms of Node's v8.serialize and of Deno) and an encoder back to bytes Deno and Node read.
// The admin API and console show and edit values through it (v8_json.h gives its JSON views).
//
// Shared objects: V8 numbers the object-like values of one serialization 0, 1, 2, ... in the
// order their serialization begins (an ArrayBufferView after its buffer) and writes a later
// occurrence of the same object as a back-reference `^id`. The tree keeps that as is: every
// object-like node carries its `id`, and a kReference node names the id of an earlier node, so
// shared and cyclic structures round-trip without being copied. The encoder renumbers: ids are
// labels, only the order of the nodes counts.
//
// Thread-safety: V8Value is a value type; the functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/v8/v8_value.h"
#include "common/status.h"

namespace kvc::codec {

enum class V8Kind : uint8_t {
  kUndefined,
  kNull,
  kBoolean,
  kNumber,
  kBigInt,
  kString,
  kHole,  // only as an element of a dense array: an absent index
  kObject,
  kArray,
  kDate,
  kRegExp,
  kMap,
  kSet,
  kArrayBuffer,
  kArrayBufferView,
  kBooleanObject,  // new Boolean(...)
  kNumberObject,   // new Number(...)
  kBigIntObject,   // Object(1n)
  kStringObject,   // new String(...)
  kError,
  kHostObject,  // Deno's host-object form: an object Deno serializes through its own hook
  kReference,   // a back-reference to the node with id == target
};

// How a number was (or is to be) written: tag I, U or N. The encoder falls back to N when the
// value does not fit the form.
enum class V8NumberForm : uint8_t { kInt32, kUint32, kDouble };

// ArrayBufferView types; the wire sub-tags are in v8_wire.h (v8view).
enum class V8ViewType : uint8_t {
  kInt8Array,
  kUint8Array,
  kUint8ClampedArray,
  kInt16Array,
  kUint16Array,
  kInt32Array,
  kUint32Array,
  kFloat16Array,
  kFloat32Array,
  kFloat64Array,
  kBigInt64Array,
  kBigUint64Array,
  kDataView,
};

// Error prototypes (V8 picks one from the error's `name`).
enum class V8ErrorType : uint8_t {
  kError,
  kEvalError,
  kRangeError,
  kReferenceError,
  kSyntaxError,
  kTypeError,
  kUriError,
};

// The JS constructor name: "Int8Array", ..., "DataView"; "Error", ..., "URIError".
const char* V8ViewTypeName(V8ViewType type);
const char* V8ErrorTypeName(V8ErrorType type);
// Bytes per element: 1, 2, 4 or 8 (1 for DataView).
size_t V8ViewElementSize(V8ViewType type);

// Returns `value` as JS's Number.prototype.toString() prints it ("1", "-0.5", "1e+21", "NaN";
// -0 prints "0"): the property name a number key stands for.
std::string V8NumberToString(double value);

// Ids of object-like nodes; kV8NoId on primitives and on nodes not yet numbered.
inline constexpr uint32_t kV8NoId = 0xFFFFFFFF;

// A JS string: UTF-16 code units (lone surrogates allowed), plus how it was written.
struct V8String {
  std::u16string units;
  // Written as two-byte (`c`) even if every unit is <= 0xFF, as V8 does for strings it holds in
  // two-byte form; strings with a unit > 0xFF are always two-byte.
  bool two_byte = false;

  static V8String FromUtf8(std::string_view utf8);
  // The text as UTF-8 (lone surrogates become U+FFFD).
  std::string ToUtf8() const;
};

struct V8Property;

// One node of a V8 value. Which fields are meaningful depends on `kind`; the others keep their
// defaults. Children are owned by value.
struct V8Value {
  V8Kind kind = V8Kind::kUndefined;
  // Object-like kinds (kObject and later, but kReference): the label back-references use.
  uint32_t id = kV8NoId;

  bool boolean = false;  // kBoolean, kBooleanObject
  // kNumber, kNumberObject; kDate: milliseconds since the epoch. Bit patterns are kept.
  double number = 0;
  V8NumberForm number_form = V8NumberForm::kDouble;  // kNumber
  BigInt bigint;                                     // kBigInt, kBigIntObject
  V8String string;            // kString, kStringObject; kRegExp: the pattern (its `source`)
  uint32_t regexp_flags = 0;  // kRegExp: g=1 i=2 m=4 y=8 u=16 s=32 l=64 d=128 v=256

  // kArray: the JS length; `dense` arrays (tag A) list `length` elements in `items` (kHole for
  // absent ones), sparse arrays (tag a) hold their elements as index properties.
  uint32_t length = 0;
  bool dense = false;
  // kArray (dense): the elements; kSet: the elements; kMap: key, value, key, value, ...;
  // kArrayBufferView: exactly one, its buffer (a kArrayBuffer or a kReference to one);
  // kError: the cause, if it has one; kHostObject: the value Deno wrote for it.
  std::vector<V8Value> items;
  // kObject, kArray: own properties in order. Keys are kString or kNumber nodes (V8 writes
  // array-index keys as numbers).
  std::vector<V8Property> properties;

  std::string bytes;                        // kArrayBuffer: the contents
  std::optional<uint64_t> max_byte_length;  // kArrayBuffer: set for a resizable buffer

  V8ViewType view_type = V8ViewType::kUint8Array;  // kArrayBufferView
  uint64_t byte_offset = 0;
  uint64_t byte_length = 0;
  uint32_t view_flags = 0;  // v8view::kFlagLengthTracking, kFlagBackedByResizable

  V8ErrorType error_type = V8ErrorType::kError;  // kError
  std::optional<V8String> message;
  std::optional<V8String> stack;
  bool has_cause = false;  // the cause is items[0]
  // kError: the sub-tags in the order they were read (e.g. "Tmsc"); the encoder keeps that
  // order when it still fits the fields, else writes prototype, message, stack, cause.
  std::string error_layout;

  uint32_t target = kV8NoId;  // kReference

  // Factories for the common cases.
  static V8Value Undefined();
  static V8Value Null();
  static V8Value Boolean(bool value);
  // A number, written as I when it is an int32 (and not -0), else as N.
  static V8Value Number(double value);
  static V8Value FromBigInt(BigInt value);
  static V8Value String(std::string_view utf8);
  static V8Value StringUtf16(std::u16string units);
  static V8Value Hole();
  static V8Value Reference(uint32_t target);
  // An empty object / dense array / Map / Set with the given id.
  static V8Value Object(uint32_t id);
  static V8Value Array(uint32_t id);
  static V8Value Map(uint32_t id);
  static V8Value Set(uint32_t id);
  static V8Value Date(uint32_t id, double ms);
  static V8Value ArrayBuffer(uint32_t id, std::string bytes);
  // A view over the whole of a new buffer holding `bytes`.
  static V8Value View(uint32_t buffer_id, uint32_t view_id, V8ViewType type, std::string bytes);

  // Appends a property (object or array) / a dense array element.
  V8Value& Add(V8Value key, V8Value value);
  V8Value& Add(std::string_view key, V8Value value);
  V8Value& Push(V8Value element);

  // True for the kinds that get an id (objects, arrays, Date, RegExp, Map, Set, buffers, views,
  // boxed primitives, errors, host objects).
  bool IsObjectLike() const;
};

struct V8Property {
  V8Value key;
  V8Value value;
};

// Deep equality. Numbers and dates compare by bit pattern (NaN equals the same NaN, -0 differs
// from 0), ids and reference targets must match exactly. With `compare_wire_forms`, the choices
// that only change the bytes must match too (number form, two-byte strings, dense vs sparse,
// error layout); without it they are ignored.
bool V8ValueEquals(const V8Value& a, const V8Value& b, bool compare_wire_forms = false);
// As V8ValueEquals, but ids count by position, not by label: both trees are first renumbered as
// V8 numbers the objects of their serialization (a view's buffer before the view, a buffer
// without an id included), references following. So a Node host-object view (one id) and the
// same view written by V8 (two ids: buffer and view) compare equal, and so do the objects after
// them.
bool V8ValueEqualsRenumbered(const V8Value& a, const V8Value& b, bool compare_wire_forms = false);

// Limits of DecodeV8Value. The defaults suit values up to a few MiB; a 64 KiB KV value cannot
// reach them except by nesting.
struct V8DecodeLimits {
  size_t max_depth = 200;              // nesting of containers, views, errors and host objects
  size_t max_nodes = size_t{1} << 20;  // V8Value nodes in the tree (keys included)
};

// Decodes a whole serialized V8 value: header FF + version 13..16, one value, nothing after it
// (padding bytes before tags are skipped, `?` verify-object-count prefixes ignored). Checks what
// V8's deserializer checks (property counts, lengths, views inside their buffer, valid regexp
// flags, no duplicate property keys, references only to objects already complete or still
// open), so that what it accepts, V8 does too. For version 13 it retries with view flags when
// the first read fails, as V8 does for data an old V8 wrote with a wrong version. Node's
// host-object form of a typed array (tag `\`, a type index, a byte length, the bytes) becomes
// a view over a new buffer with no id of its own; Deno's host-object form becomes kHostObject.
// Never reads outside `data`; time and memory are linear in its size.
// Errors (all InvalidArgument, the message saying where):
//   "invalid v8 value: ..."      malformed or truncated input, trailing bytes, a bad header;
//   "unsupported v8 value: ..."  well-formed but not storable or not representable here
//                                (SharedArrayBuffer, transfers, wasm, shared objects, an
//                                unknown host object);
//   "v8 value too deep" / "v8 value too large"  over `limits`.
Result<V8Value> DecodeV8Value(std::string_view data, const V8DecodeLimits& limits = {});

// What DecodeV8Value read beyond the tree: the format version, the views Node's host-object
// form stood for (which the tree shows as ordinary views), and whether format 16's wide lengths
// were needed.
struct V8DecodeInfo {
  uint32_t version = 0;
  size_t node_host_views = 0;  // every Node host-object view
  size_t node_buffers = 0;     // of those, Node Buffers (type index 10), read as Uint8Arrays
  // Format 16 only: a buffer or view length, offset or maximum length was 2^32 or more, or
  // written in more than 5 bytes. When false, reading the same bytes as format 15 takes the
  // same path to the same tree: lengths are the only thing the two formats read differently.
  bool wide_lengths = false;
};
// As above, and on success fills *info. REQUIRES: info != nullptr.
Result<V8Value> DecodeV8Value(std::string_view data, const V8DecodeLimits& limits,
                              V8DecodeInfo* info);

// Encodes `value` with the header FF + `format_version` (13..16; kV8WriteVersion by default,
// which every Deno and Node >= 18 reads). The output of DecodeV8Value re-encodes to the input
// bytes whenever V8 wrote them (see src/codec/README.md for the exceptions). Ids are
// renumbered in the order V8 numbers objects; references follow their targets.
// Errors (InvalidArgument): "cannot encode v8 value: ..." when the tree breaks a rule the
// bytes cannot express: a reference to no node or to a node not yet complete (a Date, RegExp,
// buffer, view, boxed primitive, error or host object can only be referred to after it),
// duplicate ids, a hole outside a dense array, a dense array whose `items` size is not
// `length`, a key that is not a string or number, a view outside its buffer or misaligned, a
// view whose buffer is not a buffer, view flags in format 13, a resizable buffer with a max
// length below its length, or nesting deeper than `max_depth`.
Result<std::string> EncodeV8Value(const V8Value& value, uint32_t format_version = kV8WriteVersion,
                                  size_t max_depth = V8DecodeLimits{}.max_depth);

}  // namespace kvc::codec
