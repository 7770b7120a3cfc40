// The nesting cap of JSON request bodies (json_parse.h parses with it), apart from json_parse.h so
// that layers above codec/ can name it without RapidJSON.
//
// Thread-safety: thread-safe. SetMaxJsonDepth is meant for start-up (before serving); later calls
// are safe but take effect parse by parse.
#pragma once

#include <cstddef>

namespace kvc::codec {

// The default cap: every schema of ours needs far fewer levels.
inline constexpr size_t kDefaultMaxJsonDepth = 64;
// The highest cap SetMaxJsonDepth accepts: the validator and writers that walk a parsed document
// recurse once per level, which stays far from any thread's stack at this depth.
inline constexpr size_t kMaxJsonDepthLimit = 1000;

// Sets the cap request bodies are parsed with (`serve --max-json-depth`). Values outside
// 1..kMaxJsonDepthLimit are clamped into it.
void SetMaxJsonDepth(size_t depth);
// The cap set by SetMaxJsonDepth; kDefaultMaxJsonDepth unless set.
size_t MaxJsonDepth();

}  // namespace kvc::codec
