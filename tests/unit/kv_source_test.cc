// The pieces of `kvconnect migrate --from URL` that need no server: the URLs it accepts (what one
// gives Deno.openKv, Deploy's shape included), the /connect fallback, the metadata answer turned
// into data-path calls (loadgen/metadata.h, shared with bench), the digest of entries, and the
// admin JSON it sends to and reads from a destination server (bytes kept both ways).
#include "cli/kv_source.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/import_sink.h"
#include "codec/admin_json.h"
#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "loadgen/metadata.h"

namespace kvc::cli {
namespace {

TEST(KvConnectUrl, AcceptsWhatDenoOpenKvTakes) {
  auto bare = ParseKvConnectUrl("http://127.0.0.1:4512");
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(bare->scheme, "http");
  EXPECT_EQ(bare->port, 4512);
  EXPECT_EQ(bare->path, "/");  // Deno POSTs to http://h:4512/

  auto named = ParseKvConnectUrl("https://kv.example.com/databases/sales/connect");
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->tls());
  EXPECT_EQ(named->port, 443);
  EXPECT_EQ(named->path, "/databases/sales/connect");

  auto prefix = ParseKvConnectUrl("https://kv.example.com/databases/sales");
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(prefix->path, "/databases/sales");

  auto deploy = ParseKvConnectUrl(
      "https://api.deno.com/v2/databases/6c0e3d9a-7f43-4c5e-9a3b-2b1f0f3c9d11/connect");
  ASSERT_TRUE(deploy.ok());
  EXPECT_EQ(deploy->host, "api.deno.com");
  EXPECT_EQ(deploy->path, "/v2/databases/6c0e3d9a-7f43-4c5e-9a3b-2b1f0f3c9d11/connect");

