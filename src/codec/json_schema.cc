#include "codec/json_schema.h"

#include <rapidjson/stringbuffer.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "codec/embedded_schemas.h"
#include "codec/sax_forwarder.h"
#include "common/mutex.h"

namespace kvc::codec {
namespace {

// Compiled schema documents, built once on first use.
struct SchemaCache {
  Mutex mu;
  std::map<std::string, std::unique_ptr<rapidjson::SchemaDocument>, std::less<>> by_name
      KVC_GUARDED_BY(mu);
};

// The nearest double RapidJSON's hasher can take. Under an `enum` or `uniqueItems` rule, RapidJSON
// 1.1 hashes every value, and its hasher casts a double to a 64-bit integer (int64 if negative,
// else uint64): 1e30 or -1e30 would be undefined behaviour, and an attacker chooses the numbers.
// Clamping keeps the answer of every rule our schemas use: the clamped value is still a
// non-integer-typed double of the same sign, beyond every bound and enum member we write.
double HashableDouble(double d) {
  constexpr double kLowest = -9223372036854775808.0;  // -2^63: the last that fits int64
  static const double kHighest = std::nextafter(18446744073709551616.0, 0.0);  // below 2^64
  if (d < kLowest) return kLowest;
  if (d > kHighest) return kHighest;
  return d;
}

// Forwards a document to a validator, with doubles through HashableDouble and a NaN (which no
// parse produces, but a document built in code can hold) as null, so that it fails a number rule.
class ValidatorInput : public SaxForwarder<rapidjson::SchemaValidator> {
 public:
  using SaxForwarder::SaxForwarder;
  bool Double(double d) {
    return std::isnan(d) ? target()->Null() : target()->Double(HashableDouble(d));
  }
};

}  // namespace

bool AcceptsJson(rapidjson::SchemaValidator* validator, const rapidjson::Value& value) {
  ValidatorInput input(validator);
  return value.Accept(input);
}

std::string_view EmbeddedSchema(std::string_view file) {
  for (size_t i = 0; i < kEmbeddedSchemaCount; ++i) {
    if (file == kEmbeddedSchemas[i].name) return kEmbeddedSchemas[i].content;
  }
  return {};
}

const rapidjson::SchemaDocument* CompiledSchema(std::string_view file,
                                                std::string_view definition) {
  static SchemaCache cache;
  std::string name(file);
  if (!definition.empty()) {
    name.push_back('#');
    name.append(definition);
  }
  MutexLock lock(cache.mu);
  auto it = cache.by_name.find(name);
  if (it != cache.by_name.end()) return it->second.get();
  const std::string_view text = EmbeddedSchema(file);
  if (text.empty()) return nullptr;
  rapidjson::Document d;
  if (!ParseJsonDocument(text, kDefaultMaxJsonDepth, &d, nullptr) || !d.IsObject()) return nullptr;
  if (!definition.empty()) {
    if (!d.HasMember("definitions")) return nullptr;
    const rapidjson::Value& defs = d["definitions"];
    if (!defs.IsObject() || !defs.HasMember(std::string(definition).c_str())) return nullptr;
    // A root that is a reference to the definition, with the file's definitions beside it.
    rapidjson::Document root(rapidjson::kObjectType);
    const std::string ref = "#/definitions/" + std::string(definition);
    root.AddMember("$ref", rapidjson::Value(ref.c_str(), root.GetAllocator()), root.GetAllocator());
    root.AddMember("definitions", rapidjson::Value(defs, root.GetAllocator()), root.GetAllocator());
    d.Swap(root);
  }
  auto doc = std::make_unique<rapidjson::SchemaDocument>(d);
  const rapidjson::SchemaDocument* raw = doc.get();
  cache.by_name.emplace(std::move(name), std::move(doc));
  return raw;
}

Status ValidateJson(const rapidjson::SchemaDocument& schema, const rapidjson::Value& value,
                    std::string_view what) {
  rapidjson::SchemaValidator v(schema);
  if (AcceptsJson(&v, value)) return Status::Ok();
  rapidjson::StringBuffer path;
  v.GetInvalidDocumentPointer().StringifyUriFragment(path);
  std::string where = path.GetString();
  if (where == "#") where = "the top level";
  return InvalidArgument(std::string(what) + " does not match the expected schema at " + where +
                         " (rule '" + v.GetInvalidSchemaKeyword() + "').");
}

}  // namespace kvc::codec
