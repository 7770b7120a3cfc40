// The metadata-exchange request parser (JSON + schema validation) on untrusted bytes.
#include <string_view>

#include "auth/tokens.h"
#include "codec/metadata_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::ParseMetadataRequest(in);
  (void)kvc::auth::ParseBearer(in);
  static const kvc::auth::TokenSigner signer(std::string(32, 'f'));
  (void)signer.Verify(in, 0);
  return 0;
}
