// DecodeKey on untrusted bytes; a decoded key must re-encode and decode to the same parts. Any
// bytes (a client may store any as a key) get a KvKeyJSON view that names exactly them again.
#include <cstdlib>
#include <string_view>

#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::KeyToString(in);
  size_t consumed = 0;
  auto prefix = kvc::codec::DecodeCanonicalKeyPrefix(in, &consumed);
  if (consumed > in.size() || kvc::codec::EncodeKey(prefix) != in.substr(0, consumed)) {
    std::abort();
  }
  auto named = kvc::codec::KeyBytesFromJson(kvc::codec::KeyToJson(in));
  if (!named.ok() || *named != in) std::abort();
  auto parts = kvc::codec::DecodeKey(in);
  if (!parts.ok()) return 0;
  auto again = kvc::codec::DecodeKey(kvc::codec::EncodeKey(*parts));
  if (!again.ok() || !(*again == *parts)) std::abort();
  return 0;
}
