// PortableValues: codec::PortableV8 on the KV Connect data path (`--portable-v8-values`, on by
// default), so Deno and Node (@deno/kv) clients of one database read each other's values
// (README "Values across runtimes"):
//   * write time: the V8 values of set mutations and the payloads of enqueues in an atomic write
//     (queue messages are V8 values too) are stored in the portable form, so reads cost
//     nothing. Sum operands and bounds stay as sent: sums store results the engine encodes
//     itself (format 15).
//   * read time: V8 values still stored in format 16 (a SQLite file Deno wrote locally and
//     served with --sqlite-path, or values written with the switch off) leave in format 15, in
//     snapshot_read answers and watch frames. Only values whose header is FF 10 are decoded.
// Everything not provably exact is left as the client sent it.
//
// Ownership: does not own the observer (it must outlive this object and its encoders).
// Thread-safety: the const methods keep no state but the observer pointer and may be called from
// any thread concurrently (the observer must be thread-safe); SetObserver before them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codec/v8/v8_portable.h"
#include "engine/limits.h"
#include "service/kvconnect/watch_stream.h"
#include "storage/kv_types.h"

namespace kvc::service {

// Told what PortableValues did with each value it converted or had to keep (metrics).
class PortableValueObserver {
 public:
  virtual ~PortableValueObserver() = default;
  // `on_write`: the value came with an atomic write; else it was on its way to a reader.
  // Values with nothing to convert (kUnchanged) are not reported.
  virtual void CountPortableV8(bool on_write, codec::V8PortableOutcome outcome) = 0;
};

class PortableValues {
 public:
  explicit PortableValues(PortableValueObserver* observer = nullptr) : observer_(observer) {}
  // REQUIRES: before the first conversion.
  void SetObserver(PortableValueObserver* observer) { observer_ = observer; }

  // Converts the V8 set values and the enqueue payloads of `write` in place. A value that grows
  // (a rewritten view takes a few bytes more) is put back as sent if the converted write would
  // break one of `limits` that the write as sent keeps, so no valid write becomes invalid.
  void OnWrite(AtomicWrite* write, const engine::Limits& limits, int64_t now_ms) const;
  // Converts the format-16 V8 values among `ranges` in place.
  void OnRead(std::vector<std::vector<Entry>>* ranges) const;
  // An encoder of KV Connect watch frames (codec::EncodeWatchFrame) that converts format-16 V8
  // values first. It holds a copy of this object (the observer must outlive the streams).
  WatchStream::FrameEncoder WatchFrameEncoder() const;

 private:
  // Converts `value` in place if it is headed FF 10 (read time).
  void ConvertFormat16(std::string* value) const;

  PortableValueObserver* observer_;
};

}  // namespace kvc::service
