#include "backup/s3_xml.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

#include "codec/utf8.h"

namespace kvc::backup {
namespace {

bool IsXmlSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsAllSpace(std::string_view s) {
  for (char c : s) {
    if (!IsXmlSpace(c)) return false;
  }
  return true;
}

bool IsNameStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':';
}

bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

// XML 1.0's Char production.
bool IsXmlChar(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

Status Malformed(std::string_view what) {
  return Corruption("S3 answer is not well-formed XML: " + std::string(what));
}

// Appends the character data `raw` with its references decoded.
Status AppendDecoded(std::string_view raw, std::string* out) {
  size_t i = 0;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c != '&') {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 && !IsXmlSpace(c)) return Malformed("control character");
      out->push_back(c);
      ++i;
      continue;
    }
    const size_t semi = raw.find(';', i + 1);
    if (semi == std::string_view::npos) return Malformed("unterminated reference");
    const std::string_view ref = raw.substr(i + 1, semi - i - 1);
    i = semi + 1;
    if (ref == "lt") {
      out->push_back('<');
    } else if (ref == "gt") {
      out->push_back('>');
    } else if (ref == "amp") {
      out->push_back('&');
    } else if (ref == "quot") {
      out->push_back('"');
    } else if (ref == "apos") {
      out->push_back('\'');
    } else if (ref.size() >= 2 && ref[0] == '#') {
      const bool hex = ref[1] == 'x';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      // At most 0x10FFFF: 6 hex or 7 decimal digits (leading zeros are rare; refuse them past
      // that length too).
      if (digits.empty() || digits.size() > (hex ? 6U : 7U)) return Malformed("bad reference");
      uint32_t cp = 0;
      const auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (ec != std::errc() || end != digits.data() + digits.size()) {
        return Malformed("bad character reference");
      }
      if (!IsXmlChar(cp)) return Malformed("character reference to a non-character");
      codec::AppendUtf8(cp, out);
    } else {
      return Malformed("unknown entity &" + std::string(ref.substr(0, 16)) + ";");
    }
  }
  return Status::Ok();
}

// Receives the elements of a document in order.
class XmlHandler {
 public:
  virtual ~XmlHandler() = default;
  // `path`: the names of the open elements, the root first and this one last.
  virtual Status OnStart(const std::vector<std::string_view>& path) = 0;
  // `text`: the element's character data, decoded; empty if the element has child elements
  // (between which only white space is allowed).
  virtual Status OnEnd(const std::vector<std::string_view>& path, std::string text) = 0;
};

class XmlParser {
 public:
  XmlParser(std::string_view in, XmlHandler* handler) : in_(in), handler_(handler) {}

