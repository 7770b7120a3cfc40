// JSON of the KV Connect metadata exchange: request parsing with schema validation (RapidJSON's
// validator against schemas/metadata-exchange-request.schema.json, embedded at build time) and
// response serialisation.
//
// Thread-safety: pure functions; schema documents are compiled once, thread-safely.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::codec {

struct MetadataRequest {
  // Empty body: the client speaks version 1 only.
  std::vector<int64_t> supported_versions;
};

// Errors: InvalidArgument with a readable text for invalid JSON or schema violations.
Result<MetadataRequest> ParseMetadataRequest(std::string_view body);

struct Endpoint {
  std::string url;
  std::string consistency;  // "strong" or "eventual"
};

struct MetadataResponse {
  int version = 3;
  std::string database_id;
  std::vector<Endpoint> endpoints;
  std::string token;
  std::string expires_at;  // RFC 3339 UTC ending in Z
};

std::string EncodeMetadataResponse(const MetadataResponse& r);

// The client side: parses a metadata-exchange response body and validates it against the
// embedded schema of the version it names (metadata-exchange-response-v<N>.schema.json).
// Errors: InvalidArgument with a readable text for invalid JSON, a missing or unsupported
// `version`, or a schema violation.
Result<MetadataResponse> ParseMetadataResponse(std::string_view json);

// Validates `json` against one of the embedded schemas by file name (e.g.
// "metadata-exchange-response-v3.schema.json"). Used by tests.
Status ValidateJsonAgainstSchema(std::string_view schema_name, std::string_view json);

}  // namespace kvc::codec
