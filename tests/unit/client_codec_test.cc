// The client side of the data-path codec, checked against the server side (datapath_codec.h),
// the reference's wire test vectors (reference §2.7, §5), and the metadata response parser.
#include "codec/client_codec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "codec/datapath_codec.h"
#include "codec/key_codec.h"
#include "codec/metadata_json.h"
#include "codec/v8/v8_value.h"
#include "codec/v8/v8_wire.h"
#include "codec/versionstamp.h"
#include "common/bytes.h"
#include "datapath.pb.h"
#include "testutil/hex.h"

namespace kvc::codec {
namespace {

using testutil::FromHex;
using testutil::ToHex;

// Up to `max` random bytes.
std::string RandomBytes(std::mt19937_64& rng, size_t max) {
  std::string b(rng() % (max + 1), '\0');
  for (char& c : b) c = static_cast<char>(rng());
  return b;
}

// A message as written and changed at random: one bit flipped, cut short, a byte appended, and
// an unknown field (varint, fixed64, bytes, fixed32 or a group) put before it.
std::vector<std::pair<const char*, std::string>> Variants(const std::string& body,
                                                          std::mt19937_64& rng) {
  std::string flipped = body;
  if (!flipped.empty()) flipped[rng() % flipped.size()] ^= static_cast<char>(1 << (rng() % 8));
  const std::string unknown[] = {std::string("\x28\x05", 2), "\x31" + std::string(8, 'x'),
                                 std::string("\x3a\x01z", 3), std::string("\x45zzzz", 5),
                                 std::string("\x4b\x4c", 2)};
  return {{"as written", body},
          {"flipped", flipped},
          {"cut", body.substr(0, body.empty() ? 0 : rng() % body.size())},
          {"grown", body + static_cast<char>(rng())},
          {"unknown field", unknown[rng() % std::size(unknown)] + body}};
}

TEST(ClientCodec, SnapshotReadRequestMatchesDenoBytes) {
  // Deno's kv.get(["a"]) (reference §2.7).
  const std::string key = EncodeKey({KeyPart::String("a")});
  const std::string body = EncodeSnapshotReadRequest({ReadRange{key, key + '\0', 1, false}});
  EXPECT_EQ(ToHex(body), "0A 0D 0A 03 02 61 00 12 04 02 61 00 00 18 01");
}

TEST(ClientCodec, SnapshotReadRequestRoundTripsThroughTheServerDecoder) {
  const std::vector<ReadRange> ranges = {
      {EncodeKey({KeyPart::String("bench"), KeyPart::Int(1)}), std::string("\xff", 1), 100, false},
      {"", "z", 1000, true},
  };
  auto decoded = DecodeSnapshotRead(EncodeSnapshotReadRequest(ranges));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), 2u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ((*decoded)[i].start, ranges[i].start);
    EXPECT_EQ((*decoded)[i].end, ranges[i].end);
    EXPECT_EQ((*decoded)[i].limit, ranges[i].limit);
    EXPECT_EQ((*decoded)[i].reverse, ranges[i].reverse);
  }
}

