#include "codec/metadata_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "codec/json_schema.h"

namespace kvc::codec {

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
  d.Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  if (d.HasParseError()) {
    return InvalidArgument(std::string("The metadata exchange request body is not valid JSON: ") +
                           rapidjson::GetParseError_En(d.GetParseError()) + " (at byte " +
                           std::to_string(d.GetErrorOffset()) + ").");
  }
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
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("version");
  w.Int(r.version);
  w.Key("databaseId");
  w.String(r.database_id.c_str(), static_cast<rapidjson::SizeType>(r.database_id.size()));
  w.Key("endpoints");
  w.StartArray();
  for (const Endpoint& e : r.endpoints) {
    w.StartObject();
    w.Key("url");
    w.String(e.url.c_str(), static_cast<rapidjson::SizeType>(e.url.size()));
    w.Key("consistency");
    w.String(e.consistency.c_str(), static_cast<rapidjson::SizeType>(e.consistency.size()));
    w.EndObject();
  }
  w.EndArray();
  w.Key("token");
  w.String(r.token.c_str(), static_cast<rapidjson::SizeType>(r.token.size()));
  w.Key("expiresAt");
  w.String(r.expires_at.c_str(), static_cast<rapidjson::SizeType>(r.expires_at.size()));
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<MetadataResponse> ParseMetadataResponse(std::string_view json) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
  if (d.HasParseError()) {
    return InvalidArgument(std::string("The metadata exchange response is not valid JSON: ") +
                           rapidjson::GetParseError_En(d.GetParseError()) + " (at byte " +
                           std::to_string(d.GetErrorOffset()) + ").");
  }
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
  d.Parse<rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
  if (d.HasParseError()) {
    return InvalidArgument(std::string("not valid JSON: ") +
                           rapidjson::GetParseError_En(d.GetParseError()));
  }
  return ValidateJson(*schema, d, "The document");
}

}  // namespace kvc::codec
