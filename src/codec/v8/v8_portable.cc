#include "codec/v8/v8_portable.h"

#include <cstring>

#include "codec/v8/v8_tree.h"
#include "codec/v8/v8_wire.h"
#include "common/enum_names.h"

namespace kvc::codec {
namespace {

// Error fields in the one order current V8 reads (Deno 2.9's V8 refuses any other): the
// prototype tag, message, stack, cause. Node 20's V8 writes the cause before the stack. Clears the
// recorded layout of every error written otherwise (the encoder then writes this order) and
// returns whether there was one.
bool ReorderErrorFields(V8Value* v) {
  bool changed = false;
  if (v->kind == V8Kind::kError && !v->error_layout.empty()) {
    std::string readable;
    for (char c : v->error_layout) {
      if (c != v8error::kMessage && c != v8error::kStack && c != v8error::kCause) {
        readable.push_back(c);  // the prototype tag
      }
    }
    for (uint8_t tag : {v8error::kMessage, v8error::kStack, v8error::kCause}) {
      if (v->error_layout.find(static_cast<char>(tag)) != std::string::npos) {
        readable.push_back(static_cast<char>(tag));
      }
    }
    if (readable != v->error_layout) {
      v->error_layout.clear();
      changed = true;
    }
  }
  for (V8Value& item : v->items) changed = ReorderErrorFields(&item) || changed;
  for (V8Property& p : v->properties) changed = ReorderErrorFields(&p.value) || changed;
  return changed;
}

// Whether `body` (the bytes after the header) is a whole value that is one string or one of
// undefined, null, true, false: the most common values, which decode exactly when the string's
// payload ends the input (ReadV8StringPayload accepts every payload of the right length) and
// hold no buffer whose length format 16 writes wider. Such a value is re-headed without building
// its tree. Anything else (including padding or a count before the tag) answers false.
bool IsLoneStringOrConstant(std::string_view body) {
  V8Reader reader(body);
  uint8_t tag = 0;
  if (!reader.ReadTag(&tag)) return false;
  switch (tag) {
    case v8tag::kUndefined:
    case v8tag::kNull:
    case v8tag::kTrue:
    case v8tag::kFalse:
      return reader.done();
    case v8tag::kOneByteString:
    case v8tag::kTwoByteString:
    case v8tag::kUtf8String: {
      uint32_t length = 0;
      if (!reader.ReadVarint32(&length) || reader.remaining() != length) return false;
      return tag != v8tag::kTwoByteString || length % 2 == 0;
    }
    default:
      return false;
  }
}

std::optional<std::string> Done(V8PortableOutcome result, V8PortableOutcome* outcome,
                                std::optional<std::string> bytes = std::nullopt) {
  if (outcome != nullptr) *outcome = result;
  return bytes;
}

constexpr EnumName<V8PortableOutcome> kOutcomeNames[] = {
    {V8PortableOutcome::kUnchanged, "unchanged"},
    {V8PortableOutcome::kReheaded, "format_16_to_15"},
    {V8PortableOutcome::kRewritten, "rewritten"},
    {V8PortableOutcome::kKept, "kept"},
};

}  // namespace

const char* V8PortableOutcomeName(V8PortableOutcome outcome) {
  return NameIn(kOutcomeNames, outcome, "unknown");
}

bool IsV8Format16(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == v8tag::kVersion &&
         static_cast<uint8_t>(bytes[1]) == kV8FirstVersionWithWideLengths;
}

std::optional<std::string> PortableV8(std::string_view bytes, V8PortableOutcome* outcome) {
  using O = V8PortableOutcome;
  V8Reader header(bytes);
  uint32_t version = 0;
  if (!header.ReadHeader(&version)) return Done(O::kUnchanged, outcome);
  const std::string_view body = bytes.substr(header.position());
  const bool wide = version >= kV8FirstVersionWithWideLengths;
  // Without a `\` (host object) or `r` (error) byte, a value before format 16 needs no decoding.
  auto has = [&](uint8_t byte) { return std::memchr(body.data(), byte, body.size()) != nullptr; };
  if (!wide && !has(v8tag::kHostObject) && !has(v8tag::kError)) {
    return Done(O::kUnchanged, outcome);
  }

  auto rehead = [&] {
    std::string reheaded;
    reheaded.reserve(2 + body.size());
    AppendV8Header(kV8WriteVersion, &reheaded);
    reheaded.append(body);
    return Done(O::kReheaded, outcome, std::move(reheaded));
  };
  if (wide && IsLoneStringOrConstant(body)) return rehead();

  V8DecodeInfo info;
  Result<V8Value> tree = DecodeV8Value(bytes, {}, &info);
  if (!tree.ok()) return Done(wide ? O::kKept : O::kUnchanged, outcome);
  if (info.node_buffers > 0) return Done(O::kKept, outcome);

  // ReorderErrorFields changes the tree only where the value is rewritten anyway.
  const bool rewrite = info.node_host_views > 0 || ReorderErrorFields(&*tree);
  if (!rewrite) {
    if (!wide) return Done(O::kUnchanged, outcome);
    // Without wide lengths the bytes read as format 15 give the same tree (V8DecodeInfo; the
    // fuzzer decodes both to check): replace the version varint alone, whatever padding or
    // prefixes follow it.
    if (info.wide_lengths) return Done(O::kKept, outcome);
    return rehead();
  }

  Result<std::string> encoded = EncodeV8Value(*tree, kV8WriteVersion);
  if (!encoded.ok()) return Done(O::kKept, outcome);
  V8DecodeInfo again_info;
  Result<V8Value> again = DecodeV8Value(*encoded, {}, &again_info);
  if (!again.ok() || again_info.node_host_views != 0 || ReorderErrorFields(&*again) ||
      !V8ValueEqualsRenumbered(*tree, *again)) {
    return Done(O::kKept, outcome);
  }
  return Done(O::kRewritten, outcome, std::move(*encoded));
}

}  // namespace kvc::codec