  auto query = ParseKvConnectUrl("http://[::1]:8080/databases/a/connect?x=1#f");
  ASSERT_TRUE(query.ok());
  EXPECT_EQ(query->host, "::1");
  EXPECT_EQ(query->path, "/databases/a/connect");
}

TEST(KvConnectUrl, RefusesOtherThings) {
  for (const char* bad : {"sqlite:./data", "ftp://h/x", "h:4512", "", "http://", "http://h:99999",
                          "https://user:pw@h/"}) {
    auto u = ParseKvConnectUrl(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(IsHttpUrl("HTTPS://h"));
  EXPECT_FALSE(IsHttpUrl("postgres://h/db"));
  EXPECT_FALSE(IsHttpUrl("ndjson:-"));
}

TEST(KvConnectUrl, ConnectFallbackOnlyForTheShortForms) {
  EXPECT_EQ(ConnectPathFallback("/databases/sales"), "/databases/sales/connect");
  EXPECT_EQ(ConnectPathFallback("/v2/databases/abc"), "/v2/databases/abc/connect");
  EXPECT_EQ(ConnectPathFallback("/databases/sales/connect"), std::nullopt);
  EXPECT_EQ(ConnectPathFallback("/"), std::nullopt);
  EXPECT_EQ(ConnectPathFallback("/databases/"), std::nullopt);
  EXPECT_EQ(ConnectPathFallback("/other/databases/x"), std::nullopt);
}

TEST(MetadataAnswer, ResolvesTheStrongEndpointAndBuildsVersionHeaders) {
  auto url = client::ParseUrl("https://api.deno.com/v2/databases/abc/connect");
  ASSERT_TRUE(url.ok());
  const std::string body =
      R"({"version":3,"databaseId":"6c0e3d9a-7f43-4c5e-9a3b-2b1f0f3c9d11","endpoints":[)"
      R"({"url":"https://eventual.example/x","consistency":"eventual"},)"
      R"({"url":"/v2/data","consistency":"strong"}],"token":"t0k","expiresAt":"2030-01-01T00:00:00Z"})";
  auto path = loadgen::DataPathFromMetadata(*url, body, "ua");
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(path->endpoint.ToString(), "https://api.deno.com:443/v2/data");
  EXPECT_EQ(path->read_path, "/v2/data/snapshot_read");
  EXPECT_EQ(path->version, 3);
  bool auth = false;
  bool version = false;
  for (const auto& [name, value] : *path->headers) {
    auth = auth || (name == "authorization" && value == "Bearer t0k");
    version = version || (name == "x-denokv-version" && value == "3");
  }
  EXPECT_TRUE(auth);
  EXPECT_TRUE(version);

  EXPECT_FALSE(loadgen::DataPathFromMetadata(*url, "<!DOCTYPE html><html></html>", "ua").ok());
  EXPECT_FALSE(
      loadgen::DataPathFromMetadata(
          *url,
          R"({"version":3,"databaseId":"6c0e3d9a-7f43-4c5e-9a3b-2b1f0f3c9d11","endpoints":[)"
          R"({"url":"/e","consistency":"eventual"}],"token":"t","expiresAt":"2030-01-01T00:00:00Z"})",
          "ua")
          .ok());
}

TEST(EntryHasher, DigestsKeysEncodingsAndValueBytes) {
  const Entry a{
      "\x02"
      "a\x00",
      "\xff\x0f\x22\x01x", ValueEncoding::kV8, 5};
  const Entry b{
      "\x02"
      "b\x00",
      std::string(8, '\0'), ValueEncoding::kLe64, 6};
  auto digest = [](std::vector<Entry> entries) {
    EntryHasher h(DigestForm::kEntries);
    for (const Entry& e : entries) EXPECT_TRUE(h.Add(e).ok());
    auto d = h.Finish();
    EXPECT_TRUE(d.ok());
    return *d;
  };
  const EntryDigest both = digest({a, b});
  EXPECT_EQ(both.entries, 2);
  EXPECT_EQ(both.bytes,
            static_cast<int64_t>(a.key.size() + a.value.size() + b.key.size() + b.value.size()));
  EXPECT_EQ(both.sha256.size(), 64u);
  // Versions are not digested (a server destination gives new ones)...
  Entry a_later = a;
  a_later.version = 99;
  EXPECT_EQ(digest({a_later, b}).sha256, both.sha256);
  // ...encodings and bytes are.
  Entry a_bytes = a;
  a_bytes.encoding = ValueEncoding::kBytes;
  EXPECT_NE(digest({a_bytes, b}).sha256, both.sha256);
  Entry a_other = a;
  a_other.value.back() = 'y';
  EXPECT_NE(digest({a_other, b}).sha256, both.sha256);
  // Length prefixes: moving a byte from key to value changes the digest.
  EXPECT_NE(digest({Entry{"ab", "c", ValueEncoding::kBytes, 0}}).sha256,
            digest({Entry{"a", "bc", ValueEncoding::kBytes, 0}}).sha256);
}

TEST(AdminJson, ExactImportLineKeepsV8BytesAndRawKeys) {
  // A format-16 V8 string (Deno >= 2.8 writes FF 10) and a key that is no Deno key: the import
  // API must store exactly these bytes, not a rewrite of the JSON view.
  const Entry v8{std::string("\x99\x61\x62\x63", 4), std::string("\xff\x10\x22\x02hi", 6),
                 ValueEncoding::kV8, 7};
  auto line = codec::AdminExactImportLine(v8);
  ASSERT_TRUE(line.ok()) << line.status().message();
  ASSERT_EQ(line->back(), '\n');
  EXPECT_NE(line->find(R"("type":"v8")"), std::string::npos) << *line;
  auto back = codec::EntryFromJson(line->substr(0, line->size() - 1));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->key, v8.key);
  EXPECT_EQ(back->value, v8.value);
  EXPECT_EQ(back->encoding, ValueEncoding::kV8);

  const Entry u64{codec::EncodeKey({codec::KeyPart::String("n")}),
                  std::string("\x05\0\0\0\0\0\0\0", 8), ValueEncoding::kLe64, 8};
  const Entry bytes{codec::EncodeKey({codec::KeyPart::String("b")}), std::string("\x00\x01", 2),
                    ValueEncoding::kBytes, 9};
  for (const Entry& e : {u64, bytes}) {
    auto l = codec::AdminExactImportLine(e);
    ASSERT_TRUE(l.ok());
    auto b = codec::EntryFromJson(l->substr(0, l->size() - 1));
    ASSERT_TRUE(b.ok()) << *l;
    EXPECT_EQ(b->value, e.value);
    EXPECT_EQ(b->encoding, e.encoding);
  }
}

TEST(AdminJson, EntryListAnswerRoundTripsRawEntries) {
  const std::vector<Entry> entries = {
      {std::string("\x99\x61", 2), std::string("\xff\x0f\x22\x01x", 5), ValueEncoding::kV8, 1},
      {codec::EncodeKey({codec::KeyPart::String("z")}), std::string(8, '\x01'),
       ValueEncoding::kLe64, 2},
  };
  auto json = codec::AdminEntryListJson(entries, /*more=*/true, /*raw=*/true);
  ASSERT_TRUE(json.ok());
  auto a = codec::ParseAdminEntryListAnswer(*json);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->entries.size(), 2u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(a->entries[i].key, entries[i].key);
    EXPECT_EQ(a->entries[i].value, entries[i].value);
    EXPECT_EQ(a->entries[i].encoding, entries[i].encoding);
  }
  EXPECT_FALSE(a->cursor.empty());
  auto last = codec::AdminEntryListJson(entries, /*more=*/false, /*raw=*/true);
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(codec::ParseAdminEntryListAnswer(*last)->cursor.empty());
  // A value whose JSON view holds a lone surrogate (a JS string may): still read.
  const std::string lone =
      "{\"entries\":[{\"key\":[{\"type\":\"string\",\"value\":\"k\"}],"
      "\"value\":{\"type\":\"string\",\"value\":\"x\\ud800\\\\ud800y\"},"
      "\"versionstamp\":\"00000000000000010000\",\"raw\":{\"encoding\":\"v8\","
      "\"bytes\":\"_w8\"}}],\"cursor\":null}";
  auto with_lone = codec::ParseAdminEntryListAnswer(lone);
  ASSERT_TRUE(with_lone.ok()) << with_lone.status().message();
  ASSERT_EQ(with_lone->entries.size(), 1u);
  EXPECT_EQ(with_lone->entries[0].value, std::string("\xff\x0f", 2));
  // Without raw members the bytes are unknown: refused, not guessed.
  auto plain = codec::AdminEntryListJson(entries, false, /*raw=*/false);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(codec::ParseAdminEntryListAnswer(*plain).ok());
}

}  // namespace
}  // namespace kvc::cli
