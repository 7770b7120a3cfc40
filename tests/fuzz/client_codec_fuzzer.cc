// The client-side decoders of `kvconnect bench` (src/codec/client_codec.h and the
// metadata-exchange response parser) on untrusted bytes: what a server, or anything
// pretending to be one, may answer.
#include <string_view>

#include "codec/client_codec.h"
#include "codec/metadata_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::codec::DecodeSnapshotReadOutput(in);
  (void)kvc::codec::DecodeAtomicWriteOutput(in);
  (void)kvc::codec::DecodeWatchOutput(in);
  (void)kvc::codec::ParseV8String(in);
  (void)kvc::codec::ParseMetadataResponse(in);
  // The watch body, split as it arrives in chunks of varying sizes.
  kvc::codec::WatchFrameSplitter frames(1 << 16);
  for (size_t pos = 0, chunk = 1; pos < in.size(); pos += chunk, chunk = chunk * 2 % 61 + 1) {
    frames.Append(in.substr(pos, chunk));
    while (true) {
      auto frame = frames.Next();
      if (!frame.ok() || !frame->has_value()) break;
      if (!(*frame)->empty()) (void)kvc::codec::DecodeWatchOutput(**frame);
    }
  }
  return 0;
}
