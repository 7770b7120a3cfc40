// An export as a streaming HTTP response: the dump lines (dump.h) of one range of a database,
// all from one snapshot (Engine::SnapshotScan), sent as fast as the client takes them.
//
// Pacing: a page is rendered only when less than `window_bytes` of the dump is still waiting in
// the session (StreamSink::SendThen reports what left it), so memory stays bounded whatever
// the client's speed; the scan waits on its reader thread meanwhile. A client that takes
// nothing for `stall_timeout_ms` gets its export aborted, as does one whose scan fails after
// the answer began: the body then ends broken (HTTP/1.1 without the final chunk, HTTP/2 with
// RST_STREAM), never as a clean but short dump.
//
// Thread-safety: StartExport may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/engine.h"
#include "service/http_types.h"

namespace kvc::service {

struct ExportOptions {
  size_t page_entries = 256;              // entries read and rendered at a time
  size_t window_bytes = size_t{1} << 20;  // dump bytes in the session before the scan waits
  int64_t stall_timeout_ms = 60000;       // a client taking nothing this long ends the export
};

// Starts exporting [start, end) of `engine`. `respond` is called once: with the error if the
// scan could not begin (Unavailable when another export of the database runs, or the engine is
// busy or closing; storage errors), else with a 200 `application/x-ndjson` streaming response
// whose `x-kvc-versionstamp` header is the versionstamp of the snapshot. It runs on a reader
// thread, or inline on a refusal.
void StartExport(const std::shared_ptr<engine::Engine>& engine, std::string start, std::string end,
                 const ExportOptions& options, std::function<void(Result<HttpResponse>)> respond);

}  // namespace kvc::service
