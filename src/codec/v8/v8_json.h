// JSON views of Deno KV keys, values and entries in the forms of @deno/kv-utils (formerly
// @std/kv/json; kv-toolbox reads and writes the same), for the admin API and console:
//
//   key part  {"type": "string"|"number"|"bigint"|"boolean"|"Uint8Array", "value": ...}
//             numbers: a JSON number, or "NaN", "Infinity", "-Infinity"; bigints: a decimal
//             string; Uint8Array: URL-safe base64 without padding (either alphabet, padded or
//             not, is accepted on input)
//   key       [part, ...]                                        (KvKeyJSON)
//   raw part  {"type": "raw", "value": "<URL-safe base64>"}: bytes of a key as they are stored.
//             Keys are opaque bytes on the wire, so a client can store bytes that are no Deno
//             key; such a key is shown as its typed parts as far as they decode (and encode back
//             to the same bytes), then one raw part with the rest. On input a raw part stands
//             for its bytes wherever it appears. Our own addition: @deno/kv-utils refuses it.
//   value     {"type": T, "value": ...}                           (KvValueJSON), T one of
//             undefined null boolean number bigint string object Array Map Set Date RegExp
//             Error EvalError RangeError ReferenceError SyntaxError TypeError URIError
//             ArrayBuffer DataView Int8Array Uint8Array Uint8ClampedArray Int16Array
//             Uint16Array Int32Array Uint32Array Float16Array Float32Array Float64Array
//             BigInt64Array BigUint64Array KvU64
//   entry     {"key": key, "value": value, "versionstamp": "<20 hex digits>"}  (KvEntryJSON),
//             plus "expires_at": "<RFC 3339 UTC, milliseconds>" when the entry expires (our
//             own member; the tools above ignore it)
//
// The exact spellings and layouts are in src/codec/README.md. On input, kv-toolbox's names
// json_object, json_array, json_map and json_set and its `byteLength` members are accepted too.
// Where @deno/kv-utils loses information, the view adds members it ignores, so that every V8
// value round-trips: Array "length" (trailing holes) and "properties" (non-index properties),
// JSON null for a hole; typed arrays "byteOffset"/"byteLength" when the view is not its whole
// buffer, "maxByteLength" and "lengthTracking" for resizable buffers; Error members only when
// the error has them; -0 as the JSON number -0; strings with lone surrogates as \uD800 escapes
// (as JSON.stringify writes them). Types of its own: "BooleanObject", "NumberObject",
// "BigIntObject", "StringObject" (boxed primitives), "HostObject" (an object Deno serialized
// through its host-object hook, e.g. a Blob; "value" is what Deno wrote), "ref" ("value": the
// number of an earlier object, counted as V8 counts them, see below) and, for a whole KV value
// the V8 codec cannot represent, {"type": "v8", "value": "<URL-safe base64 of the stored
// bytes>"}.
//
// Object numbering for "ref": every object-like value (anything but undefined, null, booleans,
// numbers, bigints, strings and refs) gets the next number, from 0, when its JSON begins, in
// this order: an object's members as they appear, an Array's "value" elements then its
// "properties", Map entries key before value, an error's cause, a HostObject's value; a typed
// array or DataView counts twice, its buffer (an inline "value" or a "buffer" member) first.
// That is the order V8 numbers objects on the wire.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/key_codec.h"
#include "codec/v8/v8_tree.h"
#include "common/status.h"
#include "storage/kv_types.h"

