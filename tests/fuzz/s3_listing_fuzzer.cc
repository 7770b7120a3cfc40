// The S3 target's XML reader on untrusted bytes (what an S3 endpoint answers): a ListObjectsV2
// page and an error body. An accepted page must keep the parser's promises.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backup/s3_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)kvc::backup::ParseS3Error(in);
  auto page = kvc::backup::ParseListObjectsV2(in);
  if (!page.ok()) {
    if (page.status().code() != kvc::StatusCode::kCorruption) std::abort();
    return 0;
  }
  if (page->is_truncated == page->next_continuation_token.empty()) std::abort();
  for (const auto& object : page->objects) {
    if (object.name.empty() || object.size < 0) std::abort();
  }
  return 0;
}
