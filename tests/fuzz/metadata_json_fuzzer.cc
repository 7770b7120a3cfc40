// The metadata-exchange request parser (JSON + schema validation), bearer headers and data-path
// tokens on untrusted bytes. The packed claims of a format-3 token sit behind its MAC, so they are
// fed in directly too: a bug there must not wait for a forged MAC to be found.
#include <string_view>

#include "auth/tokens.h"
#include "codec/metadata_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::ParseMetadataRequest(in);
  (void)kvc::auth::ParseBearer(in);
  static const kvc::auth::TokenSigner signer(std::string(32, 'f'));
  (void)signer.Verify(in, 0);
  (void)kvc::auth::ParsePackedClaims(in);
  return 0;
}
