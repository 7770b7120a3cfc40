// Deno's text forms of a queue message's lists, as its local backend stores them (and as the
// PostgreSQL backend stores them too, so rows move between backends unchanged): a backoff
// schedule is a JSON array of numbers (`null` for one never given), keys_if_undelivered a JSON
// array of keys, each an array of its byte values.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvc::storage {

std::string BackoffScheduleJson(const std::vector<uint32_t>& schedule);
std::string KeysJson(const std::vector<std::string>& keys);
// Errors: Corruption for anything but the forms above.
Result<std::vector<uint32_t>> ParseBackoffSchedule(std::string_view text);
Result<std::vector<std::string>> ParseKeys(std::string_view text);

}  // namespace kvc::storage
