// ParseMessage: protobuf bytes into a message, for the decoders of client_codec.cc and
// datapath_codec.cc (each says what a failure means to its caller). Stateless.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvc::codec {

// Parses `bytes` into `*msg`; false when they are not such a message (or over 2 GiB).
inline bool ParseMessage(std::string_view bytes, google::protobuf::MessageLite* msg) {
  return bytes.size() <= static_cast<size_t>(INT32_MAX) &&
         msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace kvc::codec