// The server writes its read and write answers by hand (datapath_codec.cc); they must be the
// very bytes the generated protobuf code writes for the same message, over random contents:
// empty and long keys and values (lengths across one- and two-byte varints), every encoding,
// versions from 0 up, empty ranges, no ranges, both consistencies, failed checks large and none.
TEST(ClientCodec, HandWrittenAnswersEqualTheProtobufLibrarys) {
  namespace pb = com::deno::kv::datapath;
  std::mt19937_64 rng(20261129);
  auto bytes = [&rng](size_t max) { return RandomBytes(rng, max); };
  const ValueEncoding encodings[] = {ValueEncoding::kV8, ValueEncoding::kLe64,
                                     ValueEncoding::kBytes};
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::vector<Entry>> ranges(rng() % 4);
    pb::SnapshotReadOutput ref;
    for (auto& r : ranges) {
      auto* ro = ref.add_ranges();
      r.resize(rng() % 4);
      for (Entry& e : r) {
        e.key = bytes(rng() % 3 == 0 ? 300 : 20);
        e.value = bytes(rng() % 3 == 0 ? 70000 : 150);
        e.encoding = encodings[rng() % 3];
        e.version = static_cast<int64_t>(rng() >> (rng() % 64));
        auto* v = ro->add_values();
        v->set_key(e.key);
        v->set_value(e.value);
        v->set_encoding(static_cast<pb::ValueEncoding>(e.encoding));
        const Versionstamp vs = VersionToVersionstamp(e.version);
        v->set_versionstamp(reinterpret_cast<const char*>(vs.data()), vs.size());
      }
    }
    const bool strong = rng() % 2 == 0;
    ref.set_read_is_strongly_consistent(strong);
    ref.set_status(pb::SR_SUCCESS);
    ASSERT_EQ(EncodeSnapshotReadOutput(ranges, strong), ref.SerializeAsString()) << round;

    CommitResult c;
    pb::AtomicWriteOutput wref;
    c.ok = rng() % 2 == 0;
    if (c.ok) {
      c.version = static_cast<int64_t>(rng() >> (rng() % 64));
      const Versionstamp vs = VersionToVersionstamp(c.version);
      wref.set_status(pb::AW_SUCCESS);
      wref.set_versionstamp(reinterpret_cast<const char*>(vs.data()), vs.size());
    } else {
      wref.set_status(pb::AW_CHECK_FAILURE);
      c.failed_checks.resize(rng() % 4);
      for (uint32_t& i : c.failed_checks) {
        i = static_cast<uint32_t>(rng() % 3 == 0 ? rng() : rng() % 200);
        wref.add_failed_checks(i);
      }
    }
    ASSERT_EQ(EncodeAtomicWriteOutput(c), wref.SerializeAsString()) << round;
  }
}

// DecodeSnapshotRead reads the shape clients send by hand and everything else with the protobuf
// library. Over random messages the library wrote, and those bytes changed at random (flipped,
// cut, grown, with unknown fields, longer varints), the hand reader either gives up or reads
// exactly what the library reads, and DecodeSnapshotRead always answers as the library does.
TEST(ClientCodec, FastSnapshotReadDecoderAgreesWithTheProtobufLibrary) {
  namespace pb = com::deno::kv::datapath;
  std::mt19937_64 rng(20261130);
  auto bytes = [&rng](size_t max) { return RandomBytes(rng, max); };
  auto same = [](const std::vector<ReadRange>& a, const std::vector<ReadRange>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].start != b[i].start || a[i].end != b[i].end || a[i].limit != b[i].limit ||
          a[i].reverse != b[i].reverse) {
        return false;
      }
    }
    return true;
  };
  auto agree = [&](const std::string& body, const char* what, int round) {
    const auto lib = DecodeSnapshotReadWithLibrary(body);
    std::vector<ReadRange> fast;
    if (DecodeSnapshotReadFast(body, &fast)) {
      EXPECT_TRUE(lib.ok()) << what << " " << round << " " << ToHex(body);
      if (lib.ok()) {
        EXPECT_TRUE(same(fast, *lib)) << what << " " << round << " " << ToHex(body);
      }
    }
    const auto both = DecodeSnapshotRead(body);
    EXPECT_EQ(both.ok(), lib.ok()) << what << " " << round;
    if (both.ok() && lib.ok()) {
      EXPECT_TRUE(same(*both, *lib)) << what << " " << round;
    }
  };
  const int32_t limits[] = {0, 1, 10, 127, 128, 1000, INT32_MAX, -1, INT32_MIN};
  int fast_taken = 0;
  for (int round = 0; round < 3000; ++round) {
    pb::SnapshotRead msg;
    const int n = static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      auto* r = msg.add_ranges();
      if (rng() % 4 != 0) r->set_start(bytes(rng() % 3 == 0 ? 300 : 40));
      if (rng() % 4 != 0) r->set_end(bytes(rng() % 3 == 0 ? 300 : 40));
      if (rng() % 4 != 0) r->set_limit(limits[rng() % std::size(limits)]);
      if (rng() % 2 == 0) r->set_reverse(true);
    }
    const std::string body = msg.SerializeAsString();
    std::vector<ReadRange> fast;
    ASSERT_TRUE(DecodeSnapshotReadFast(body, &fast)) << round << " " << ToHex(body);
    ++fast_taken;
    for (const auto& [what, variant] : Variants(body, rng)) agree(variant, what, round);
  }
  EXPECT_EQ(fast_taken, 3000);
  // Forms the library reads and the hand reader leaves to it: a tag in two bytes, a varint
  // longer than needed, a limit as a 64-bit varint beyond 32 bits, a wire type the schema does
  // not give the field.
  for (const char* hex : {"8a0000", "0a03188100", "0a0b18ffffffffffffffffff01", "0a02200a",
                          "0a0218ff", "0a05080102ff"}) {
    agree(FromHex(hex), "hand-made", 0);
  }
  std::vector<ReadRange> fast;
  EXPECT_FALSE(DecodeSnapshotReadFast(FromHex("0a03188100"), &fast));  // 0x81 0x00: long form
  const auto lib = DecodeSnapshotReadWithLibrary(FromHex("0a03188100"));
  ASSERT_TRUE(lib.ok());
  EXPECT_EQ((*lib)[0].limit, 1);
  // What Deno 2.9.6 sends for a get, a getMany of 10 and a list: all taken by the hand reader.
  for (const char* name :
       {"snapshot_read_get", "snapshot_read_getmany10", "snapshot_read_list100"}) {
    std::ifstream f(std::string(KVC_FIXTURES_DIR) + "/requests/" + name + ".bin", std::ios::binary);
    const std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(body.empty()) << name;
    EXPECT_TRUE(DecodeSnapshotReadFast(body, &fast)) << name;
    agree(body, name, 0);
  }
}

