// The parts of the KvValueJSON mapping (v8_json.h) that its files share; for codec/v8_json*.cc
// only. The mapping is three files: v8_json_writer.cc (V8 value tree -> KvValueJSON),
// v8_json_builder.cc (KvValueJSON -> V8 value tree) and v8_json.cc (the public functions: keys,
// whole KV values, entries, and the helpers below). JSON text is read by v8_json_reader.h and
// dates by iso_date.h.
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "codec/v8/v8_json.h"
#include "codec/v8/v8_json_reader.h"
#include "codec/v8/v8_tree.h"
#include "common/status.h"

namespace kvc::codec::v8json {

// RegExp flags in the order of RegExp.prototype.flags, and V8's bit for each.
inline constexpr std::u16string_view kRegExpFlagLetters = u"dgilmsuvy";
inline constexpr uint32_t kRegExpFlagBits[] = {128, 1, 2, 64, 4, 32, 16, 256, 8};

// InvalidArgument "bad KvValueJSON: <what>".
Status Bad(const std::string& what);

// Appends a JSON number, or "NaN" / "Infinity" / "-Infinity" as @deno/kv-utils writes them; -0
// as -0.
void AppendNumberValue(double value, std::string* out);

// URL-safe base64 without padding.
std::string Base64Url(std::string_view bytes);
// Accepts both base64 alphabets, with or without padding. Errors: InvalidArgument "bad base64".
Result<std::string> DecodeBase64(const std::u16string& text);

// A number as AppendNumberValue writes it (a JSON number or one of the three strings). Errors:
// Bad.
Result<double> NumberFromJson(const JsonNode* value);
// The member `name` of `node` as an integer in 0..2^53-1, or `fallback` if absent.
// Errors: Bad.
Result<uint64_t> UintMember(const JsonNode& node, std::u16string_view name, uint64_t fallback);

// Whether `name` is an array index ("0".."4294967294", no leading zeros); sets *index if so.
bool IsArrayIndexName(std::u16string_view name, uint32_t* index);

// The KvValueJSON of a V8 value tree; errors as V8ValueToJson (v8_json_writer.cc).
Result<std::string> WriteValueJson(const V8Value& value, const V8JsonOptions& options);
// The V8 value tree a KvValueJSON names; errors as V8ValueFromJson (v8_json_builder.cc).
Result<V8Value> BuildValue(const JsonNode& node, const V8JsonOptions& options);

}  // namespace kvc::codec::v8json
