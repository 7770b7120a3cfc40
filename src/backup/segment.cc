#include "backup/segment.h"

#include <utility>

#include "common/crc32c.h"

namespace kvc::backup {
namespace {

constexpr std::string_view kMagic = "KVCLOG01";
constexpr std::string_view kTrailerMagic = "KVCEND01";
constexpr size_t kTrailerSize = 8 + 4 + 8 + 8 + 4;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string& out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
uint32_t GetU32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
int64_t GetI64(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return static_cast<int64_t>(v);
}

}  // namespace

std::string EncodeSegment(const std::vector<storage::ChangeLogRow>& rows) {
  size_t size = kMagic.size() + kTrailerSize;
  for (const auto& r : rows) size += 8 + r.bytes.size();
  std::string out;
  out.reserve(size);
  out.append(kMagic);
  for (const auto& r : rows) {
    PutU32(out, static_cast<uint32_t>(r.bytes.size()));
    PutU32(out, Crc32c(r.bytes));
    out.append(r.bytes);
  }
  const uint32_t body_crc = Crc32c(out);
  out.append(kTrailerMagic);
  PutU32(out, static_cast<uint32_t>(rows.size()));
  PutI64(out, rows.front().prev_version);
  PutI64(out, rows.back().version);
  PutU32(out, body_crc);
  return out;
}

Result<DecodedSegment> DecodeSegment(std::string_view bytes) {
  if (bytes.size() < kMagic.size() + kTrailerSize || bytes.substr(0, kMagic.size()) != kMagic) {
    return Corruption("not a kvconnect log segment (bad header or too short)");
  }
  const size_t trailer = bytes.size() - kTrailerSize;
  if (bytes.substr(trailer, kTrailerMagic.size()) != kTrailerMagic) {
    return Corruption("log segment is truncated (no trailer)");
  }
  const std::string_view body = bytes.substr(0, trailer);
  if (Crc32c(body) != GetU32(bytes, trailer + 28)) {
    return Corruption("log segment fails its checksum");
  }
  DecodedSegment seg;
  const uint32_t count = GetU32(bytes, trailer + 8);
  seg.prev_version = GetI64(bytes, trailer + 12);
  seg.last_version = GetI64(bytes, trailer + 20);
  size_t pos = kMagic.size();
  int64_t prev = seg.prev_version;
  while (pos < trailer) {
    if (trailer - pos < 8) return Corruption("log segment entry header is truncated");
    const uint32_t len = GetU32(bytes, pos);
    const uint32_t crc = GetU32(bytes, pos + 4);
    pos += 8;
    if (trailer - pos < len) return Corruption("log segment entry is truncated");
    const std::string_view entry = bytes.substr(pos, len);
    pos += len;
    if (Crc32c(entry) != crc) return Corruption("log segment entry fails its checksum");
    KVC_ASSIGN_OR_RETURN(storage::LoggedCommit e, storage::DecodeLoggedCommit(entry));
    if (e.prev_version != prev) {
      return Corruption("log segment entries are not consecutive (version " +
                        std::to_string(e.record.version) + " follows " +
                        std::to_string(e.prev_version) + ", not " + std::to_string(prev) + ")");
    }
    prev = e.record.version;
    seg.entries.push_back(std::move(e));
  }
  if (seg.entries.empty() || seg.entries.size() != count || prev != seg.last_version) {
    return Corruption("log segment's trailer does not match its entries");
  }
  return seg;
}

}  // namespace kvc::backup