// The same for atomic writes: checks and mutations are read by hand, the answer (the write or
// the first error: unknown kinds or encodings, a missing value, a KvU64 of the wrong size) is
// always the library's, over random writes as the library wrote them and changed at random.
TEST(ClientCodec, FastAtomicWriteDecoderAgreesWithTheProtobufLibrary) {
  namespace pb = com::deno::kv::datapath;
  std::mt19937_64 rng(20261131);
  auto bytes = [&rng](size_t max) { return RandomBytes(rng, max); };
  auto text = [](const AtomicWrite& w) {  // everything a write holds, comparable
    std::string t;
    for (const Check& c : w.checks) t += "C" + ToHex(c.key) + "/" + ToHex(c.versionstamp) + ";";
    for (const Mutation& m : w.mutations) {
      t += "M" + ToHex(m.key) + "/" + std::to_string(static_cast<int>(m.type)) + "/" +
           ToHex(m.value.data) + "/" + std::to_string(static_cast<int>(m.value.encoding)) + "/" +
           std::to_string(m.expire_at_ms) + "/" + ToHex(m.sum_min) + "/" + ToHex(m.sum_max) + "/" +
           (m.sum_clamp ? "1" : "0") + ";";
    }
    for (const Enqueue& e : w.enqueues) t += "E" + ToHex(e.payload) + ";";
    return t;
  };
  auto answer = [&](const Result<AtomicWrite>& r) {
    return r.ok() ? "ok " + text(*r) : "error " + r.status().ToString();
  };
  int fast_taken = 0;
  int fast_errors = 0;
  auto agree = [&](const std::string& body, const char* what, int round) {
    const std::string lib = answer(DecodeAtomicWriteWithLibrary(body));
    if (auto fast = DecodeAtomicWriteFast(body)) {
      EXPECT_EQ(answer(*fast), lib) << what << " " << round << " " << ToHex(body);
    }
    EXPECT_EQ(answer(DecodeAtomicWrite(body)), lib) << what << " " << round;
  };
  const int32_t types[] = {1, 1, 1, 2, 3, 4, 5, 9, 0, 6, 77, -1};
  const int32_t encodings[] = {1, 1, 2, 3, 0, 4, -5};
  for (int round = 0; round < 3000; ++round) {
    pb::AtomicWrite msg;
    const int checks = static_cast<int>(rng() % 3);
    for (int i = 0; i < checks; ++i) {
      auto* c = msg.add_checks();
      c->set_key(bytes(40));
      if (rng() % 2 == 0) c->set_versionstamp(bytes(10));
    }
    const int mutations = static_cast<int>(rng() % 4);
    for (int i = 0; i < mutations; ++i) {
      auto* m = msg.add_mutations();
      m->set_key(bytes(rng() % 3 == 0 ? 300 : 40));
      m->set_mutation_type(static_cast<pb::MutationType>(types[rng() % std::size(types)]));
      if (rng() % 8 != 0) {
        auto* v = m->mutable_value();
        const int32_t enc = encodings[rng() % std::size(encodings)];
        v->set_encoding(static_cast<pb::ValueEncoding>(enc));
        v->set_data(enc == 2 && rng() % 4 != 0 ? bytes(0) + std::string(8, 'u')
                                               : bytes(rng() % 3 == 0 ? 2000 : 30));
      }
      if (rng() % 3 == 0) m->set_expire_at_ms(static_cast<int64_t>(rng() >> (rng() % 64)) - 5);
      if (rng() % 4 == 0) m->set_sum_min(bytes(12));
      if (rng() % 4 == 0) m->set_sum_max(bytes(12));
      if (rng() % 4 == 0) m->set_sum_clamp(true);
    }
    const bool enqueue = rng() % 6 == 0;
    if (enqueue) msg.add_enqueues()->set_payload(bytes(20));
    const std::string body = msg.SerializeAsString();
    auto fast = DecodeAtomicWriteFast(body);
    EXPECT_EQ(fast.has_value(), !enqueue) << round << " " << ToHex(body);
    if (fast) {
      ++fast_taken;
      fast_errors += fast->ok() ? 0 : 1;
    }
    for (const auto& [what, variant] : Variants(body, rng)) agree(variant, what, round);
    // A value given twice: the library merges the two, and so must the hand reader.
    if (mutations > 0) {
      pb::Mutation extra;
      extra.mutable_value()->set_data(bytes(9));
      const std::string inner = msg.mutations(0).SerializeAsString() + extra.SerializeAsString();
      std::string framed(1, '\x12');
      AppendVarint64(inner.size(), &framed);
      agree(framed + inner, "value twice", round);
    }
  }
  EXPECT_GT(fast_taken, 2000);
  EXPECT_GT(fast_errors, 100);  // the errors, too, came from the hand reader's path
  // What Deno 2.9.6 sends for a set, a checked set and a sum: all taken by the hand reader.
  for (const char* name : {"atomic_write_set", "atomic_write_check_set", "atomic_write_sum"}) {
    std::ifstream f(std::string(KVC_FIXTURES_DIR) + "/requests/" + name + ".bin", std::ios::binary);
    const std::string body((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(body.empty()) << name;
    auto fast = DecodeAtomicWriteFast(body);
    ASSERT_TRUE(fast.has_value()) << name;
    EXPECT_TRUE(fast->ok()) << name << " " << fast->status().ToString();
    agree(body, name, 0);
  }
}

TEST(ClientCodec, SnapshotReadOutputRoundTrip) {
  const Entry a{EncodeKey({KeyPart::String("a")}), EncodeV8String("hello"), ValueEncoding::kV8, 7};
  const Entry b{EncodeKey({KeyPart::String("b")}), EncodeLe64(42), ValueEncoding::kLe64,
                int64_t{1} << 40};
  auto out = DecodeSnapshotReadOutput(EncodeSnapshotReadOutput({{a, b}, {}}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->status, ReadStatus::kSuccess);
  EXPECT_TRUE(out->read_is_strongly_consistent);
  EXPECT_FALSE(out->read_disabled);
  ASSERT_EQ(out->ranges.size(), 2u);
  ASSERT_EQ(out->ranges[0].size(), 2u);
  EXPECT_TRUE(out->ranges[1].empty());
  EXPECT_EQ(out->ranges[0][0].key, a.key);
  EXPECT_EQ(out->ranges[0][0].value, a.value);
  EXPECT_EQ(out->ranges[0][0].encoding, ValueEncoding::kV8);
  EXPECT_EQ(out->ranges[0][0].version, 7);
  EXPECT_EQ(out->ranges[0][1].encoding, ValueEncoding::kLe64);
  EXPECT_EQ(DecodeLe64(out->ranges[0][1].value), 42u);
  EXPECT_EQ(out->ranges[0][1].version, int64_t{1} << 40);
}

TEST(ClientCodec, SnapshotReadOutputVectors) {
  // "Not found" reply of a v3 server (reference §2.7).
  auto empty = DecodeSnapshotReadOutput(FromHex("0a 00 20 01 40 01"));
  ASSERT_TRUE(empty.ok());
  ASSERT_EQ(empty->ranges.size(), 1u);
  EXPECT_TRUE(empty->ranges[0].empty());
  EXPECT_EQ(empty->status, ReadStatus::kSuccess);
  // Status omitted: the decoder reports it, the caller judges it.
  auto unspecified = DecodeSnapshotReadOutput(FromHex("0a 00 20 01"));
  ASSERT_TRUE(unspecified.ok());
  EXPECT_EQ(unspecified->status, ReadStatus::kUnspecified);
  auto disabled = DecodeSnapshotReadOutput(FromHex("10 01 40 02"));
  ASSERT_TRUE(disabled.ok());
  EXPECT_TRUE(disabled->read_disabled);
  EXPECT_EQ(disabled->status, ReadStatus::kReadDisabled);
}

TEST(ClientCodec, SnapshotReadOutputRejectsBadEntries) {
  EXPECT_FALSE(DecodeSnapshotReadOutput(FromHex("0a 05 0a 03")).ok());  // truncated
  // An entry with a 2-byte versionstamp.
  EXPECT_FALSE(DecodeSnapshotReadOutput(FromHex("0a 0b 0a 09 0a 01 61 18 01 22 02 00 01")).ok());
  // An entry with an unknown value encoding (7).
  const std::string stamp = "22 0a 00 00 00 00 00 00 00 01 00 00";
  EXPECT_FALSE(DecodeSnapshotReadOutput(FromHex("0a 13 0a 11 0a 01 61 18 07 " + stamp)).ok());
  // A KvU64 value that is not 8 bytes.
  EXPECT_FALSE(
      DecodeSnapshotReadOutput(FromHex("0a 16 0a 14 0a 01 61 12 01 05 18 02 " + stamp)).ok());
  EXPECT_TRUE(DecodeSnapshotReadOutput(FromHex("0a 13 0a 11 0a 01 61 18 01 " + stamp)).ok());
}

TEST(ClientCodec, AtomicWriteRequestRoundTripsThroughTheServerDecoder) {
  AtomicWrite w;
  const std::string counter = EncodeKey({KeyPart::String("bench"), KeyPart::String("counter")});
  const std::string hot =
      EncodeKey({KeyPart::String("bench"), KeyPart::String("hot"), KeyPart::Int(3)});
  w.checks.push_back(Check{hot, VersionstampToBytes(VersionToVersionstamp(99))});
  w.checks.push_back(Check{counter, ""});
  w.mutations.push_back(
      Mutation{hot, MutationType::kSet, {EncodeV8String("v"), ValueEncoding::kV8}});
  w.mutations.push_back(
      Mutation{counter, MutationType::kSum, {EncodeLe64(1), ValueEncoding::kLe64}});
  Mutation del{hot, MutationType::kDelete, {}};
  w.mutations.push_back(del);
  Mutation expiring{counter, MutationType::kSet, {"raw", ValueEncoding::kBytes}};
  expiring.expire_at_ms = 1234567890123;
  w.mutations.push_back(expiring);
  Mutation v8sum{counter, MutationType::kSum, {EncodeV8Number(1.5), ValueEncoding::kV8}};
  v8sum.sum_min = EncodeV8Number(0);
  v8sum.sum_max = EncodeV8Number(10);
  v8sum.sum_clamp = true;
  w.mutations.push_back(v8sum);
  Enqueue e;
  e.payload = "p";
  e.deadline_ms = 5;
  e.keys_if_undelivered = {counter};
  e.backoff_schedule = {100, 200};
  w.enqueues.push_back(e);

  auto decoded = DecodeAtomicWrite(EncodeAtomicWriteRequest(w));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->checks.size(), 2u);
  EXPECT_EQ(decoded->checks[0].key, hot);
  EXPECT_EQ(decoded->checks[0].versionstamp, w.checks[0].versionstamp);
  EXPECT_EQ(decoded->checks[1].versionstamp, "");
  ASSERT_EQ(decoded->mutations.size(), w.mutations.size());
  for (size_t i = 0; i < w.mutations.size(); ++i) {
    SCOPED_TRACE(i);
    const Mutation& want = w.mutations[i];
    const Mutation& got = decoded->mutations[i];
    EXPECT_EQ(got.key, want.key);
    EXPECT_EQ(got.type, want.type);
    EXPECT_EQ(got.expire_at_ms, want.expire_at_ms);
    EXPECT_EQ(got.sum_min, want.sum_min);
    EXPECT_EQ(got.sum_max, want.sum_max);
    EXPECT_EQ(got.sum_clamp, want.sum_clamp);
    if (want.type != MutationType::kDelete) {
      EXPECT_EQ(got.value.data, want.value.data);
      EXPECT_EQ(got.value.encoding, want.value.encoding);
    }
  }
  ASSERT_EQ(decoded->enqueues.size(), 1u);
  EXPECT_EQ(decoded->enqueues[0].payload, "p");
  EXPECT_EQ(decoded->enqueues[0].deadline_ms, 5);
  EXPECT_EQ(decoded->enqueues[0].keys_if_undelivered, e.keys_if_undelivered);
  EXPECT_EQ(decoded->enqueues[0].backoff_schedule, e.backoff_schedule);
}

TEST(ClientCodec, SumMutationWireBytes) {
  // M_SUM of KvU64 1 on key 02 61 00: key, value {data = 8 bytes LE, encoding VE_LE64}, type 3.
  AtomicWrite w;
  w.mutations.push_back(Mutation{EncodeKey({KeyPart::String("a")}),
                                 MutationType::kSum,
                                 {EncodeLe64(1), ValueEncoding::kLe64}});
  EXPECT_EQ(ToHex(EncodeAtomicWriteRequest(w)),
            "12 15 0A 03 02 61 00 12 0C 0A 08 01 00 00 00 00 00 00 00 10 02 18 03");
}

TEST(ClientCodec, AtomicWriteOutputRoundTrip) {
  auto ok = DecodeAtomicWriteOutput(EncodeAtomicWriteOutput(CommitResult{true, 12345, {}}));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->status, WriteStatus::kSuccess);
  EXPECT_EQ(ok->version, 12345);
  auto failed = DecodeAtomicWriteOutput(EncodeAtomicWriteOutput(CommitResult{false, 0, {0, 2}}));
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status, WriteStatus::kCheckFailure);
  EXPECT_EQ(failed->failed_checks, (std::vector<uint32_t>{0, 2}));
  // Reference vectors (§2.7): check failure, write disabled; a success needs 10 stamp bytes.
  EXPECT_EQ(DecodeAtomicWriteOutput(FromHex("08 02"))->status, WriteStatus::kCheckFailure);
  EXPECT_EQ(DecodeAtomicWriteOutput(FromHex("08 05"))->status, WriteStatus::kWriteDisabled);
  EXPECT_FALSE(DecodeAtomicWriteOutput(FromHex("08 01 12 02 00 01")).ok());
  EXPECT_FALSE(DecodeAtomicWriteOutput(FromHex("08")).ok());
}

