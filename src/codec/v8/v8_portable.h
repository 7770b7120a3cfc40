// V8 values that every runtime reads (README "Values across runtimes"). Clients of one database
// write V8 bytes the other runtime cannot read:
//   * Deno >= 2.8 writes format 16 (FF 10); Node 20's V8 (and so @deno/kv under Node) reads at
//     most 15 and refuses the whole value.
//   * Node's v8.serialize writes typed arrays and DataViews as Node host objects (`\`, a type
//     index, a byte length, the bytes); Deno has no such host object and refuses the value.
//   * Node 20's V8 writes an error's cause before its stack; current V8 (Deno 2.9) reads an
//     error's fields only in the order prototype, message, stack, cause and refuses the value.
// PortableV8 rewrites such a value into the form both read, and only when it can prove the
// result means the same (otherwise the bytes stay as the client sent them):
//   * format 16 -> 15 by replacing the version varint alone: the formats differ only in writing
//     buffer and view lengths, offsets and maximum lengths as 64-bit instead of 32-bit varints,
//     identical bytes below 2^32. Proof: the value decodes, and every such length it holds
//     is below 2^32 in at most 5 bytes (V8DecodeInfo::wide_lengths), so the re-headed bytes
//     read as format 15 give exactly the same tree (the fuzzer decodes both to check).
//   * Node host-object views -> V8's own ArrayBufferViews (a buffer holding the view's bytes
//     and a view over all of it), and error fields in the order above, by re-encoding the
//     decoded tree as format 15. Proof: the new bytes decode to a tree equal to the original's
//     (V8ValueEqualsRenumbered: semantic, objects matched by position, since a view now takes
//     two ids, its buffer and itself, where the host object took one). A Node Buffer (type index
//     10) is refused: it would come back to Node as a plain Uint8Array, losing Buffer's methods.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvc::codec {

// What PortableV8 did with a value.
enum class V8PortableOutcome : uint8_t {
  kUnchanged,  // nothing to convert (or not V8 bytes it understands without a conversion)
  kReheaded,   // format 16 re-headed as 15, the rest of the bytes unchanged
  kRewritten,  // re-encoded as format 15: V8 views for Node's, error fields reordered
  kKept,       // a conversion applies but was not provably exact: the bytes stay as they are
};

// The short word metrics use for an outcome: "unchanged", "format_16_to_15", "rewritten",
// "kept".
const char* V8PortableOutcomeName(V8PortableOutcome outcome);

// True if `bytes` start with the header of format 16 (FF 10): the cheap test before a read-path
// conversion.
bool IsV8Format16(std::string_view bytes);

// Returns `bytes` (a serialized V8 value) in the portable form described above, or nullopt when
// they stay as they are (nothing to convert, not decodable, or not provably exact; *outcome
// says which). Never reads outside `bytes`; time and memory are linear in their size. Values
// without the format-16 header and without any `\` or `r` byte are answered without decoding,
// and so are format-16 values that are one string, undefined, null, true or false.
std::optional<std::string> PortableV8(std::string_view bytes, V8PortableOutcome* outcome = nullptr);

}  // namespace kvc::codec
