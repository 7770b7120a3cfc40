// The V8 corpus of tests/fixtures/v8 (bytes written by the real Deno 2.9.6 and Node 20; see its
// README), as the unit tests load it: manifest.json's samples with their bytes.
// REQUIRES: KVC_FIXTURES_DIR is defined (tests/CMakeLists.txt sets it).
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "storage/kv_types.h"

namespace kvc::testutil {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct V8Sample {
  std::string file;     // e.g. "node_v8/view_int8.bin"
  std::string dir;      // "deno", "node_v8" or "node_raw"
  std::string name;     // "view_int8"
  std::string runtime;  // "deno" or "node"
  ValueEncoding encoding = ValueEncoding::kV8;
  std::string json;          // the JSON view, written by hand
  std::string json_refs;     // the view with shared objects as refs, where it differs
  std::string noncanonical;  // why the JSON view does not encode to the same bytes, if so
  std::string bytes;
};

inline std::vector<V8Sample> LoadV8Corpus() {
  const std::string dir = std::string(KVC_FIXTURES_DIR) + "/v8/";
  rapidjson::Document manifest;
  const std::string text = ReadFile(dir + "manifest.json");
  manifest.Parse(text.data(), text.size());
  EXPECT_FALSE(manifest.HasParseError());
  std::vector<V8Sample> samples;
  for (const auto& entry : manifest["samples"].GetArray()) {
    V8Sample s;
    s.file = entry["file"].GetString();
    s.dir = s.file.substr(0, s.file.find('/'));
    s.name = s.file.substr(s.dir.size() + 1, s.file.size() - s.dir.size() - 5);
    s.runtime = entry["runtime"].GetString();
    s.encoding = static_cast<ValueEncoding>(entry["encoding"].GetInt());
    s.json = entry["json"].GetString();
    if (entry.HasMember("jsonRefs")) s.json_refs = entry["jsonRefs"].GetString();
    if (entry.HasMember("noncanonical")) s.noncanonical = entry["noncanonical"].GetString();
    s.bytes = ReadFile(dir + s.file);
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace kvc::testutil
