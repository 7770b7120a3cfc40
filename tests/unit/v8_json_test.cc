#include "codec/v8_json.h"

#include <gtest/gtest.h>

namespace kvc::codec {
namespace {}  // namespace
}  // namespace kvc::codec
