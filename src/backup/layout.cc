#include "backup/layout.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "codec/civil_time.h"

namespace kvc::backup {
namespace {

std::string Hex16(int64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, static_cast<uint64_t>(v));
  return buf;
}
std::string Dec13(int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%013" PRId64, v);
  return buf;
}

// Parses `n` hex digits (exactly) at s[pos].
bool ParseHex(const std::string& s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  uint64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}
}  // namespace

std::string SnapshotDataName(const std::string& db, int64_t version, int64_t time_ms) {
  return db + "/snapshots/" + Hex16(version) + "-" + Dec13(time_ms) + ".sqlite3";
}
std::string SnapshotManifestName(const std::string& db, int64_t version, int64_t time_ms) {
  return db + "/snapshots/" + Hex16(version) + "-" + Dec13(time_ms) + ".json";
}
std::string SegmentObjectName(const std::string& db, int64_t prev_version, int64_t last_version,
                              int64_t first_time_ms, int64_t last_time_ms) {
  return db + "/log/" + Hex16(prev_version) + "-" + Hex16(last_version) + "-" +
         Dec13(first_time_ms) + "-" + Dec13(last_time_ms) + ".kvlog";
}

std::vector<SegmentRef> DatabaseBackups::ChainFrom(int64_t version) const {
  std::vector<SegmentRef> chain;
  int64_t cur = version;
  for (;;) {
    const SegmentRef* best = nullptr;
    for (const SegmentRef& s : segments) {
      if (s.prev_version <= cur && cur < s.last_version &&
          (best == nullptr || s.last_version > best->last_version)) {
        best = &s;
      }
    }
    if (best == nullptr) return chain;
    chain.push_back(*best);
    cur = best->last_version;
  }
}

CommitPoint DatabaseBackups::HeadFrom(int64_t version) const {
  const auto chain = ChainFrom(version);
  if (chain.empty()) return {version, -1};
  return {chain.back().last_version, chain.back().last_time_ms};
}

std::map<std::string, DatabaseBackups> IndexBackups(const std::vector<ObjectInfo>& objects) {
  std::map<std::string, DatabaseBackups> out;
  // name -> (data seen, manifest seen) per snapshot key
  std::map<std::string, std::map<std::pair<int64_t, int64_t>, std::pair<bool, bool>>> snaps;
  for (const ObjectInfo& o : objects) {
    const size_t slash = o.name.find('/');
    if (slash == std::string::npos || slash == 0) continue;
    const std::string db = o.name.substr(0, slash);
    const std::string rest = o.name.substr(slash + 1);
    int64_t a = 0, b = 0, c = 0, d = 0;
    if (rest.rfind("snapshots/", 0) == 0) {
      const std::string f = rest.substr(10);
      if (f.size() < 31 || f[16] != '-' || !ParseHex(f, 0, 16, &a) ||
          !codec::ParseDecimalDigits(f, 17, 13, &b)) {
        continue;
      }
      const std::string ext = f.substr(30);
      auto& seen = snaps[db][{a, b}];
      if (ext == ".sqlite3") seen.first = true;
      if (ext == ".json") seen.second = true;
    } else if (rest.rfind("log/", 0) == 0) {
      const std::string f = rest.substr(4);
      if (f.size() != 16 + 1 + 16 + 1 + 13 + 1 + 13 + 6 || f[16] != '-' || f[33] != '-' ||
          f[47] != '-' || f.substr(61) != ".kvlog" || !ParseHex(f, 0, 16, &a) ||
          !ParseHex(f, 17, 16, &b) || !codec::ParseDecimalDigits(f, 34, 13, &c) ||
          !codec::ParseDecimalDigits(f, 48, 13, &d) || b <= a) {
        continue;
      }
      DatabaseBackups& dbb = out[db];
      dbb.name = db;
      dbb.segments.push_back(SegmentRef{a, b, c, d, o.name, o.size});
    }
  }
  for (auto& [db, m] : snaps) {
    DatabaseBackups& dbb = out[db];
    dbb.name = db;
    for (const auto& [key, seen] : m) {
      if (seen.first && seen.second) {
        dbb.snapshots.push_back(SnapshotRef{key.first, key.second,
                                            SnapshotDataName(db, key.first, key.second),
                                            SnapshotManifestName(db, key.first, key.second)});
      } else if (seen.first) {
        dbb.incomplete.push_back(SnapshotDataName(db, key.first, key.second));
      }
    }
    std::sort(dbb.snapshots.begin(), dbb.snapshots.end(),
              [](const SnapshotRef& x, const SnapshotRef& y) {
                return x.version != y.version ? x.version < y.version : x.time_ms < y.time_ms;
              });
  }
  for (auto& [db, dbb] : out) {
    std::sort(dbb.segments.begin(), dbb.segments.end(),
              [](const SegmentRef& x, const SegmentRef& y) {
                return x.prev_version != y.prev_version ? x.prev_version < y.prev_version
                                                        : x.last_version < y.last_version;
              });
  }
  return out;
}

}  // namespace kvc::backup
