// JavaScript Date times <-> ISO 8601 text: milliseconds since the epoch as
// Date.prototype.toISOString writes them, and the date-time strings Date.parse reads exactly
// (the ECMAScript date-time string format). Used by the JSON views' Date values and entries'
// "expires_at" (v8_json.h).
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::codec {

// Date's range: a time value is at most this many ms from the epoch either way (the year 275760).
inline constexpr double kMaxDateMs = 8.64e15;

// TimeClip: NaN outside +-kMaxDateMs (or not finite), else truncated toward zero (and -0
// becomes +0).
double TimeClip(double ms);

// "2026-11-27T10:00:00.000Z"; a year outside 0..9999 as +YYYYYY or -YYYYYY.
// REQUIRES: ms is a finite whole number within +-kMaxDateMs (TimeClip's result when not NaN).
std::string FormatIsoDate(double ms);

// Parses YYYY[-MM[-DD]] or +-YYYYYY..., optionally THH:mm[:ss[.fraction]] and then Z or +-HH:mm
// (required with a time: without one, JS reads local time); a date alone is UTC midnight.
// Returns ms since the epoch (the fraction truncated to whole ms). Errors (InvalidArgument):
// "bad date string", "date out of range" (beyond +-kMaxDateMs).
Result<double> ParseIsoDate(std::string_view s);

}  // namespace kvc::codec