  Status Parse() {
    if (!codec::IsValidUtf8(in_)) return Malformed("not UTF-8");
    if (in_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // byte order mark
    if (in_.substr(pos_, 5) == "<?xml" && pos_ + 5 < in_.size() && IsXmlSpace(in_[pos_ + 5])) {
      const size_t end = in_.find("?>", pos_);
      if (end == std::string_view::npos) return Malformed("unterminated XML declaration");
      pos_ = end + 2;
    }
    while (pos_ < in_.size()) {
      if (in_[pos_] == '<') {
        KVC_RETURN_IF_ERROR(Markup());
      } else {
        KVC_RETURN_IF_ERROR(CharData());
      }
    }
    if (!open_.empty()) return Malformed("unclosed element <" + std::string(open_.back()) + ">");
    if (!root_done_) return Malformed("no root element");
    return Status::Ok();
  }

 private:
  struct Frame {
    std::string text;
    bool has_children = false;
  };

  bool At(std::string_view s) const { return in_.substr(pos_, s.size()) == s; }

  void SkipSpace() {
    while (pos_ < in_.size() && IsXmlSpace(in_[pos_])) ++pos_;
  }

  Result<std::string_view> Name() {
    const size_t start = pos_;
    if (pos_ >= in_.size() || !IsNameStart(in_[pos_])) return Malformed("bad name");
    while (pos_ < in_.size() && IsNameChar(in_[pos_])) ++pos_;
    return in_.substr(start, pos_ - start);
  }

  Status Markup() {
    if (At("<!--")) {
      const size_t end = in_.find("--", pos_ + 4);
      if (end == std::string_view::npos) return Malformed("unterminated comment");
      if (in_.substr(end, 3) != "-->") return Malformed("'--' inside a comment");
      pos_ = end + 3;
      return Status::Ok();
    }
    if (At("<?")) {
      pos_ += 2;
      KVC_ASSIGN_OR_RETURN(const std::string_view target, Name());
      if (target.size() == 3 && (target[0] | 0x20) == 'x' && (target[1] | 0x20) == 'm' &&
          (target[2] | 0x20) == 'l') {
        return Malformed("misplaced XML declaration");
      }
      const size_t end = in_.find("?>", pos_);
      if (end == std::string_view::npos) return Malformed("unterminated processing instruction");
      pos_ = end + 2;
      return Status::Ok();
    }
    if (At("<![CDATA[")) {
      if (frames_.empty()) return Malformed("CDATA outside the root element");
      const size_t start = pos_ + 9;
      const size_t end = in_.find("]]>", start);
      if (end == std::string_view::npos) return Malformed("unterminated CDATA section");
      const std::string_view raw = in_.substr(start, end - start);
      for (char c : raw) {
        if (static_cast<unsigned char>(c) < 0x20 && !IsXmlSpace(c)) {
          return Malformed("control character");
        }
      }
      frames_.back().text.append(raw);
      pos_ = end + 3;
      return Status::Ok();
    }
    if (At("<!")) return Malformed("DOCTYPE or other declaration");
    if (At("</")) return EndTag();
    return StartTag();
  }

  Status StartTag() {
    ++pos_;  // '<'
    if (root_done_) return Malformed("content after the root element");
    KVC_ASSIGN_OR_RETURN(const std::string_view name, Name());
    bool self_closing = false;
    for (;;) {
      const size_t before = pos_;
      SkipSpace();
      if (pos_ >= in_.size()) return Malformed("unterminated start tag");
      if (in_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (At("/>")) {
        pos_ += 2;
        self_closing = true;
        break;
      }
      if (pos_ == before) return Malformed("attributes must be separated by white space");
      KVC_RETURN_IF_ERROR(Attribute());
    }
    if (!frames_.empty()) frames_.back().has_children = true;
    if (open_.size() >= static_cast<size_t>(kMaxXmlDepth)) return Malformed("nested too deeply");
    open_.push_back(name);
    frames_.emplace_back();
    KVC_RETURN_IF_ERROR(handler_->OnStart(open_));
    if (self_closing) return Close();
    return Status::Ok();
  }

  // name = "value" (or 'value'); the value is checked and dropped.
  Status Attribute() {
    KVC_ASSIGN_OR_RETURN(const std::string_view name, Name());
    (void)name;
    SkipSpace();
    if (pos_ >= in_.size() || in_[pos_] != '=') return Malformed("attribute without '='");
    ++pos_;
    SkipSpace();
    if (pos_ >= in_.size() || (in_[pos_] != '"' && in_[pos_] != '\'')) {
      return Malformed("unquoted attribute value");
    }
    const char quote = in_[pos_];
    const size_t end = in_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return Malformed("unterminated attribute value");
    const std::string_view raw = in_.substr(pos_ + 1, end - pos_ - 1);
    if (raw.find('<') != std::string_view::npos) return Malformed("'<' in an attribute value");
    std::string ignored;
    KVC_RETURN_IF_ERROR(AppendDecoded(raw, &ignored));
    pos_ = end + 1;
    return Status::Ok();
  }

  Status EndTag() {
    pos_ += 2;  // "</"
    KVC_ASSIGN_OR_RETURN(const std::string_view name, Name());
    SkipSpace();
    if (pos_ >= in_.size() || in_[pos_] != '>') return Malformed("unterminated end tag");
    ++pos_;
    if (open_.empty() || open_.back() != name) {
      return Malformed("unexpected end tag </" + std::string(name) + ">");
    }
    return Close();
  }

  // Ends the innermost open element.
  Status Close() {
    Frame frame = std::move(frames_.back());
    frames_.pop_back();
    if (frame.has_children) {
      if (!IsAllSpace(frame.text)) return Malformed("text mixed with elements");
      frame.text.clear();
    }
    KVC_RETURN_IF_ERROR(handler_->OnEnd(open_, std::move(frame.text)));
    open_.pop_back();
    if (open_.empty()) root_done_ = true;
    return Status::Ok();
  }

  Status CharData() {
    size_t end = in_.find('<', pos_);
    if (end == std::string_view::npos) end = in_.size();
    const std::string_view raw = in_.substr(pos_, end - pos_);
    pos_ = end;
    if (frames_.empty()) {
      if (!IsAllSpace(raw)) return Malformed("text outside the root element");
      return Status::Ok();
    }
    if (raw.find("]]>") != std::string_view::npos) return Malformed("']]>' in text");
    return AppendDecoded(raw, &frames_.back().text);
  }

  std::string_view in_;
  XmlHandler* handler_;
  size_t pos_ = 0;
  std::vector<std::string_view> open_;
  std::vector<Frame> frames_;
  bool root_done_ = false;
};

Status ExpectRoot(const std::vector<std::string_view>& path, std::string_view root) {
  if (path.size() == 1 && path[0] != root) {
    return Corruption("S3 answer: expected <" + std::string(root) + ">, got <" +
                      std::string(path[0]) + ">");
  }
  return Status::Ok();
}

Status Duplicate(std::string_view name) {
  return Corruption("S3 answer: <" + std::string(name) + "> appears twice");
}

class ListHandler : public XmlHandler {
 public:
  Status OnStart(const std::vector<std::string_view>& path) override {
    KVC_RETURN_IF_ERROR(ExpectRoot(path, "ListBucketResult"));
    if (path.size() == 2 && path[1] == "Contents") {
      key_.reset();
      size_.reset();
    }
    return Status::Ok();
  }

  Status OnEnd(const std::vector<std::string_view>& path, std::string text) override {
    if (path.size() == 3 && path[1] == "Contents") {
      if (path[2] == "Key") {
        if (key_) return Duplicate("Key");
        if (text.empty()) return Corruption("S3 listing: empty <Key>");
        key_ = std::move(text);
      } else if (path[2] == "Size") {
        if (size_) return Duplicate("Size");
        int64_t size = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), size);
        if (text.empty() || text[0] == '-' || ec != std::errc() ||
            end != text.data() + text.size()) {
          return Corruption("S3 listing: bad <Size> '" + text.substr(0, 32) + "'");
        }
        size_ = size;
      }
    } else if (path.size() == 2) {
      if (path[1] == "Contents") {
        if (!key_ || !size_) return Corruption("S3 listing: <Contents> without <Key> or <Size>");
        page_.objects.push_back(ObjectInfo{std::move(*key_), *size_});
      } else if (path[1] == "IsTruncated") {
        if (truncated_seen_) return Duplicate("IsTruncated");
        truncated_seen_ = true;
        if (text == "true") {
          page_.is_truncated = true;
        } else if (text != "false") {
          return Corruption("S3 listing: bad <IsTruncated> '" + text.substr(0, 32) + "'");
        }
      } else if (path[1] == "NextContinuationToken") {
        if (token_seen_) return Duplicate("NextContinuationToken");
        token_seen_ = true;
        page_.next_continuation_token = std::move(text);
      }
    }
    return Status::Ok();
  }

