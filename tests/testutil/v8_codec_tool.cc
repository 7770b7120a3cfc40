// Test helper for tests/e2e/v8_codec.test.mjs: reads one KvValueJSON per stdin line and writes,
// per line, "<value encoding> <hex of the bytes>" as KvValueFromJson makes them (V8 format
// version argv[1], default 15), or "error <message>".
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "codec/v8/v8_json.h"
#include "testutil/hex.h"

int main(int argc, char** argv) {
  const uint32_t version = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 15;
  std::string line;
  while (std::getline(std::cin, line)) {
    auto value = kvc::codec::KvValueFromJson(line, version);
    if (value.ok()) {
      std::cout << static_cast<int>(value->encoding) << " " << kvc::testutil::ToHex(value->data)
                << "\n";
    } else {
      std::cout << "error " << value.status().message() << "\n";
    }
  }
  return 0;
}
