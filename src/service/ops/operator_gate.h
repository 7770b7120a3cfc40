// OperatorGate: who may read what the server tells its operator, i.e. /metrics and the detailed
// readiness (/readyz?verbose=1): database names, sizes, auth-failure counts, backup errors.
// A caller is admitted with the server-wide admin token (the bootstrap token), sent as
// `Authorization: Bearer`, or by anyone when the listener was opened for a trusted network
// (--metrics-public). A catalog admin token is refused, even one for all databases: the
// metrics name every database on the server and count what its other tokens do.
//
// Ownership: does not own the authenticator; it must outlive the gate.
// Thread-safety: immutable after construction; Check() from any thread.
#pragma once

#include <functional>

#include "service/authenticator.h"
#include "service/http_types.h"

namespace kvc::service {

class OperatorGate {
 public:
  // `open`: admit every caller without a token. `auth` may be null only when `open`.
  OperatorGate(Authenticator* auth, bool open) : auth_(auth), open_(open) {}

  bool open() const { return open_; }
  // Calls `done` (inline or on the directory thread) with Ok when `request` may read operator
  // details, else Unauthenticated (no or an invalid token) or PermissionDenied (a token that
  // is not a server-wide admin token); the texts say how to get in.
  void Check(const HttpRequest& request, std::function<void(Status)> done) const;

 private:
  Authenticator* const auth_;
  const bool open_;
};

}  // namespace kvc::service
