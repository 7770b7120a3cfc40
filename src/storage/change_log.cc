#include "storage/change_log.h"

#include <utility>

namespace kvc::storage {
namespace {

constexpr uint8_t kFormat = 1;

void PutU8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string& out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
void PutBytes(std::string& out, std::string_view b) {
  PutU32(out, static_cast<uint32_t>(b.size()));
  out.append(b);
}

// Bounds-checked reads from an untrusted buffer; any overrun sets failed.
class Cursor {
 public:
  explicit Cursor(std::string_view b) : b_(b) {}
  bool failed() const { return failed_; }
  bool done() const { return pos_ == b_.size(); }
  uint8_t U8() {
    if (!Need(1)) return 0;
    return static_cast<uint8_t>(b_[pos_++]);
  }
  uint32_t U32() {
    if (!Need(4)) return 0;
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b_[pos_ + i]);
    pos_ += 4;
    return v;
  }
  int64_t I64() {
    if (!Need(8)) return 0;
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b_[pos_ + i]);
    pos_ += 8;
    return static_cast<int64_t>(v);
  }
  std::string Bytes() {
    const uint32_t n = U32();
    if (!Need(n)) return {};
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_item_bytes` long: refuses counts the rest of the
  // buffer cannot hold, so a hostile count never makes us reserve memory.
  uint32_t Count(size_t min_item_bytes) {
    const uint32_t n = U32();
    if (!failed_ && static_cast<uint64_t>(n) * min_item_bytes > b_.size() - pos_) failed_ = true;
    return failed_ ? 0 : n;
  }

 private:
  bool Need(size_t n) {
    if (failed_ || b_.size() - pos_ < n) {
      failed_ = true;
      return false;
    }
    return true;
  }
  std::string_view b_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace

std::string EncodeLoggedCommit(const CommitRecord& record, int64_t prev_version, int64_t time_ms) {
  std::string out;
  size_t size = 64;
  for (const KeyChange& c : record.changes) {
    size += c.key.size() + 32 + (c.row ? c.row->value.size() : 0);
  }
  for (const QueueRow& q : record.enqueues) size += q.payload.size() + q.id.size() + 64;
  out.reserve(size);
  PutU8(out, kFormat);
  PutI64(out, record.version);
  PutI64(out, prev_version);
  PutI64(out, time_ms);
  PutU32(out, static_cast<uint32_t>(record.changes.size()));
  for (const KeyChange& c : record.changes) {
    PutBytes(out, c.key);
    PutU8(out, c.row ? 1 : 0);
    if (c.row) {
      PutU8(out, static_cast<uint8_t>(c.row->encoding));
      PutI64(out, c.row->version);
      PutI64(out, c.row->expire_at_ms);
      PutBytes(out, c.row->value);
    }
  }
  PutU32(out, static_cast<uint32_t>(record.enqueues.size()));
  for (const QueueRow& q : record.enqueues) {
    PutI64(out, q.ts);
    PutBytes(out, q.id);
    PutBytes(out, q.payload);
    PutU32(out, static_cast<uint32_t>(q.backoff_schedule.size()));
    for (uint32_t b : q.backoff_schedule) PutU32(out, b);
    PutU32(out, static_cast<uint32_t>(q.keys_if_undelivered.size()));
    for (const std::string& k : q.keys_if_undelivered) PutBytes(out, k);
  }
  return out;
}

Result<LoggedCommit> DecodeLoggedCommit(std::string_view bytes) {
  Cursor c(bytes);
  const uint8_t format = c.U8();
  if (!c.failed() && format != kFormat) {
    return Corruption("change log entry of unknown format " + std::to_string(format));
  }
  LoggedCommit out;
  out.record.version = c.I64();
  out.prev_version = c.I64();
  out.time_ms = c.I64();
  const uint32_t n_changes = c.Count(5);
  out.record.changes.reserve(n_changes);
  for (uint32_t i = 0; i < n_changes && !c.failed(); ++i) {
    KeyChange ch;
    ch.key = c.Bytes();
    const uint8_t has_row = c.U8();
    if (has_row > 1) return Corruption("change log entry has a bad row flag");
    if (has_row) {
      StoredRow row;
      const uint8_t enc = c.U8();
      if (!c.failed() && !IsKnownEncoding(enc)) {
        return Corruption("change log entry has the unknown value encoding " + std::to_string(enc));
      }
      row.encoding = static_cast<ValueEncoding>(enc);
      row.version = c.I64();
      row.expire_at_ms = c.I64();
      row.value = c.Bytes();
      ch.row = std::move(row);
    }
    out.record.changes.push_back(std::move(ch));
  }
  const uint32_t n_enqueues = c.Count(28);
  out.record.enqueues.reserve(n_enqueues);
  for (uint32_t i = 0; i < n_enqueues && !c.failed(); ++i) {
    QueueRow q;
    q.ts = c.I64();
    q.id = c.Bytes();
    q.payload = c.Bytes();
    const uint32_t n_backoff = c.Count(4);
    for (uint32_t j = 0; j < n_backoff && !c.failed(); ++j) q.backoff_schedule.push_back(c.U32());
    const uint32_t n_keys = c.Count(4);
    for (uint32_t j = 0; j < n_keys && !c.failed(); ++j) {
      q.keys_if_undelivered.push_back(c.Bytes());
    }
    out.record.enqueues.push_back(std::move(q));
  }
  if (c.failed()) return Corruption("change log entry is truncated");
  if (!c.done()) return Corruption("change log entry has trailing bytes");
  if (out.prev_version < 0 || out.record.version <= out.prev_version) {
    return Corruption("change log entry's versions are out of order");
  }
  return out;
}

}  // namespace kvc::storage
