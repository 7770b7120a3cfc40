// Conversion between KV Connect data-path protobuf bytes and the KV data model.
// With client_codec.cc, the only code that includes the generated protobuf.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "storage/kv_types.h"

namespace kvc::codec {

// Errors: InvalidArgument "Request protobuf is invalid: ..." for undecodable bytes;
// InvalidArgument for unknown mutation kinds or value encodings, and KvU64 values that are not
// 8 bytes.
Result<std::vector<ReadRange>> DecodeSnapshotRead(std::string_view body);
// The two ways DecodeSnapshotRead reads, for tests and the fuzz target. The fast one reads the
// shape clients send without the protobuf library's message objects and returns false on
// anything else; DecodeSnapshotRead then answers with the library's reading. Whenever the fast
// one returns true, its ranges equal the library's.
bool DecodeSnapshotReadFast(std::string_view body, std::vector<ReadRange>* out);
Result<std::vector<ReadRange>> DecodeSnapshotReadWithLibrary(std::string_view body);
Result<AtomicWrite> DecodeAtomicWrite(std::string_view body);
// The two ways DecodeAtomicWrite reads, for tests and the fuzz target, as for snapshot reads:
// the fast one reads checks and mutations by hand and gives up (nullopt) on everything else
// (enqueues, unknown fields, unusual encodings), which the library then reads. Whenever the
// fast one answers, it answers as the library does (the same write or the same error).
std::optional<Result<AtomicWrite>> DecodeAtomicWriteFast(std::string_view body);
Result<AtomicWrite> DecodeAtomicWriteWithLibrary(std::string_view body);
Result<std::vector<std::string>> DecodeWatch(std::string_view body);

// Output encoders. Reads always carry status=SR_SUCCESS, read_is_strongly_consistent=true.
// `strong`: read_is_strongly_consistent (false for a read served from a lagging replica).
std::string EncodeSnapshotReadOutput(const std::vector<std::vector<Entry>>& ranges,
                                     bool strong = true);
std::string EncodeAtomicWriteOutput(const CommitResult& result);
// One element per watched key, in request order; nullopt = key absent. Every key changed=true.
std::string EncodeWatchOutput(const std::vector<std::optional<Entry>>& keys);
// The same as one frame of a watch stream: a 4-byte little-endian length, then the output.
std::string EncodeWatchFrame(const std::vector<std::optional<Entry>>& keys);

}  // namespace kvc::codec
