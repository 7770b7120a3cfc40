// KvModel: an independent, in-memory model of the KV semantics for checks, set, delete and the
// LE64 sum/min/max mutations, used as the oracle of differential tests and fuzzers. Written
// separately from engine/ on purpose: it shares no code with what it checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "codec/versionstamp.h"
#include "storage/kv_types.h"

namespace kvc::testutil {

inline std::string StampOf(int64_t v) {
  return codec::VersionstampToBytes(codec::VersionToVersionstamp(v));
}

// An independent model of the KV semantics for the operations used below.
struct KvModel {
  struct Row {
    std::string value;
    ValueEncoding enc;
    int64_t version;
  };
  std::map<std::string, Row> rows;

  // Returns: 1 applied, 0 check failed, -1 error (nothing applied).
  int Apply(const AtomicWrite& w, int64_t version) {
    for (const Check& c : w.checks) {
      auto it = rows.find(c.key);
      if (c.versionstamp.empty()
              ? it != rows.end()
              : (it == rows.end() || StampOf(it->second.version) != c.versionstamp))
        return 0;
    }
    auto next = rows;
    for (const Mutation& m : w.mutations) {
      if (m.type == MutationType::kSet) {
        next[m.key] = Row{m.value.data, m.value.encoding, version};
      } else if (m.type == MutationType::kDelete) {
        next.erase(m.key);
      } else {
        uint64_t op = 0;
        for (int i = 7; i >= 0; --i) op = (op << 8) | static_cast<unsigned char>(m.value.data[i]);
        auto it = next.find(m.key);
        uint64_t result = op;
        if (it != next.end()) {
          if (it->second.enc != ValueEncoding::kLe64) return -1;
          uint64_t old = 0;
          for (int i = 7; i >= 0; --i)
            old = (old << 8) | static_cast<unsigned char>(it->second.value[i]);
          result = m.type == MutationType::kSum   ? old + op
                   : m.type == MutationType::kMin ? std::min(old, op)
                                                  : std::max(old, op);
        }
        std::string b(8, '\0');
        for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((result >> (8 * i)) & 0xff);
        next[m.key] = Row{b, ValueEncoding::kLe64, version};
      }
    }
    rows = std::move(next);
    return 1;
  }
};

}  // namespace kvc::testutil
