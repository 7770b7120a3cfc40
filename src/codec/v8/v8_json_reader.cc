#include "codec/v8/v8_json_reader.h"

#include <charconv>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "codec/utf8.h"

namespace kvc::codec {

const JsonNode* JsonNode::Find(std::u16string_view name) const {
  for (const auto& [key, value] : members) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {

class JsonReader {
 public:
  JsonReader(std::string_view text, size_t max_depth) : text_(text), max_depth_(max_depth) {}

  Result<JsonNode> Run() {
    JsonNode value;
    SkipSpace();
    if (Status s = ReadValue(&value, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the value");
    return value;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("invalid JSON: " + what + " at offset " + std::to_string(pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status ReadValue(JsonNode* out, size_t depth) {
    if (depth > max_depth_) return InvalidArgument("JSON too deep");
    if (pos_ >= text_.size()) return Error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return ReadObject(out, depth);
    if (c == '[') return ReadArray(out, depth);
    if (c == '"') {
      out->type = JsonNode::Type::kString;
      return ReadString(&out->string);
    }
    if (Consume("null")) {
      out->type = JsonNode::Type::kNull;
      return Status::Ok();
    }
    if (Consume("true")) {
      out->type = JsonNode::Type::kTrue;
      return Status::Ok();
    }
    if (Consume("false")) {
      out->type = JsonNode::Type::kFalse;
      return Status::Ok();
    }
    return ReadNumber(out);
  }

  Status ReadNumber(JsonNode* out) {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    Consume("-");
    const size_t int_start = pos_;
    const size_t int_digits = digits();
    if (int_digits == 0 || (int_digits > 1 && text_[int_start] == '0')) {
      return Error("bad number");
    }
    if (Consume(".")) {
      if (digits() == 0) return Error("bad number");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("bad number");
    }
    const auto result = std::from_chars(text_.data() + start, text_.data() + pos_, out->number);
    if (result.ec != std::errc() || result.ptr != text_.data() + pos_) {
      return Error("number out of range");
    }
    out->type = JsonNode::Type::kNumber;
    return Status::Ok();
  }

  bool ReadHex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return false;
    *out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
      *out = *out << 4 | digit;
    }
    return true;
  }

  // Reads a string literal into UTF-16 units. The raw text must be well-formed UTF-8.
  Status ReadString(std::u16string* out) {
    ++pos_;  // the opening quote
    out->clear();
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const auto c = static_cast<uint8_t>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c < 0x20) return Error("control character in string");
      if (c == '\\') {
        if (++pos_ >= text_.size()) return Error("unterminated string");
        const char e = text_[pos_++];
        if (e == 'u') {
          uint32_t unit;
          if (!ReadHex4(&unit)) return Error("bad \\u escape");
          out->push_back(static_cast<char16_t>(unit));  // surrogates kept as they are
          continue;
        }
        // The letters after a backslash and the characters they stand for.
        static constexpr std::string_view kLetters = "\"\\/bfnrt";
        static constexpr std::u16string_view kMeanings = u"\"\\/\b\f\n\r\t";
        const size_t i = kLetters.find(e);
        if (i == std::string_view::npos) return Error("bad escape");
        out->push_back(kMeanings[i]);
        continue;
      }
      if (c < 0x80) {
        out->push_back(c);
        ++pos_;
        continue;
      }
      const std::optional<uint32_t> cp = NextCodePoint(text_, &pos_);
      if (!cp) return Error("malformed UTF-8");
      if (*cp < 0x10000) {
        out->push_back(static_cast<char16_t>(*cp));
      } else {
        out->push_back(static_cast<char16_t>(0xD800 + ((*cp - 0x10000) >> 10)));
        out->push_back(static_cast<char16_t>(0xDC00 + ((*cp - 0x10000) & 0x3FF)));
      }
    }
  }

  Status ReadArray(JsonNode* out, size_t depth) {
    ++pos_;
    out->type = JsonNode::Type::kArray;
    SkipSpace();
    if (Consume("]")) return Status::Ok();
    while (true) {
      SkipSpace();
      JsonNode item;
      if (Status s = ReadValue(&item, depth + 1); !s.ok()) return s;
      out->items.push_back(std::move(item));
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated array");
      if (Consume("]")) return Status::Ok();
      if (!Consume(",")) return Error("expected , or ]");
    }
  }

  Status ReadObject(JsonNode* out, size_t depth) {
    ++pos_;
    out->type = JsonNode::Type::kObject;
    SkipSpace();
    if (Consume("}")) return Status::Ok();
    std::unordered_set<std::u16string> names;
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a member name");
      std::u16string name;
      if (Status s = ReadString(&name); !s.ok()) return s;
      if (!names.insert(name).second) return Error("duplicate member " + Utf16ToUtf8(name));
      SkipSpace();
      if (!Consume(":")) return Error("expected :");
      SkipSpace();
      JsonNode value;
      if (Status s = ReadValue(&value, depth + 1); !s.ok()) return s;
      out->members.push_back(JsonMember{std::move(name), std::move(value)});
      SkipSpace();
      if (pos_ >= text_.size()) return Error("unterminated object");
      if (Consume("}")) return Status::Ok();
      if (!Consume(",")) return Error("expected , or }");
    }
  }

  std::string_view text_;
  size_t max_depth_;
  size_t pos_ = 0;
};

}  // namespace

Result<JsonNode> ReadJsonNode(std::string_view text, size_t max_depth) {
  return JsonReader(text, max_depth).Run();
}

}  // namespace kvc::codec
