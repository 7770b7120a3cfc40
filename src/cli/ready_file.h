// The ready report of `kvconnect serve`: once every listener is bound, the server tells whoever
// started it where it listens, both as one JSON object in the --ready-file (written atomically)
// and as one "ready {...}" log line. With port 0 in --addr, --tls-addr or --metrics-addr this
// is how a test (or a supervisor) learns the ports the kernel picked, instead of choosing a
// "free" port itself and racing every other process for it.
//
// The object, keys in this order (tls_* only with --tls-addr, metrics_* only with
// --metrics-addr):
//   {"pid":1234,"addr":"127.0.0.1:41234","port":41234,"url":"http://127.0.0.1:41234",
//    "tls_addr":"127.0.0.1:41235","tls_port":41235,"tls_url":"https://127.0.0.1:41235",
//    "metrics_addr":"127.0.0.1:41236","metrics_port":41236,
//    "metrics_url":"http://127.0.0.1:41236"}
//
// Thread-safety: free functions without shared state; thread-safe.
#pragma once

#include <string>

#include "cli/application.h"
#include "common/status.h"

namespace kvc::cli {

// Returns the ready object above for `listeners` and process id `pid`, on one line.
std::string ReadyJson(const BoundListeners& listeners, long pid);

// Writes `contents` to `path` so that a reader sees either no file (or the previous one) or
// all of it: a temporary file in the same directory, mode 0600, renamed over `path`.
// Errors: IoError naming the path.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace kvc::cli
