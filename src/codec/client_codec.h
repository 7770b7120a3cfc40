// The client side of the KV Connect data path (reference §2): request encoders and response
// decoders for snapshot_read, atomic_write and watch (with the watch body's frame splitter),
// plus V8 string values (reference §5) for
// the values a load generator writes and reads back. The server side lives in datapath_codec.h;
// the two are tested against each other.
//
// Thread-safety: pure functions over value types; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/kv_types.h"

namespace kvc::codec {

// Wire `SnapshotReadStatus` numbers. Do not renumber.
enum class ReadStatus : int32_t { kUnspecified = 0, kSuccess = 1, kReadDisabled = 2 };

// Wire `AtomicWriteStatus` numbers. Do not renumber.
enum class WriteStatus : int32_t {
  kUnspecified = 0,
  kSuccess = 1,
  kCheckFailure = 2,
  kWriteDisabled = 5,
};

// A decoded SnapshotReadOutput. Unknown status numbers are kept as they came.
struct SnapshotReadResult {
  std::vector<std::vector<Entry>> ranges;  // one per requested range, in request order
  ReadStatus status = ReadStatus::kUnspecified;
  bool read_disabled = false;
  bool read_is_strongly_consistent = false;
};

// A decoded AtomicWriteOutput. `version` is the commit version of the versionstamp (0 unless
// status is kSuccess).
struct AtomicWriteResult {
  WriteStatus status = WriteStatus::kUnspecified;
  int64_t version = 0;
  std::vector<uint32_t> failed_checks;
};

// One key of a watch frame: `entry` is empty when the key does not exist (or is unchanged).
struct WatchKeyResult {
  bool changed = false;
  std::optional<Entry> entry;
};

struct WatchResult {
  ReadStatus status = ReadStatus::kUnspecified;
  std::vector<WatchKeyResult> keys;  // one per watched key, in request order
};

// Request encoders: protobuf bytes of SnapshotRead, AtomicWrite and Watch.
std::string EncodeSnapshotReadRequest(const std::vector<ReadRange>& ranges);
std::string EncodeAtomicWriteRequest(const AtomicWrite& write);
std::string EncodeWatchRequest(const std::vector<std::string>& keys);

// Response decoders. Errors: InvalidArgument when the bytes are not the message, when an entry's
// versionstamp is not 10 bytes, its value encoding is unknown, or a KvU64 value is not 8 bytes.
// Statuses are returned, not judged: the caller decides what a non-success status means.
Result<SnapshotReadResult> DecodeSnapshotReadOutput(std::string_view body);
Result<AtomicWriteResult> DecodeAtomicWriteOutput(std::string_view body);
// `payload` is one non-empty watch frame without its 4-byte length prefix.
Result<WatchResult> DecodeWatchOutput(std::string_view payload);

// Splits a watch response body into frames as its bytes arrive. A frame is a u32 little-endian
// length, then that many bytes: one WatchOutput for DecodeWatchOutput; length 0 is a
// keep-alive. The one client-side frame splitter (the load generator and the test client use
// it); the server writes frames with datapath_codec.h.
//
// Thread-safety: none; one owner.
class WatchFrameSplitter {
 public:
  // Frames declaring more than `max_frame_bytes` are an error.
  explicit WatchFrameSplitter(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  // Adds received body bytes. Invalidates the views Next() returned.
  void Append(std::string_view bytes);

  // Returns the next complete frame's payload (empty for a keep-alive), std::nullopt if no
  // complete frame is buffered, or InvalidArgument if the next frame declares more than
  // max_frame_bytes (every later call then fails the same way). The view stays valid until the
  // next Append().
  Result<std::optional<std::string_view>> Next();

  // True if bytes of an incomplete frame are buffered: a body ending now ends inside a frame.
  bool partial() const { return pos_ < buffer_.size(); }

 private:
  size_t max_frame_bytes_;
  std::string buffer_;  // received bytes; buffer_[pos_..] not yet returned as frames
  size_t pos_ = 0;
};

// Returns the V8 serialization of the JS string whose UTF-8 text is `utf8`, as Deno writes it:
// header FF 0F, then a one-byte string (`"`, Latin-1) if every code point is <= U+00FF, else a
// two-byte string (`c`, UTF-16LE) with V8's alignment padding. Invalid UTF-8 sequences become
// U+FFFD.
std::string EncodeV8String(std::string_view utf8);

// Parses a whole serialized V8 value that must be a string (one-byte `"`, two-byte `c`, or UTF-8
// `S`); returns its text as UTF-8 (lone surrogates and malformed UTF-8 become U+FFFD). Accepts
// header versions 13..16 and padding bytes before the tag. Errors: InvalidArgument "unsupported
// value type" for other values, "invalid v8 value" for malformed or truncated input or trailing
// bytes.
Result<std::string> ParseV8String(std::string_view data);

}  // namespace kvc::codec
