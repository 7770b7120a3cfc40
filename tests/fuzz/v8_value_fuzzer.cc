// ParseV8Numeric on untrusted bytes; anything it accepts must re-encode and parse to the same
// value.
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "codec/v8/v8_value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto v = kvc::codec::ParseV8Numeric(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!v.ok()) return 0;
  auto again = kvc::codec::ParseV8Numeric(kvc::codec::EncodeV8Numeric(*v));
  if (!again.ok() || again->kind != v->kind) std::abort();
  if (v->kind == kvc::codec::V8Numeric::Kind::kBigInt && !(again->bigint == v->bigint))
    std::abort();
  if (v->kind == kvc::codec::V8Numeric::Kind::kNumber && !std::isnan(v->number) &&
      again->number != v->number) {
    std::abort();
  }
  return 0;
}
