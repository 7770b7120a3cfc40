#include "codec/config_json.h"

// RapidJSON 1.1's member iterators trip clang's C++20 reversed-operator check in range-for.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wambiguous-reversed-operator"
#endif

#include <rapidjson/document.h>
#include <rapidjson/schema.h>
#include <rapidjson/stringbuffer.h>

#include <cstdlib>
#include <map>
#include <memory>

#include "codec/json_parse.h"
#include "codec/json_schema.h"

namespace kvc::codec {
namespace {

constexpr std::string_view kSchemaName = "config.schema.json";

// The schema is an object of named properties. Each property's own schema is compiled and
// applied to its value separately; unknown keys are found by name. (RapidJSON 1.1 leaks the
// property names of a compiled "properties" schema, so the whole schema is not compiled.)
struct Compiled {
  rapidjson::Document doc;
  std::map<std::string, std::unique_ptr<rapidjson::SchemaDocument>, std::less<>> by_key;
};

const Compiled& Schema() {
  static const Compiled* compiled = [] {
    auto* c = new Compiled();
    std::string_view text = EmbeddedSchema(kSchemaName);
    if (!ParseJsonDocument(text, kDefaultMaxJsonDepth, &c->doc, nullptr)) std::abort();
    for (const auto& m : c->doc["properties"].GetObject()) {
      c->by_key.emplace(m.name.GetString(), std::make_unique<rapidjson::SchemaDocument>(m.value));
    }
    return c;
  }();
  return *compiled;
}

std::string Describe(const Compiled& c, const std::string& key) {
  const auto& props = c.doc["properties"];
  auto it = props.FindMember(key.c_str());
  if (it == props.MemberEnd()) return {};
  std::string out;
  const auto& p = it->value;
  if (p.HasMember("type") && p["type"].IsString()) {
    out += std::string("expected ") + p["type"].GetString();
  } else if (p.HasMember("type") && p["type"].IsArray()) {  // ["string", "integer"]
    out += "expected ";
    for (const auto& t : p["type"].GetArray()) {
      if (t.IsString()) out += std::string(&t == p["type"].Begin() ? "" : " or ") + t.GetString();
    }
  }
  // Choices are written as a pattern "^(a|b|c)$" (RapidJSON 1.1 leaks "enum" values).
  if (p.HasMember("pattern")) out += std::string(" matching ") + p["pattern"].GetString();
  if (p.HasMember("minimum")) out += ", at least " + std::to_string(p["minimum"].GetInt64());
  if (p.HasMember("maximum")) out += ", at most " + std::to_string(p["maximum"].GetInt64());
  return out;
}

}  // namespace

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> keys;
  for (const auto& m : Schema().doc["properties"].GetObject())
    keys.emplace_back(m.name.GetString());
  return keys;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseConfigFile(std::string_view json) {
  const Compiled& c = Schema();
  rapidjson::Document d;
  JsonParseFailure failure;
  if (!ParseJsonDocument(json, kDefaultMaxJsonDepth, &d, &failure)) {
    if (failure.too_deep) {
      return InvalidArgument(JsonTooDeepText("the configuration", kDefaultMaxJsonDepth));
    }
    return InvalidArgument("malformed JSON at byte " + std::to_string(failure.offset) + ": " +
                           failure.reason);
  }
  if (!d.IsObject()) return InvalidArgument("the configuration must be a JSON object");
  for (const auto& m : d.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    auto it = c.by_key.find(key);
    if (it == c.by_key.end()) {
      return InvalidArgument("unknown key '" + key +
                             "' (see schemas/config.schema.json for the keys)");
    }
    rapidjson::SchemaValidator v(*it->second);
    if (!AcceptsJson(&v, m.value)) {
      return InvalidArgument("invalid value for '" + key + "': " + Describe(c, key) +
                             " (schema rule '" + v.GetInvalidSchemaKeyword() + "')");
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : d.GetObject()) {
    const auto& val = m.value;
    std::string text;
    if (val.IsString()) {
      text.assign(val.GetString(), val.GetStringLength());
    } else if (val.IsBool()) {
      text = val.GetBool() ? "true" : "false";
    } else if (val.IsInt64()) {
      text = std::to_string(val.GetInt64());
    } else if (val.IsUint64()) {
      text = std::to_string(val.GetUint64());
    } else if (val.IsDouble()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", val.GetDouble());
      text = buf;
    } else {
      return InvalidArgument(std::string("invalid value for '") + m.name.GetString() + "'");
    }
    out.emplace_back(m.name.GetString(), std::move(text));
  }
  return out;
}

}  // namespace kvc::codec
