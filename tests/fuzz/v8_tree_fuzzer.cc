// DecodeV8Value, PortableV8 and the JSON views on untrusted bytes. Inputs starting with FF are
// V8 bytes, others JSON text (a KvValueJSON, or a KvKeyJSON). Whatever is accepted must be
// stable: bytes decode -> encode -> decode -> encode to the same bytes, and the JSON view of a
// value reaches a fixed point after one trip through V8 bytes. PortableV8 never crashes, and
// bytes it returns are format 15, decode to an equal value, and need no further conversion.
#include <cstdlib>
#include <string>
#include <string_view>

#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "codec/v8/v8_portable.h"
#include "codec/v8/v8_tree.h"
#include "codec/v8/v8_wire.h"

namespace {

using kvc::codec::V8JsonOptions;
using kvc::codec::V8Value;

void Check(bool ok) {
  if (!ok) std::abort();
}

// JSON -> bytes -> JSON, twice; the second trip must change nothing.
void JsonFixedPoint(std::string_view json) {
  const V8JsonOptions refs{.expand_shared = false};
  auto first = kvc::codec::V8ValueFromJson(json, refs);
  if (!first.ok()) return;
  auto bytes = kvc::codec::EncodeV8Value(*first);
  if (!bytes.ok()) return;  // e.g. a ref to an object V8 cannot refer to yet
  auto decoded = kvc::codec::DecodeV8Value(*bytes);
  Check(decoded.ok());  // what the encoder writes, the decoder reads
  auto again = kvc::codec::EncodeV8Value(*decoded);
  Check(again.ok() && *again == *bytes);
  auto json2 = kvc::codec::V8ValueToJson(*decoded, refs);
  Check(json2.ok());
  auto tree2 = kvc::codec::V8ValueFromJson(*json2, refs);
  Check(tree2.ok());
  auto bytes2 = kvc::codec::EncodeV8Value(*tree2);
  Check(bytes2.ok());
  auto json3 = kvc::codec::V8ValueToJson(*kvc::codec::DecodeV8Value(*bytes2), refs);
  Check(json3.ok() && *json3 == *json2);
}

// PortableV8's promise: converted bytes mean what the input meant, and are portable already.
void PortableIsExact(std::string_view input) {
  kvc::codec::V8PortableOutcome outcome;
  auto portable = kvc::codec::PortableV8(input, &outcome);
  if (!portable) return;
  Check(portable->size() >= 2 && static_cast<uint8_t>((*portable)[1]) == 15);
  auto before = kvc::codec::DecodeV8Value(input);
  auto after = kvc::codec::DecodeV8Value(*portable);
  Check(before.ok() && after.ok());
  if (outcome == kvc::codec::V8PortableOutcome::kReheaded) {
    Check(kvc::codec::V8ValueEquals(*before, *after, /*compare_wire_forms=*/true));
  } else {
    Check(outcome == kvc::codec::V8PortableOutcome::kRewritten);
    Check(kvc::codec::V8ValueEqualsRenumbered(*before, *after));
  }
  kvc::codec::V8PortableOutcome again;
  Check(!kvc::codec::PortableV8(*portable, &again) &&
        again == kvc::codec::V8PortableOutcome::kUnchanged);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && static_cast<uint8_t>(input[0]) == 0xFF) {
    PortableIsExact(input);
    auto value = kvc::codec::DecodeV8Value(input);
    if (!value.ok()) return 0;
    uint32_t version = 0;
    kvc::codec::V8Reader(input).ReadHeader(&version);
    // Everything decoded can be written in its own format version (format 16 can hold lengths
    // of 4 GiB and more that format 15 cannot).
    auto bytes = kvc::codec::EncodeV8Value(*value, version);
    if (!bytes.ok() && version == 13) {
      // Version-13 data read with view flags (the second try) needs a version that has them.
      version = 14;
      bytes = kvc::codec::EncodeV8Value(*value, version);
    }
    Check(bytes.ok());
    auto decoded = kvc::codec::DecodeV8Value(*bytes);
    Check(decoded.ok());
    auto again = kvc::codec::EncodeV8Value(*decoded, version);
    Check(again.ok() && *again == *bytes);
    // Both JSON views of it work (or hit the size limit) and settle after one trip.
    auto expanded = kvc::codec::V8ValueToJson(*value);
    Check(expanded.ok() || expanded.status().message() == "JSON view too large");
    // (Holes count: a sparse array with a high index can be too large even without expansion.)
    auto refs = kvc::codec::V8ValueToJson(*value, V8JsonOptions{.expand_shared = false});
    Check(refs.ok() || refs.status().message() == "JSON view too large");
    if (refs.ok()) JsonFixedPoint(*refs);
    return 0;
  }
  JsonFixedPoint(input);
  auto key = kvc::codec::KeyFromJson(input);
  if (key.ok()) {
    auto back = kvc::codec::KeyFromJson(kvc::codec::KeyToJson(kvc::codec::EncodeKey(*key)));
    Check(back.ok() && *back == *key);
  }
  // Raw parts included: the view of the bytes a KvKeyJSON names names them again.
  auto bytes = kvc::codec::KeyBytesFromJson(input);
  if (bytes.ok()) {
    auto again = kvc::codec::KeyBytesFromJson(kvc::codec::KeyToJson(*bytes));
    Check(again.ok() && *again == *bytes);
  }
  return 0;
}
