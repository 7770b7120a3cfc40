// The PostgreSQL row of the storage kind table (storage/storage_spec.h): what `postgres:CONNINFO`
// must be before anything connects to it.
//
// Thread-safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace kvc::storage {

// Checks that libpq can parse `conninfo` (keyword=value pairs or a postgresql:// URI) without
// connecting. `what` names it in the error ("the PostgreSQL conninfo"). Errors:
// InvalidArgument with libpq's reason, in which any quoted text that is not a keyword of
// `conninfo` is replaced by "...", so a mistyped password never reaches a terminal or a log.
Status CheckConninfo(const std::string& conninfo, std::string_view what);

}  // namespace kvc::storage
