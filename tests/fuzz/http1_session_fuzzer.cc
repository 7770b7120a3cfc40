// Untrusted bytes into a real HTTP/1.1 server session (Beast parser, keep-alive, chunked
// streaming, limits); see session_fuzz_common.h.
#include "session_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::RunSession(data, size, [](kvc::net::ServerContext* ctx, kvc::net::tcp::socket s) {
    kvc::net::StartHttp1Session(ctx, std::move(s), std::string());
  });
  return 0;
}
