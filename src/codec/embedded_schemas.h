// The JSON Schemas of schemas/, embedded into the binary at build time (generated
// embedded_schemas.cc in the build tree).
#pragma once

#include <cstddef>

namespace kvc::codec {

struct EmbeddedFile {
  const char* name;     // file name, e.g. "metadata-exchange-request.schema.json"
  const char* content;  // full text
};

extern const EmbeddedFile kEmbeddedSchemas[];
extern const size_t kEmbeddedSchemaCount;

}  // namespace kvc::codec