TEST(ClientCodec, WatchRequestRoundTrip) {
  const std::vector<std::string> keys = {EncodeKey({KeyPart::String("w"), KeyPart::Int(0)}),
                                         EncodeKey({KeyPart::String("w"), KeyPart::Int(1)})};
  auto decoded = DecodeWatch(EncodeWatchRequest(keys));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, keys);
}

TEST(ClientCodec, WatchOutputRoundTripAndVector) {
  const Entry e{EncodeKey({KeyPart::String("w")}), EncodeV8String("123"), ValueEncoding::kV8, 5};
  auto frame = DecodeWatchOutput(EncodeWatchOutput({e, std::nullopt}));
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(frame->status, ReadStatus::kSuccess);
  ASSERT_EQ(frame->keys.size(), 2u);
  EXPECT_TRUE(frame->keys[0].changed);
  ASSERT_TRUE(frame->keys[0].entry.has_value());
  EXPECT_EQ(frame->keys[0].entry->value, e.value);
  EXPECT_EQ(frame->keys[0].entry->version, 5);
  EXPECT_TRUE(frame->keys[1].changed);
  EXPECT_FALSE(frame->keys[1].entry.has_value());
  // One absent key (reference §2.7), payload without the length prefix.
  auto absent = DecodeWatchOutput(FromHex("08 01 12 02 08 01"));
  ASSERT_TRUE(absent.ok());
  ASSERT_EQ(absent->keys.size(), 1u);
  EXPECT_TRUE(absent->keys[0].changed);
  EXPECT_FALSE(absent->keys[0].entry.has_value());
  EXPECT_FALSE(DecodeWatchOutput(FromHex("12 05 08")).ok());
}

