// JsonNode and ReadJsonNode: a small JSON document model and its reader, for the JSON views of
// keys, values and entries (v8_json.h).
//
// Written by hand rather than with RapidJSON (json_parse.h): JS strings may hold lone
// surrogates, which JSON.stringify writes as \uD800-style escapes and RapidJSON 1.1 rejects, so
// strings are kept as UTF-16 code units, lone surrogates included. The reader also bounds
// nesting and rejects duplicate member names. It recurses, one level per nesting level, up to
// the caller's max_depth.
//
// Ownership: a JsonNode owns its items and members.
// Thread-safety: plain values and a pure function; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::codec {

struct JsonMember;

struct JsonNode {
  enum class Type { kNull, kFalse, kTrue, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  double number = 0;
  std::u16string string;            // kString: UTF-16 code units (lone surrogates kept)
  std::vector<JsonNode> items;      // kArray
  std::vector<JsonMember> members;  // kObject, in document order, names unique

  // The member named `name`, or null (also when this is no object).
  const JsonNode* Find(std::u16string_view name) const;
  bool IsString() const { return type == Type::kString; }
};

struct JsonMember {
  std::u16string first;  // the name
  JsonNode second;       // the value
};

// Parses one JSON value (UTF-8 text, whitespace around it allowed). Errors (InvalidArgument):
// "invalid JSON: <what> at offset <n>" (malformed text or UTF-8, a duplicate member name, a
// number out of double range), "JSON too deep" (arrays and objects nested deeper than
// `max_depth` levels).
Result<JsonNode> ReadJsonNode(std::string_view text, size_t max_depth);

}  // namespace kvc::codec
