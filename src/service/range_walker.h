// RangeWalker: visits every entry of a range through an engine, one page (one snapshot) at a
// time, waiting for the consumer before reading the next page. The walk as a whole is not one
// snapshot: writes between pages may be seen or not. Behind the admin API's count and
// delete-range and the import's replace (dump.h).
//
// Ownership: held by shared_ptr (make_shared, then Run); each pending read or continuation
// keeps it alive.
// Thread-safety: one page at a time; callbacks run on engine threads (or wherever `next` is
// called).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "storage/kv_types.h"

namespace kvc::service {

// Walks [start, end) in pages of `page` entries (each page one snapshot). `on_page` gets each
// non-empty page and a continuation to call (any thread) when it is done with it; `done` gets
// the first error, or Ok after the last page.
struct RangeWalker : std::enable_shared_from_this<RangeWalker> {
  using Next = std::function<void(Status)>;
  std::shared_ptr<engine::Engine> engine;
  std::string start;
  std::string end;
  int32_t page = 100;
  std::function<void(std::vector<Entry>, Next)> on_page;
  std::function<void(Status)> done;

  void Run() {
    if (start >= end) return done(Status::Ok());
    auto self = shared_from_this();
    engine->SnapshotRead({ReadRange{start, end, page, false}},
                         [self](Result<engine::ReadResult> r) { self->OnRead(std::move(r)); });
  }
  void OnRead(Result<engine::ReadResult> r) {
    if (!r.ok()) return done(r.status());
    std::vector<Entry>& entries = r->ranges[0];
    if (entries.empty()) return done(Status::Ok());
    const bool last = entries.size() < static_cast<size_t>(page);
    start = entries.back().key;
    start.push_back('\0');
    auto self = shared_from_this();
    on_page(std::move(entries), [self, last](const Status& s) {
      if (!s.ok()) return self->done(s);
      if (last) return self->done(Status::Ok());
      self->Run();
    });
  }
};

}  // namespace kvc::service
