// JSON text written by hand: the one string escaper for output we build ourselves (the admin
// CLI's JSON listings, the `kvconnect bench --json` report, the display form of keys). Documents
// written with RapidJSON (metadata_json.h) do not use it.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kvc::codec {

// Appends `s` as a JSON string literal: in double quotes, with `"` and `\` backslash-escaped,
// LF, CR and TAB as \n, \r and \t, the other control characters (U+0000..U+001F) and DEL
// (U+007F) as \u00xx (lowercase hex). Well-formed UTF-8 is copied as is. `s` is meant to be
// UTF-8, but need not be: every byte that does not begin a well-formed sequence (see utf8.h)
// becomes \ufffd, so the result is always valid JSON in valid UTF-8.
void AppendJsonQuoted(std::string_view s, std::string* out);

// Returns `s` as a JSON string literal (see AppendJsonQuoted).
std::string JsonQuote(std::string_view s);

// Appends a JSON array of `items`: `append_item(item, out)` writes each one's JSON.
template <typename Items, typename AppendItem>
void AppendJsonArray(const Items& items, AppendItem&& append_item, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (const auto& item : items) {
    if (!first) out->push_back(',');
    first = false;
    append_item(item, out);
  }
  out->push_back(']');
}

}  // namespace kvc::codec
