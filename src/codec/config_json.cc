#include "codec/config_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/schema.h>
#include <rapidjson/stringbuffer.h>

#include <memory>
#include <mutex>

#include "codec/metadata_json.h"

namespace kvc::codec {
namespace {

constexpr std::string_view kSchemaName = "config.schema.json";

struct Compiled {
  rapidjson::Document doc;
  std::unique_ptr<rapidjson::SchemaDocument> schema;
};

const Compiled& Schema() {
  static const Compiled* compiled = [] {
    auto* c = new Compiled();
    std::string_view text = EmbeddedSchema(kSchemaName);
    c->doc.Parse(text.data(), text.size());
    c->schema = std::make_unique<rapidjson::SchemaDocument>(c->doc);
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
  if (p.HasMember("type")) out += std::string("expected ") + p["type"].GetString();
  if (p.HasMember("enum")) {
    out += " (one of";
    for (const auto& e : p["enum"].GetArray()) out += std::string(" ") + e.GetString();
    out += ")";
  }
  if (p.HasMember("minimum")) out += ", at least " + std::to_string(p["minimum"].GetInt64());
  if (p.HasMember("maximum")) out += ", at most " + std::to_string(p["maximum"].GetInt64());
  return out;
}

}  // namespace

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> keys;
  for (const auto& m : Schema().doc["properties"].GetObject()) keys.emplace_back(m.name.GetString());
  return keys;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseConfigFile(std::string_view json) {
  const Compiled& c = Schema();
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError()) {
    return InvalidArgument(std::string("malformed JSON at byte ") +
                           std::to_string(d.GetErrorOffset()) + ": " +
                           rapidjson::GetParseError_En(d.GetParseError()));
  }
  if (!d.IsObject()) return InvalidArgument("the configuration must be a JSON object");
  const auto& props = c.doc["properties"];
  for (const auto& m : d.GetObject()) {
    if (!props.HasMember(m.name)) {
      return InvalidArgument(std::string("unknown key '") + m.name.GetString() +
                             "' (see schemas/config.schema.json for the keys)");
    }
  }
  rapidjson::SchemaValidator v(*c.schema);
  if (!d.Accept(v)) {
    rapidjson::StringBuffer path;
    v.GetInvalidDocumentPointer().StringifyUriFragment(path);
    std::string key = path.GetString();
    if (key.rfind("#/", 0) == 0) key = key.substr(2);
    return InvalidArgument("invalid value for '" + key + "': " + Describe(c, key) +
                           " (schema rule '" + v.GetInvalidSchemaKeyword() + "')");
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
