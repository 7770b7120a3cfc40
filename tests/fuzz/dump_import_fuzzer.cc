// The import side of NDJSON dumps (service/admin/dump.h) on untrusted bytes: lines split by the
// reader, each parsed into atomic-write batches. Every batch it closes must be one the engine
// accepts as it is (limits, key sizes), so an import never fails half-way for a reason the
// parser should have caught.
#include <cstdlib>
#include <string>

#include "engine/limits.h"
#include "service/admin/dump.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvc::service::DumpBatcher;
  kvc::engine::Limits limits;
  limits.max_mutations = 7;  // small, so batches close often
  kvc::service::DumpBatchOptions options;
  options.max_entries = 5;
  options.max_bytes = 4096;
  DumpBatcher batcher(options, limits);
  auto reader =
      kvc::service::StringDumpReader(std::string(reinterpret_cast<const char*>(data), size));
  constexpr int64_t kNow = 1'800'000'000'000;  // the import's clock, fixed
  int64_t line_no = 0;
  for (;;) {
    auto line = reader->Next();
    if (!line.ok() || !line->has_value()) break;
    if (!batcher.Add(**line, ++line_no, kNow).ok()) break;
  }
  batcher.Finish();
  while (batcher.has_ready()) {
    const kvc::service::DumpBatch batch = batcher.TakeReady();
    if (batch.write.mutations.size() > 5) std::abort();
    // An entry whose expiry has passed is skipped, never written already expired.
    for (const auto& m : batch.write.mutations) {
      if (m.expire_at_ms > 0 && m.expire_at_ms <= kNow) std::abort();
    }
    if (!kvc::engine::ValidateAtomicWrite(batch.write, limits, kNow).ok()) std::abort();
  }
  return 0;
}
