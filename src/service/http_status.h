// The one table that maps protocol-neutral Status codes to HTTP responses.
#pragma once

#include "common/status.h"
#include "service/http_types.h"

namespace kvc::service {

int HttpStatusFor(StatusCode code);
// A plain-text error response whose body is the status message (Deno shows it to the user),
// with a Retry-After header (whole seconds, rounded up) when the status carries a hint.
HttpResponse ErrorResponse(const Status& status);

}  // namespace kvc::service