namespace kvc::codec {

struct V8JsonOptions {
  // Write a later occurrence of a shared object in full again, as @deno/kv-utils does (JS has
  // no other way); false: write {"type": "ref", "value": N}. A cycle is always a ref.
  bool expand_shared = true;
  // JSON values (array holes included) one view may hold; expanding shared objects can
  // multiply the size, so it is checked. Over it: InvalidArgument "JSON view too large".
  size_t max_output_values = size_t{1} << 20;
  // Nesting of JSON arrays and objects, on output and input.
  size_t max_depth = 800;
};

// Returns the KvValueJSON of a V8 value. Errors (InvalidArgument): "JSON view too large",
// "JSON view too deep", "duplicate property" (a hand-built tree), "unresolved reference".
Result<std::string> V8ValueToJson(const V8Value& value, const V8JsonOptions& options = {});

// Parses a KvValueJSON into a V8 value tree (ids numbered as described above). Does not accept
// "KvU64" or "v8", which only a whole KV value can be (KvValueFromJson). Errors
// (InvalidArgument): malformed JSON, an unknown type, a member of the wrong JSON type, a bad
// base64, date, regexp or number, nesting deeper than options.max_depth. References are
// checked when the tree is encoded (EncodeV8Value).
Result<V8Value> V8ValueFromJson(std::string_view json, const V8JsonOptions& options = {});

// Key parts and keys. KeyFromJson/KeyPartFromJson errors (InvalidArgument): malformed JSON, an
// unknown type, a string with a lone surrogate (keys are UTF-8), a bigint beyond the key
// codec's 255 bytes; KeyFromJson also refuses a raw part (it has no typed form).
std::string KeyPartToJson(const KeyPart& part);
Result<KeyPart> KeyPartFromJson(std::string_view json);
// The KvKeyJSON of any key bytes `encoded`: typed parts for a key Deno could write, otherwise a
// raw part as described above. Never fails, so a key a client stored always has a view.
std::string KeyToJson(std::string_view encoded);
Result<std::vector<KeyPart>> KeyFromJson(std::string_view json);
// The key bytes a KvKeyJSON names, raw parts included; KeyBytesFromJson(KeyToJson(k)) == k for
// every k. Errors: as KeyFromJson, and a raw part whose value is not base64.
Result<std::string> KeyBytesFromJson(std::string_view json);

// A stored value with its encoding: kV8 as its KvValueJSON (shared objects expanded; if that
// is too large, as refs; if the V8 codec cannot represent it, the {"type": "v8"} raw form), kLe64
// as {"type": "KvU64", "value": "<decimal>"}, kBytes as {"type": "Uint8Array", "value": ...}.
// Errors (InvalidArgument): a kLe64 value that is not 8 bytes.
Result<std::string> KvValueToJson(const KvValue& value, const V8JsonOptions& options = {});

// The inverse: "KvU64" becomes kLe64, a plain "Uint8Array" (its whole buffer, not resizable)
// kBytes, as Deno stores them; "v8" its bytes as they are (they must start with a V8 header);
// anything else the V8 encoding written with `format_version`. Errors: as V8ValueFromJson and
// EncodeV8Value; a KvU64 outside 0..2^64-1.
Result<KvValue> KvValueFromJson(std::string_view json, uint32_t format_version = kV8WriteVersion,
                                const V8JsonOptions& options = {});

// KvEntryJSON of an entry (its key as KeyToJson, its value as KvValueToJson, its versionstamp
// from `version`, and "expires_at" as ExpiryToJsonTime when expire_at_ms >= 0), and back (an
// absent or null "expires_at" is -1: never; a time before 1970 is 0: long expired).
// EntryFromJson errors: as KeyBytesFromJson and KvValueFromJson, a missing member, a
// versionstamp that is not 20 hex digits ending in 0000, an expires_at that is no such time.
Result<std::string> EntryToJson(const Entry& entry, const V8JsonOptions& options = {});

// An entry's expiry (absolute Unix ms) as the "expires_at" of its JSON views, in the form of
// Date.prototype.toISOString ("2026-11-27T10:00:00.000Z"; a year outside 0..9999 as +YYYYYY or
// -YYYYYY), so JavaScript's Date reads it back exactly; an expiry beyond Date's range (+-8.64e15
// ms, the year 275760) is given as that bound.
std::string ExpiryToJsonTime(int64_t expire_at_ms);
// The inverse, for every ISO time JavaScript's Date.parse reads exactly (an offset instead of
// Z; a date alone is UTC midnight). Errors: InvalidArgument, with a text for the client.
Result<int64_t> ExpiryFromJsonTime(std::string_view text);
Result<Entry> EntryFromJson(std::string_view json, uint32_t format_version = kV8WriteVersion,
                            const V8JsonOptions& options = {});

// Decimal text of a BigInt ("-123", "0") and the inverse (an optional '-' then digits; no
// leading zeros but "0"). Errors (InvalidArgument): anything else.
std::string BigIntToDecimal(const BigInt& value);
Result<BigInt> BigIntFromDecimal(std::string_view text);

}  // namespace kvc::codec
