#include "codec/key_text.h"

#include <cctype>

#include "codec/json_text.h"
#include "codec/v8/v8_json.h"
#include "common/random.h"

namespace kvc::codec {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A reader of key syntax over `src` that writes the KvKeyJSON of what it reads. Parts are not
// checked here beyond their shape: KeyBytesFromJson checks the whole result (escapes, lone
// surrogates, number and bigint ranges).
class KeyTextReader {
 public:
  explicit KeyTextReader(std::string_view src) : src_(src) {}

  Result<std::string> Read() {
    KVC_RETURN_IF_ERROR(Expect('['));
    std::string out = "[";
    SkipSpace();
    if (Peek() == ']') {
      ++i_;
    } else {
      for (bool first = true;; first = false) {
        if (!first) out.push_back(',');
        KVC_ASSIGN_OR_RETURN(std::string part, Part());
        out += part;
        SkipSpace();
        if (Peek() == ',') {
          ++i_;
          SkipSpace();
          if (Peek() == ']') {  // a trailing comma
            ++i_;
            break;
          }
          continue;
        }
        if (Peek() == ']') {
          ++i_;
          break;
        }
        return Fail("expected \",\" or \"]\"");
      }
    }
    SkipSpace();
    if (i_ != src_.size()) return Fail("unexpected text after the key");
    out.push_back(']');
    return out;
  }

 private:
  char Peek() const { return i_ < src_.size() ? src_[i_] : '\0'; }
  void SkipSpace() {
    while (i_ < src_.size() && IsSpace(src_[i_])) ++i_;
  }
  bool Word(std::string_view w) {
    if (src_.substr(i_).starts_with(w)) {
      i_ += w.size();
      return true;
    }
    return false;
  }
  Status Fail(const std::string& what) const {
    return InvalidArgument(what + " at position " + std::to_string(i_ + 1) + " of the key " +
                           JsonQuote(src_));
  }
  Status Expect(char c) {
    SkipSpace();
    if (Peek() != c) return Fail(std::string("expected \"") + c + "\"");
    ++i_;
    return Status::Ok();
  }
  static std::string Typed(std::string_view type, std::string_view value_json) {
    return "{\"type\":\"" + std::string(type) + "\",\"value\":" + std::string(value_json) + "}";
  }
  // Digits from i_ (at least one); returns how many.
  size_t Digits(size_t from) const {
    size_t j = from;
    while (j < src_.size() && IsDigit(src_[j])) ++j;
    return j - from;
  }

  Result<std::string> Part() {
    SkipSpace();
    const char c = Peek();
    if (c == '"') {
      size_t j = i_ + 1;
      while (j < src_.size() && src_[j] != '"') j += src_[j] == '\\' ? 2 : 1;
      if (j >= src_.size()) return Fail("unterminated string");
      // The literal is JSON string syntax already; KeyBytesFromJson checks its escapes.
      std::string part = Typed("string", src_.substr(i_, j + 1 - i_));
      i_ = j + 1;
      return part;
    }
    if (Word("true")) return Typed("boolean", "true");
    if (Word("false")) return Typed("boolean", "false");
    if (Word("NaN")) return Typed("number", "\"NaN\"");
    if (Word("Infinity")) return Typed("number", "\"Infinity\"");
    if (Word("-Infinity")) return Typed("number", "\"-Infinity\"");
    if (Word("raw:")) {
      size_t j = i_;
      while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) != 0 ||
                                 src_[j] == '_' || src_[j] == '-')) {
        ++j;
      }
      if (j == i_) return Fail("expected URL-safe base64 bytes after raw:");
      std::string part = Typed("raw", JsonQuote(src_.substr(i_, j - i_)));
      i_ = j;
      return part;
    }
    if (Word("new Uint8Array") || Word("Uint8Array")) return Bytes();
    // A number or a bigint: -?(0|[1-9]\d*) then n, or (\.\d+)?([eE][+-]?\d+)?
    const size_t start = i_;
    size_t j = i_;
    if (j < src_.size() && src_[j] == '-') ++j;
    const size_t int_digits = Digits(j);
    if (int_digits == 0 || (int_digits > 1 && src_[j] == '0')) {
      return Fail(c == '\'' ? "strings need double quotes"
                            : "expected a string, number, bigint, boolean, Uint8Array or raw:");
    }
    j += int_digits;
    if (j < src_.size() && src_[j] == 'n') {
      std::string digits(src_.substr(start, j - start));
      i_ = j + 1;
      return Typed("bigint", JsonQuote(digits));
    }
    if (j < src_.size() && src_[j] == '.' && Digits(j + 1) > 0) j += 1 + Digits(j + 1);
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (Digits(k) > 0) j = k + Digits(k);
    }
    i_ = j;
    return Typed("number", src_.substr(start, j - start));
  }

  // Uint8Array([1, 2, 3]) after the word.
  Result<std::string> Bytes() {
    KVC_RETURN_IF_ERROR(Expect('('));
    KVC_RETURN_IF_ERROR(Expect('['));
    std::string bytes;
    SkipSpace();
    while (Peek() != ']') {
      SkipSpace();
      const size_t n = Digits(i_);
      int value = 256;
      if (n > 0 && n <= 3) value = std::stoi(std::string(src_.substr(i_, n)));
      if (value > 255) return Fail("expected a byte (0 to 255)");
      bytes.push_back(static_cast<char>(value));
      i_ += n;
      SkipSpace();
      if (Peek() == ',') {
        ++i_;
      } else if (Peek() != ']') {
        return Fail("expected \",\" or \"]\"");
      }
      SkipSpace();
    }
    ++i_;
    KVC_RETURN_IF_ERROR(Expect(')'));
    return Typed("Uint8Array", JsonQuote(Base64UrlEncode(bytes)));
  }

  std::string_view src_;
  size_t i_ = 0;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::string> KeyTextToJson(std::string_view text) {
  const std::string_view src = Trim(text);
  // KvKeyJSON first when it may be that (key syntax has no braces outside strings).
  Status typed_error = Status::Ok();
  if (src.starts_with('[') && src.find('{') != std::string_view::npos) {
    auto bytes = KeyBytesFromJson(src);
    if (bytes.ok()) return std::string(src);
    typed_error = bytes.status();
  }
  auto json = KeyTextReader(src).Read();
  if (!json.ok()) {
    // Text that starts like KvKeyJSON gets the KvKeyJSON error, which says more.
    if (!typed_error.ok() && Trim(src.substr(1)).starts_with('{')) return typed_error;
    return json.status();
  }
  auto bytes = KeyBytesFromJson(*json);
  if (!bytes.ok()) {
    return InvalidArgument("the key " + JsonQuote(src) + ": " + bytes.status().message());
  }
  return json;
}

}  // namespace kvc::codec
