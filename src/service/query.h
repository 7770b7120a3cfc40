// The query string of a request URL (HttpRequest::query): "a=1&b=%7B%7D" as name/value pairs,
// decoded as HTML forms encode them ('+' is a space, %XX a byte).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kvc::service {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// Splits and decodes `query` (without the '?'). A parameter without '=' has an empty value;
// empty pieces ("a=1&&b=2") are skipped. Errors: InvalidArgument for a '%' not followed by two
// hex digits.
Result<QueryParams> ParseQuery(std::string_view query);

// The value of the first parameter called `name`, or nullptr.
const std::string* FindParam(const QueryParams& params, std::string_view name);

// Percent-encodes `text` for a query value (everything but unreserved characters).
std::string EncodeQueryValue(std::string_view text);

}  // namespace kvc::service
