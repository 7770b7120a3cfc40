// The JSON Schemas of schemas/ (embedded into the binary at build time), compiled once, and
// validation with a readable error. Internal to codec/: the JSON codecs (metadata, config,
// admin API) validate with it.
//
// Thread-safety: thread-safe; compiled schemas live until the process ends.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/schema.h>

#include <string_view>

#include "codec/json_parse.h"
#include "common/status.h"

namespace kvc::codec {

// The text of an embedded schema file (e.g. "config.schema.json"), or empty if there is none.
std::string_view EmbeddedSchema(std::string_view file);

// The compiled schema of a whole file, or of one of its definitions (`definition` non-empty:
// the schema {"$ref": "#/definitions/<definition>"} beside the file's definitions). nullptr if
// the file or the definition does not exist.
const rapidjson::SchemaDocument* CompiledSchema(std::string_view file,
                                                std::string_view definition = {});

// Runs `value` through `validator` (true: it matches). Use this, never value.Accept(validator):
// it keeps numbers an attacker chooses (1e30 under an `enum` rule) from RapidJSON's undefined
// behaviour (see HashableDouble in json_schema.cc).
bool AcceptsJson(rapidjson::SchemaValidator* validator, const rapidjson::Value& value);

// Errors: InvalidArgument "<what> does not match the expected schema at <pointer> (rule '<rule>')."
Status ValidateJson(const rapidjson::SchemaDocument& schema, const rapidjson::Value& value,
                    std::string_view what);

}  // namespace kvc::codec
