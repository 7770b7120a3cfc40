// The client side of the KV Connect metadata exchange (reference §1): the request a client
// POSTs to the URL given to Deno.openKv, and the answer turned into what data-path calls need
// (the strong endpoint resolved against that URL, the headers of the negotiated version, the
// call paths). Shared by `kvconnect bench` (loadgen/bench.cc) and `kvconnect migrate --from
// URL` (cli/kv_source.h), which each send it over their own connections.
//
// Thread-safety: pure functions over value types; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "client/connection.h"
#include "client/url.h"
#include "common/status.h"

namespace kvc::loadgen {

// The body Deno >= 1.38.5 sends (reference §1.1).
inline constexpr char kMetadataBody[] = R"({"supportedVersions":[1,2,3]})";

// The metadata POST to `url` with `token` (DENO_KV_ACCESS_TOKEN).
client::Request MetadataRequest(const client::Url& url, const std::string& token,
                                const std::string& user_agent);

// What data-path calls need, from one metadata answer.
struct DataPath {
  client::Url endpoint;  // the first strong endpoint, resolved against the metadata URL
  int version = 0;       // the protocol version the server chose
  std::string database_id;
  std::string token;       // the data-path token
  std::string expires_at;  // RFC 3339, as the server sent it
  // authorization, the version's database and version headers, content-type, user-agent.
  std::shared_ptr<const client::Headers> headers;
  std::string read_path;  // endpoint path + "/snapshot_read" (reference §1.5)
  std::string write_path;
  std::string watch_path;
};

// Parses the body of a 200 answer to a metadata POST sent to `metadata_url`. Errors:
// InvalidArgument when the body is not metadata (not JSON, a schema violation, an unsupported
// version, no strong endpoint, an endpoint URL that does not resolve).
Result<DataPath> DataPathFromMetadata(const client::Url& metadata_url, std::string_view body,
                                      const std::string& user_agent);

}  // namespace kvc::loadgen
