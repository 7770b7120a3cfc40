// DecodeKey on untrusted bytes; a decoded key must re-encode and decode to the same parts.
#include <cstdlib>
#include <string_view>

#include "codec/key_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::KeyToString(in);
  auto parts = kvc::codec::DecodeKey(in);
  if (!parts.ok()) return 0;
  auto again = kvc::codec::DecodeKey(kvc::codec::EncodeKey(*parts));
  if (!again.ok() || !(*again == *parts)) std::abort();
  return 0;
}
