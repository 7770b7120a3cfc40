// SaxForwarder: a RapidJSON SAX handler that passes every event on to another handler (a
// Document being built, a SchemaValidator). A handler that changes a few events derives from it
// and declares those again; RapidJSON calls a handler through its static type, so the derived
// declarations win without anything virtual. Internal to codec/.
//
// Ownership: borrows the target, which must outlive the forwarder.
// Thread-safety: as the target's.
#pragma once

#include <rapidjson/rapidjson.h>

#include <cstdint>

namespace kvc::codec {

template <typename Target>
class SaxForwarder {
 public:
  using Ch = char;

  explicit SaxForwarder(Target* target) : target_(target) {}

  bool Null() { return target_->Null(); }
  bool Bool(bool b) { return target_->Bool(b); }
  bool Int(int i) { return target_->Int(i); }
  bool Uint(unsigned u) { return target_->Uint(u); }
  bool Int64(int64_t i) { return target_->Int64(i); }
  bool Uint64(uint64_t u) { return target_->Uint64(u); }
  bool Double(double d) { return target_->Double(d); }
  bool RawNumber(const Ch* s, rapidjson::SizeType n, bool copy) {
    return target_->RawNumber(s, n, copy);
  }
  bool String(const Ch* s, rapidjson::SizeType n, bool copy) { return target_->String(s, n, copy); }
  bool Key(const Ch* s, rapidjson::SizeType n, bool copy) { return target_->Key(s, n, copy); }
  bool StartObject() { return target_->StartObject(); }
  bool EndObject(rapidjson::SizeType members) { return target_->EndObject(members); }
  bool StartArray() { return target_->StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return target_->EndArray(elements); }

 protected:
  Target* target() const { return target_; }

 private:
  Target* const target_;
};

}  // namespace kvc::codec
