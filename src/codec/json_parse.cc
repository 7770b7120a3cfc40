#include "codec/json_parse.h"

#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <atomic>

#include "codec/sax_forwarder.h"

namespace kvc::codec {
namespace {

std::atomic<size_t> max_json_depth{kDefaultMaxJsonDepth};

// A RapidJSON handler that forwards every event to a Document (which builds the value) and
// refuses an array or object that opens deeper than the cap.
class DepthCappedHandler : public SaxForwarder<rapidjson::Document> {
 public:
  DepthCappedHandler(rapidjson::Document* doc, size_t max_depth)
      : SaxForwarder(doc), max_depth_(max_depth) {}

  bool too_deep() const { return too_deep_; }

  bool StartObject() { return Open() && target()->StartObject(); }
  bool EndObject(rapidjson::SizeType members) {
    --depth_;
    return target()->EndObject(members);
  }
  bool StartArray() { return Open() && target()->StartArray(); }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return target()->EndArray(elements);
  }

 private:
  bool Open() {
    if (depth_ >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    ++depth_;
    return true;
  }

  const size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

void SetMaxJsonDepth(size_t depth) {
  max_json_depth.store(std::clamp<size_t>(depth, 1, kMaxJsonDepthLimit));
}

size_t MaxJsonDepth() { return max_json_depth.load(); }

bool ParseJsonDocument(std::string_view text, size_t max_depth, rapidjson::Document* doc,
                       JsonParseFailure* failure) {
  constexpr unsigned kFlags =
      rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag;
  rapidjson::MemoryStream bytes(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> in(bytes);
  rapidjson::Reader reader;
  rapidjson::ParseResult result;
  bool too_deep = false;
  // Document::Populate runs this with the document as the handler of SAX events and keeps the
  // value built when it returns true.
  auto generate = [&](rapidjson::Document& target) {
    DepthCappedHandler handler(&target, max_depth);
    result = reader.Parse<kFlags>(in, handler);
    too_deep = handler.too_deep();
    return !result.IsError();
  };
  doc->SetNull();
  doc->Populate(generate);
  if (!result.IsError()) return true;
  doc->SetNull();
  if (failure != nullptr) {
    failure->too_deep = too_deep;
    failure->reason = too_deep ? "" : rapidjson::GetParseError_En(result.Code());
    failure->offset = result.Offset();
  }
  return false;
}

std::string JsonTooDeepText(std::string_view what, size_t max_depth) {
  return std::string(what) + " is nested deeper than " + std::to_string(max_depth) + " levels.";
}

Status ParseJsonText(std::string_view text, std::string_view what, rapidjson::Document* doc,
                     size_t max_depth) {
  JsonParseFailure failure;
  if (ParseJsonDocument(text, max_depth, doc, &failure)) return Status::Ok();
  if (failure.too_deep) return InvalidArgument(JsonTooDeepText(what, max_depth));
  return InvalidArgument(std::string(what) + " is not valid JSON: " + failure.reason +
                         " (at byte " + std::to_string(failure.offset) + ").");
}

}  // namespace kvc::codec