// The watch body as the server frames it (src/service/kvconnect/watch_stream.cc): u32 LE length,
// payload.
std::string Framed(std::string_view payload) {
  std::string out;
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out.append(payload);
}

TEST(WatchFrameSplitter, SplitsFramesWhateverTheChunking) {
  const Entry e{EncodeKey({KeyPart::String("w")}), EncodeV8String("1"), ValueEncoding::kV8, 7};
  const std::string first = EncodeWatchOutput({e});
  const std::string body = Framed(first) + Framed("") + Framed("xyz") + Framed(first);
  for (size_t chunk = 1; chunk <= body.size(); ++chunk) {
    WatchFrameSplitter frames(1024);
    std::vector<std::string> got;
    for (size_t pos = 0; pos < body.size(); pos += chunk) {
      frames.Append(std::string_view(body).substr(pos, chunk));
      while (true) {
        auto next = frames.Next();
        ASSERT_TRUE(next.ok()) << next.status().ToString();
        if (!next->has_value()) break;
        got.emplace_back(**next);
      }
    }
    EXPECT_EQ(got, (std::vector<std::string>{first, "", "xyz", first})) << "chunk " << chunk;
    EXPECT_FALSE(frames.partial());
  }
  WatchFrameSplitter frames(1024);
  frames.Append(body);
  auto decoded = DecodeWatchOutput(**frames.Next());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->keys.at(0).entry->version, 7);
}

