#include "codec/metadata_json.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "codec/json_parse.h"
#include "codec/json_schema.h"

namespace kvc::codec {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// Writes the member `key` holding the string `value`.
void StringMember(JsonWriter& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

}  // namespace

Result<MetadataRequest> ParseMetadataRequest(std::string_view body) {
  MetadataRequest req;
  bool blank = true;
  for (char c : body) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') blank = false;
  }
  if (blank) {
    req.supported_versions = {1};
    return req;
  }
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(body, "The metadata exchange request body", &d));
  const auto* schema = CompiledSchema("metadata-exchange-request.schema.json");
  if (!schema) return Internal("metadata request schema is missing");
  KVC_RETURN_IF_ERROR(ValidateJson(*schema, d, "The metadata exchange request"));
  for (const auto& v : d["supportedVersions"].GetArray()) {
    req.supported_versions.push_back(v.IsInt64() ? v.GetInt64() : INT64_MAX);
  }
  return req;
}

std::string EncodeMetadataResponse(const MetadataResponse& r) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("version");
  w.Int(r.version);
  StringMember(w, "databaseId", r.database_id);
  w.Key("endpoints");
  w.StartArray();
  for (const Endpoint& e : r.endpoints) {
    w.StartObject();
    StringMember(w, "url", e.url);
    StringMember(w, "consistency", e.consistency);
    w.EndObject();
  }
  w.EndArray();
  StringMember(w, "token", r.token);
  StringMember(w, "expiresAt", r.expires_at);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<MetadataResponse> ParseMetadataResponse(std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(json, "The metadata exchange response", &d));
  if (!d.IsObject() || !d.HasMember("version") || !d["version"].IsInt()) {
    return InvalidArgument(
        "The metadata exchange response has no integer 'version' member at the top level.");
  }
  const int version = d["version"].GetInt();
  if (version < 1 || version > 3) {
    return InvalidArgument("The metadata exchange response names unsupported protocol version " +
                           std::to_string(version) + ".");
  }
  const std::string schema_name =
      "metadata-exchange-response-v" + std::to_string(version) + ".schema.json";
  const auto* schema = CompiledSchema(schema_name);
  if (!schema) return Internal("metadata response schema " + schema_name + " is missing");
  KVC_RETURN_IF_ERROR(ValidateJson(*schema, d, "The metadata exchange response"));
  MetadataResponse r;
  r.version = version;
  r.database_id = d["databaseId"].GetString();
  for (const auto& e : d["endpoints"].GetArray()) {
    r.endpoints.push_back(Endpoint{e["url"].GetString(), e["consistency"].GetString()});
  }
  r.token = d["token"].GetString();
  r.expires_at = d["expiresAt"].GetString();
  return r;
}

Status ValidateJsonAgainstSchema(std::string_view schema_name, std::string_view json) {
  const auto* schema = CompiledSchema(schema_name);
  if (!schema) return NotFound("unknown schema " + std::string(schema_name));
  rapidjson::Document d;
  JsonParseFailure failure;
  if (!ParseJsonDocument(json, MaxJsonDepth(), &d, &failure)) {
    if (failure.too_deep) return InvalidArgument(JsonTooDeepText("The document", MaxJsonDepth()));
    return InvalidArgument("not valid JSON: " + failure.reason);
  }
  return ValidateJson(*schema, d, "The document");
}

}  // namespace kvc::codec
