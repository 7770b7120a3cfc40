// The `serve --config` file: a JSON object validated against schemas/config.schema.json
// (embedded at build time). Keys are serve flag names with '_' for '-'.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kvc::codec {

// Returns (key, value as text) pairs in file order; numbers are written without exponent,
// booleans as true/false. Errors: InvalidArgument naming the unknown key, or the key whose
// value breaks the schema, or where the JSON is malformed.
Result<std::vector<std::pair<std::string, std::string>>> ParseConfigFile(std::string_view json);

// The keys the schema allows, in schema order.
std::vector<std::string> ConfigKeys();

}  // namespace kvc::codec
