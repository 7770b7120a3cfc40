#include "loadgen/metadata.h"

#include "codec/metadata_json.h"

namespace kvc::loadgen {

client::Request MetadataRequest(const client::Url& url, const std::string& token,
                                const std::string& user_agent) {
  return client::Request{.path = url.path,
                         .extra_headers = {{"authorization", "Bearer " + token},
                                           {"content-type", "application/json"},
                                           {"user-agent", user_agent}},
                         .body = kMetadataBody};
}

Result<DataPath> DataPathFromMetadata(const client::Url& metadata_url, std::string_view body,
                                      const std::string& user_agent) {
  KVC_ASSIGN_OR_RETURN(codec::MetadataResponse metadata, codec::ParseMetadataResponse(body));
  const codec::Endpoint* strong = nullptr;
  for (const codec::Endpoint& e : metadata.endpoints) {
    if (e.consistency == "strong") {
      strong = &e;
      break;
    }
  }
  if (strong == nullptr) return InvalidArgument("the answer names no strong endpoint");
  Result<client::Url> endpoint = client::ResolveUrl(metadata_url, strong->url);
  if (!endpoint.ok()) return InvalidArgument("endpoint URL: " + endpoint.status().message());
  DataPath d;
  d.endpoint = *endpoint;
  d.version = metadata.version;
  d.database_id = metadata.database_id;
  d.token = metadata.token;
  d.expires_at = metadata.expires_at;
  auto headers = std::make_shared<client::Headers>();
  headers->emplace_back("authorization", "Bearer " + metadata.token);
  if (metadata.version == 1) {
    headers->emplace_back("x-transaction-domain-id", metadata.database_id);
  } else {
    headers->emplace_back("x-denokv-database-id", metadata.database_id);
    headers->emplace_back("x-denokv-version", std::to_string(metadata.version));
  }
  headers->emplace_back("content-type", "application/x-protobuf");
  headers->emplace_back("user-agent", user_agent);
  d.headers = std::move(headers);
  // Data-call URL = endpoint URL + "/" + method (reference §1.5).
  d.read_path = d.endpoint.path + "/snapshot_read";
  d.write_path = d.endpoint.path + "/atomic_write";
  d.watch_path = d.endpoint.path + "/watch";
  return d;
}

}  // namespace kvc::loadgen
