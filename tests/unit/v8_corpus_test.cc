// The V8 corpus of tests/fixtures/v8 (bytes written by the real Deno 2.9.6 and Node): every file
// must decode to the JSON view the manifest states by hand, re-encode to its own bytes, and its
// JSON view must encode back to a value with the same view (and to the same bytes unless the
// manifest says why not). See tests/fixtures/v8/README.md.
#include "testutil/v8_corpus.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "codec/v8/v8_json.h"
#include "codec/v8/v8_tree.h"
#include "testutil/hex.h"

namespace kvc::codec {
namespace {

using testutil::ToHex;

using Sample = testutil::V8Sample;
using testutil::ReadFile;

std::vector<Sample> LoadCorpus() { return testutil::LoadV8Corpus(); }

// A view Node's v8.serialize wrote as a host object: its buffer has no id of its own.
bool HasHostView(const V8Value& v) {
  if (v.kind == V8Kind::kArrayBufferView && v.items.size() == 1 &&
      v.items[0].kind == V8Kind::kArrayBuffer && v.items[0].id == kV8NoId) {
    return true;
  }
  for (const V8Value& item : v.items) {
    if (HasHostView(item)) return true;
  }
  for (const V8Property& p : v.properties) {
    if (HasHostView(p.value)) return true;
  }
  return false;
}

TEST(V8CorpusTest, CoversBothRuntimes) {
  const std::vector<Sample> samples = LoadCorpus();
  size_t deno = 0;
  size_t node = 0;
  for (const Sample& s : samples) (s.runtime == "deno" ? deno : node)++;
  EXPECT_GE(deno, 100u);
  EXPECT_GE(node, 100u);
}

TEST(V8CorpusTest, EverySampleDecodesToItsJsonAndRoundTrips) {
  size_t identical = 0;
  for (const Sample& s : LoadCorpus()) {
    SCOPED_TRACE(s.file);
    const KvValue stored{s.bytes, s.encoding};
    Result<std::string> json = KvValueToJson(stored);
    ASSERT_TRUE(json.ok()) << json.status().ToString();
    EXPECT_EQ(*json, s.json);
    if (s.encoding != ValueEncoding::kV8) {
      Result<KvValue> back = KvValueFromJson(s.json);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->encoding, s.encoding);
      EXPECT_EQ(back->data, s.bytes);
      continue;
    }
    const auto version = static_cast<uint8_t>(s.bytes[1]);
    Result<V8Value> tree = DecodeV8Value(s.bytes);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    const bool host_view = HasHostView(*tree);
    if (!s.json_refs.empty()) {
      Result<std::string> refs = V8ValueToJson(*tree, V8JsonOptions{.expand_shared = false});
      ASSERT_TRUE(refs.ok()) << refs.status().ToString();
      EXPECT_EQ(*refs, s.json_refs);
      // Without expansion, the view re-encodes to the very bytes.
      Result<KvValue> from_refs = KvValueFromJson(s.json_refs, version);
      ASSERT_TRUE(from_refs.ok()) << from_refs.status().ToString();
      if (!host_view) {
        EXPECT_EQ(ToHex(from_refs->data), ToHex(s.bytes));
      }
    }

    // Bytes -> tree -> bytes: identical, but for Node's host-object views (written as V8 views).
    Result<std::string> again = EncodeV8Value(*tree, version);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    if (host_view) {
      Result<std::string> json_again = KvValueToJson(KvValue{*again, ValueEncoding::kV8});
      ASSERT_TRUE(json_again.ok());
      EXPECT_EQ(*json_again, s.json);
    } else {
      EXPECT_EQ(ToHex(*again), ToHex(s.bytes));
    }

    // Format 16 and 15 differ only in the header for every value here.
    if (s.runtime == "deno" && !host_view) {
      Result<std::string> v15 = EncodeV8Value(*tree, 15);
      ASSERT_TRUE(v15.ok());
      EXPECT_EQ(ToHex(v15->substr(2)), ToHex(s.bytes.substr(2)));
    }

    // JSON -> bytes -> JSON is stable; the bytes are the runtime's unless the manifest says.
    Result<KvValue> from_json = KvValueFromJson(s.json, version);
    ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
    Result<std::string> json_round = KvValueToJson(*from_json);
    ASSERT_TRUE(json_round.ok());
    EXPECT_EQ(*json_round, s.json);
    const bool same = from_json->encoding == s.encoding && from_json->data == s.bytes;
    identical += same ? 1 : 0;
    if (!s.noncanonical.empty() || host_view) {
      if (!same) {
        std::cout << "[ non-canonical ] " << s.file << ": "
                  << (host_view ? "Node host-object view, written back as a V8 view"
                                : s.noncanonical)
                  << "\n";
      }
    } else {
      EXPECT_TRUE(same) << "JSON view re-encodes to " << ToHex(from_json->data);
    }
  }
  std::cout << "[ corpus ] " << identical << " samples re-encode from JSON byte for byte\n";
}

}  // namespace
}  // namespace kvc::codec
