#include "loadgen/plan.h"

#include <random>

#include "codec/key_codec.h"

namespace kvc::loadgen {

std::string ReadOneBody(const std::string& key) {
  return codec::EncodeSnapshotReadRequest({ReadRange{key, key + '\0', 1, false}});
}

std::string SetBody(const std::string& key, const std::string& v8_value) {
  AtomicWrite w;
  w.mutations.push_back(Mutation{key, MutationType::kSet, KvValue{v8_value, ValueEncoding::kV8}});
  return codec::EncodeAtomicWriteRequest(w);
}

std::optional<std::string> TakeBody(Result<client::Response>& r, const Plan& plan,
                                    ThreadStats* stats, std::string_view call) {
  if (!r.ok()) {
    if (plan.is_stopping()) {
      stats->errors.Add("timeout",
                        std::string(call) + ": cut off after the window: " + r.status().message());
    } else if (r.status().code() == StatusCode::kPayloadTooLarge) {
      stats->errors.Add("response_too_large", std::string(call) + ": " + r.status().message());
    } else {
      stats->errors.Add("transport", std::string(call) + ": " + r.status().message());
    }
    return std::nullopt;
  }
  if (r->status != 200) {
    const std::string code = std::to_string(r->status);
    stats->errors.Add("http_" + code, std::string(call) + ": HTTP " + code + ": " + r->body);
    return std::nullopt;
  }
  return std::move(r->body);
}

std::optional<std::vector<std::vector<Entry>>> DecodeRead(const std::string& body, size_t ranges,
                                                          ThreadStats* stats) {
  auto r = codec::DecodeSnapshotReadOutput(body);
  if (!r.ok()) {
    stats->errors.Add("decode", "snapshot_read: " + r.status().message());
    return std::nullopt;
  }
  if (r->status != codec::ReadStatus::kSuccess) {
    stats->errors.Add("read_status", "snapshot_read: status " +
                                         std::to_string(static_cast<int>(r->status)) +
                                         " instead of SR_SUCCESS");
    return std::nullopt;
  }
  if (r->ranges.size() != ranges) {
    stats->errors.Add("decode", "snapshot_read: " + std::to_string(r->ranges.size()) +
                                    " ranges in the answer, " + std::to_string(ranges) +
                                    " requested");
    return std::nullopt;
  }
  return std::move(r->ranges);
}

std::optional<codec::AtomicWriteResult> DecodeWrite(const std::string& body, ThreadStats* stats) {
  auto r = codec::DecodeAtomicWriteOutput(body);
  if (!r.ok()) {
    stats->errors.Add("decode", "atomic_write: " + r.status().message());
    return std::nullopt;
  }
  if (r->status != codec::WriteStatus::kSuccess && r->status != codec::WriteStatus::kCheckFailure) {
    stats->errors.Add("write_status",
                      "atomic_write: status " + std::to_string(static_cast<int>(r->status)));
    return std::nullopt;
  }
  return std::move(r).value();
}

std::string BenchKey(std::string_view group, int64_t i) {
  return codec::EncodeKey(
      {codec::KeyPart::String("bench"), codec::KeyPart::String(group), codec::KeyPart::Int(i)});
}

std::string Filler(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(n, ' ');
  for (char& c : s) c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

uint64_t MixSeed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace kvc::loadgen
