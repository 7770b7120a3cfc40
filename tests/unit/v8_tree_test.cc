#include "codec/v8_tree.h"

#include <gtest/gtest.h>

namespace kvc::codec {
namespace {}  // namespace
}  // namespace kvc::codec
