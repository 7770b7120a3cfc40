// Untrusted bytes into a real HTTP/2 server session (nghttp2 framing, HPACK, flow control, our
// stream bookkeeping, body budgets, streaming responses); see session_fuzz_common.h. The input
// follows the connection preface, as on a socket the listener has already sniffed.
#include "session_fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::RunSession(data, size, [](kvc::net::ServerContext* ctx, kvc::net::tcp::socket s) {
    kvc::net::StartHttp2Session(ctx, std::move(s), std::string(kvc::net::kHttp2Preface));
  });
  return 0;
}
