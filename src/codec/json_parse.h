// The one way JSON text becomes a RapidJSON document in this program (a unit test finds any other
// RapidJSON parse in src/): request bodies (metadata exchange, admin API, queue API), the config
// file, backup manifests, our embedded schemas, metadata answers read by the client.
//
// Parsing is RapidJSON's iterative parser (no recursion, whatever the input) with arrays and
// objects counted as they open: text nested deeper than the cap stops the parse at that bracket,
// so neither the parse nor anything that later walks the document (schema validation, Accept,
// Writer) sees a deep document. Cost is linear in the text's length.
//
// The V8 JSON views (v8_json.h: values, keys and entries, NDJSON import lines) have a reader of
// their own, because they keep what RapidJSON cannot (lone surrogates, numbers as written); it is
// bounded the same way by V8JsonOptions::max_depth.
//
// Thread-safety: thread-safe.
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "codec/json_depth.h"
#include "common/status.h"

namespace kvc::codec {

// Why ParseJsonDocument failed.
struct JsonParseFailure {
  bool too_deep = false;  // an array or object opened more than max_depth levels deep
  std::string reason;     // RapidJSON's English text of the syntax error (empty if too_deep)
  size_t offset = 0;      // byte offset of the error
};

// Parses `text` (UTF-8 checked) into *doc, with arrays and objects at most `max_depth` levels
// deep (the outermost one is level 1). Returns true, or false with *failure filled (if given);
// *doc is then null.
bool ParseJsonDocument(std::string_view text, size_t max_depth, rapidjson::Document* doc,
                       JsonParseFailure* failure);

// The text of a too-deep failure: "<what> is nested deeper than <max_depth> levels."
std::string JsonTooDeepText(std::string_view what, size_t max_depth);

// Parses `text` into *doc with ParseJsonDocument. Errors: InvalidArgument "<what> is not valid
// JSON: <reason> (at byte N)." or "<what> is nested deeper than <max_depth> levels."
Status ParseJsonText(std::string_view text, std::string_view what, rapidjson::Document* doc,
                     size_t max_depth = MaxJsonDepth());

}  // namespace kvc::codec