TEST(WatchFrameSplitter, ReportsPartialFramesAndOversizedOnes) {
  WatchFrameSplitter frames(8);
  frames.Append(Framed("12345678").substr(0, 6));
  auto next = frames.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
  EXPECT_TRUE(frames.partial());
  frames.Append("345678");
  next = frames.Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ(**next, "12345678");
  EXPECT_FALSE(frames.partial());

  frames.Append(Framed("123456789"));
  for (int i = 0; i < 2; ++i) {  // and it stays failed
    next = frames.Next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(next.status().message(), "a watch frame of 9 bytes exceeds the limit of 8");
  }
}

TEST(V8String, EncodesLikeDeno) {
  // Reference §5 vectors.
  EXPECT_EQ(ToHex(EncodeV8String("hello")), "FF 0F 22 05 68 65 6C 6C 6F");
  EXPECT_EQ(ToHex(EncodeV8String("")), "FF 0F 22 00");
  EXPECT_EQ(ToHex(EncodeV8String("\xe2\x82\xac")), "FF 0F 63 02 AC 20");  // "€"
  // Latin-1 code points stay one-byte strings.
  EXPECT_EQ(ToHex(EncodeV8String("\xc3\xa9")), "FF 0F 22 01 E9");  // "é"
  // A pad byte keeps two-byte data at an even offset: 2 (header) + 1 (tag) + 2 (varint 128).
  const std::string long_two_byte =
      EncodeV8String(std::string(64, 'a') + "\xe2\x82\xac" + std::string(63, 'b'));
  EXPECT_EQ(ToHex(long_two_byte.substr(0, 6)), "FF 0F 00 63 80 02");
  // Astral code points become surrogate pairs.
  EXPECT_EQ(ToHex(EncodeV8String("\xf0\x9f\x98\x80")), "FF 0F 63 04 3D D8 00 DE");
}

