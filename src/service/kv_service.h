// KvService: the KV Connect endpoints. POST / is the metadata exchange; POST
// /v2/{snapshot_read,atomic_write,watch} is the data path (for protocol versions 1, 2 and 3).
// It authenticates, decodes (codec/), runs the engine and encodes the answer; every error is
// a Status mapped to HTTP by service/http_status.cc.
//
// Ownership: does not own the engines (the composition root does); they must outlive it.
// Thread-safety: Handle() may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "auth/tokens.h"
#include "engine/engine.h"
#include "service/http_types.h"

namespace kvc::service {

struct ServiceOptions {
  std::string access_token;  // the bootstrap access token (>= 12 characters)
  // expiresAt in the metadata answer = now + this. Deno refreshes every 60 s regardless.
  int64_t metadata_ttl_ms = 60LL * 60 * 1000;
  // A data-path token stays valid this long past expiresAt: Deno <= 2.9 stops refreshing after
  // a watch is dropped and keeps using its last token.
  int64_t token_grace_ms = 7LL * 24 * 60 * 60 * 1000;
  std::chrono::milliseconds watch_keepalive{5000};
  std::string endpoint_path = "/v2";  // no trailing slash
};

class KvService : public Handler {
 public:
  // REQUIRES: server_secret.size() >= 32; default_db outlives the service.
  KvService(ServiceOptions options, std::string server_secret, engine::Engine* default_db);

  void Handle(HttpRequest request, Responder respond) override;

 private:
  void HandleMetadata(const HttpRequest& req, Responder& respond);
  void HandleDataPath(const HttpRequest& req, const std::string& method, Responder& respond);
  // Authenticates a data-path request and returns the engine it addresses.
  Result<engine::Engine*> AuthorizeDataPath(const HttpRequest& req, bool write);

  const ServiceOptions options_;
  const auth::TokenSigner signer_;
  engine::Engine* const default_db_;
  std::unordered_map<std::string, engine::Engine*> by_id_;  // immutable after construction
};

}  // namespace kvc::service