  Result<ListPage> Finish() && {
    if (!truncated_seen_) return Corruption("S3 listing: no <IsTruncated>");
    if (page_.is_truncated && page_.next_continuation_token.empty()) {
      return Corruption("S3 listing: truncated without a <NextContinuationToken>");
    }
    if (!page_.is_truncated) page_.next_continuation_token.clear();
    return std::move(page_);
  }

 private:
  ListPage page_;
  std::optional<std::string> key_;
  std::optional<int64_t> size_;
  bool truncated_seen_ = false;
  bool token_seen_ = false;
};

class ErrorHandler : public XmlHandler {
 public:
  Status OnStart(const std::vector<std::string_view>& path) override {
    return ExpectRoot(path, "Error");
  }

  Status OnEnd(const std::vector<std::string_view>& path, std::string text) override {
    if (path.size() != 2) return Status::Ok();
    if (path[1] == "Code") {
      if (code_seen_) return Duplicate("Code");
      code_seen_ = true;
      body_.code = std::move(text);
    } else if (path[1] == "Message") {
      if (message_seen_) return Duplicate("Message");
      message_seen_ = true;
      body_.message = std::move(text);
    }
    return Status::Ok();
  }

  S3ErrorBody Finish() && { return std::move(body_); }

 private:
  S3ErrorBody body_;
  bool code_seen_ = false;
  bool message_seen_ = false;
};

}  // namespace

Result<ListPage> ParseListObjectsV2(std::string_view xml) {
  ListHandler handler;
  KVC_RETURN_IF_ERROR(XmlParser(xml, &handler).Parse());
  return std::move(handler).Finish();
}

Result<S3ErrorBody> ParseS3Error(std::string_view xml) {
  ErrorHandler handler;
  KVC_RETURN_IF_ERROR(XmlParser(xml, &handler).Parse());
  return std::move(handler).Finish();
}

}  // namespace kvc::backup
