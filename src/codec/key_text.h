// The key syntax people type, as the console reads it (src/console/kv.js) and every CLI flag
// that asks for a key or a prefix: Deno's own literal form,
//   ["users", 42, 7n, true, -Infinity, Uint8Array([1, 2]), raw:AAEC]
// strings in double quotes with JSON escapes; numbers, also NaN, Infinity and -Infinity;
// bigints with a trailing n; booleans; Uint8Array([...]) (or new Uint8Array([...])) of bytes
// 0..255; raw:BASE64 for a raw part (URL-safe base64, v8_json.h); a trailing comma is allowed.
// A KvKeyJSON array ([{"type": "string", "value": "users"}]) is accepted as it is.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::codec {

// Returns the KvKeyJSON of `text` (key syntax or KvKeyJSON), checked as KeyBytesFromJson checks
// it, so the answer always names key bytes. Errors: InvalidArgument naming what is wrong and
// where ("expected \",\" or \"]\" at position 9 of the key ..."), or KeyBytesFromJson's error.
Result<std::string> KeyTextToJson(std::string_view text);

}  // namespace kvc::codec
