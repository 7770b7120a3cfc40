#include "storage/queue_text.h"

namespace kvc::storage {
namespace {

// Readers of those text forms. Deno writes `null` for a schedule it never had; anything else
// that is not a plain array of byte values is Corruption.
class ListParser {
 public:
  explicit ListParser(std::string_view text) : t_(text) {}
  // An array of integers in [0, max]; "null" reads as empty.
  bool Numbers(uint64_t max, std::vector<uint64_t>* out) {
    Space();
    if (t_.substr(i_, 4) == "null") {
      i_ += 4;
      return End();
    }
    return Array(max, out) && End();
  }
  // An array of arrays of byte values.
  bool Keys(std::vector<std::string>* out) {
    Space();
    if (!Eat('[')) return false;
    Space();
    if (Eat(']')) return End();
    do {
      std::vector<uint64_t> bytes;
      if (!Array(255, &bytes)) return false;
      out->emplace_back(bytes.begin(), bytes.end());
      Space();
    } while (Eat(','));
    return Eat(']') && End();
  }

 private:
  bool Array(uint64_t max, std::vector<uint64_t>* out) {
    Space();
    if (!Eat('[')) return false;
    Space();
    if (Eat(']')) return true;
    do {
      Space();
      uint64_t v = 0;
      size_t digits = 0;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && digits < 19) {
        v = v * 10 + static_cast<uint64_t>(t_[i_++] - '0');
        ++digits;
      }
      if (digits == 0 || v > max) return false;
      out->push_back(v);
      Space();
    } while (Eat(','));
    return Eat(']');
  }
  bool Eat(char c) {
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void Space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t')) ++i_;
  }
  bool End() {
    Space();
    return i_ == t_.size();
  }
  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

std::string BackoffScheduleJson(const std::vector<uint32_t>& schedule) {
  std::string out = "[";
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(schedule[i]);
  }
  return out + "]";
}
std::string KeysJson(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ",";
    out += "[";
    for (size_t j = 0; j < keys[i].size(); ++j) {
      if (j) out += ",";
      out += std::to_string(static_cast<unsigned char>(keys[i][j]));
    }
    out += "]";
  }
  return out + "]";
}

Result<std::vector<uint32_t>> ParseBackoffSchedule(std::string_view text) {
  std::vector<uint64_t> v;
  if (!ListParser(text).Numbers(UINT32_MAX, &v)) {
    return Corruption("a queue message has an unreadable backoff schedule");
  }
  return std::vector<uint32_t>(v.begin(), v.end());
}

Result<std::vector<std::string>> ParseKeys(std::string_view text) {
  std::vector<std::string> keys;
  if (!ListParser(text).Keys(&keys)) {
    return Corruption("a queue message has unreadable keys_if_undelivered");
  }
  return keys;
}

}  // namespace kvc::storage