TEST(V8String, ParsesWhatItWritesAndWhatDenoWrites) {
  for (const std::string s : {"", "hello", "1763800000000000000", "\xc3\xa9t\xc3\xa9",
                              "\xe2\x82\xac uro", "\xf0\x9f\x98\x80"}) {
    auto parsed = ParseV8String(EncodeV8String(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(*ParseV8String(FromHex("FF 10 22 02 68 69")), "hi");  // Deno 2.9 writes version 16
  EXPECT_EQ(*ParseV8String(FromHex("FF 0F 00 63 02 AC 20")), "\xe2\x82\xac");
  EXPECT_EQ(ParseV8String(FromHex("FF 0F 49 54")).status().message(), "unsupported value type");
  EXPECT_EQ(ParseV8String(FromHex("FF 0F 22 05 68")).status().message(), "invalid v8 value");
  EXPECT_EQ(ParseV8String(FromHex("FF 0F 22 01 68 69")).status().message(), "invalid v8 value");
  EXPECT_EQ(ParseV8String(FromHex("FF 0F 63 03 AC 20 00")).status().message(), "invalid v8 value");
  EXPECT_FALSE(ParseV8String("").ok());
  EXPECT_FALSE(ParseV8String(FromHex("FF 09 22 00")).ok());
}

TEST(MetadataResponse, ParsesWhatTheServerWrites) {
  MetadataResponse m;
  m.version = 3;
  m.database_id = "00000000-0000-0000-0000-000000000000";
  m.endpoints = {{"/v2", "strong"}, {"https://eu.example/v2", "eventual"}};
  m.token = "tok_abc";
  m.expires_at = "2026-11-22T10:00:00.123Z";
  auto parsed = ParseMetadataResponse(EncodeMetadataResponse(m));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->version, 3);
  EXPECT_EQ(parsed->database_id, m.database_id);
  ASSERT_EQ(parsed->endpoints.size(), 2u);
  EXPECT_EQ(parsed->endpoints[0].url, "/v2");
  EXPECT_EQ(parsed->endpoints[0].consistency, "strong");
  EXPECT_EQ(parsed->endpoints[1].consistency, "eventual");
  EXPECT_EQ(parsed->token, "tok_abc");
  EXPECT_EQ(parsed->expires_at, m.expires_at);
}

TEST(MetadataResponse, RejectsWhatClientsReject) {
  const std::string good_tail =
      R"("databaseId":"00000000-0000-0000-0000-000000000000","endpoints":[{"url":"/v2",)"
      R"("consistency":"strong"}],"token":"t","expiresAt":"2026-11-22T10:00:00Z"})";
  EXPECT_TRUE(ParseMetadataResponse(R"({"version":2,)" + good_tail).ok());
  EXPECT_FALSE(ParseMetadataResponse("not json").ok());
  EXPECT_FALSE(ParseMetadataResponse(R"({"version":"3",)" + good_tail).ok());
  EXPECT_FALSE(ParseMetadataResponse(R"({"version":4,)" + good_tail).ok());
  // Version 1 needs absolute endpoint URLs.
  EXPECT_FALSE(ParseMetadataResponse(R"({"version":1,)" + good_tail).ok());
  // "uuid" instead of "databaseId", and an endpoint URL ending in '/'.
  EXPECT_FALSE(ParseMetadataResponse(
                   R"({"version":3,"uuid":"00000000-0000-0000-0000-000000000000","endpoints":)"
                   R"([{"url":"/v2","consistency":"strong"}],"token":"t",)"
                   R"("expiresAt":"2026-11-22T10:00:00Z"})")
                   .ok());
  EXPECT_FALSE(
      ParseMetadataResponse(R"({"version":3,"databaseId":"00000000-0000-0000-0000-000000000000",)"
                            R"("endpoints":[{"url":"/v2/","consistency":"strong"}],"token":"t",)"
                            R"("expiresAt":"2026-11-22T10:00:00Z"})")
          .ok());
}

}  // namespace
}  // namespace kvc::codec
