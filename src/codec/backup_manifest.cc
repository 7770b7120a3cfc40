#include "codec/backup_manifest.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cinttypes>
#include <cstdio>

#include "codec/civil_time.h"
#include "codec/json_parse.h"
#include "codec/versionstamp.h"
#include "common/clock.h"

namespace kvc::codec {
Result<int64_t> ParseRfc3339Ms(std::string_view s) {
  const Status bad = InvalidArgument("'" + std::string(s) +
                                     "' is not an RFC 3339 time such as 2026-11-24T10:00:00Z");
  int64_t y, mo, d, h, mi, se;
  if (s.size() < 20 || !ParseDecimalDigits(s, 0, 4, &y) || s[4] != '-' ||
      !ParseDecimalDigits(s, 5, 2, &mo) || s[7] != '-' || !ParseDecimalDigits(s, 8, 2, &d) ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !ParseDecimalDigits(s, 11, 2, &h) ||
      s[13] != ':' || !ParseDecimalDigits(s, 14, 2, &mi) || s[16] != ':' ||
      !ParseDecimalDigits(s, 17, 2, &se)) {
    return bad;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return bad;
  size_t pos = 19;
  int64_t ms = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int64_t scale = 100;
    const size_t start = pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      ms += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad;
  }
  int64_t offset_min = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int64_t oh, om;
    if (!ParseDecimalDigits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !ParseDecimalDigits(s, pos + 4, 2, &om)) {
      return bad;
    }
    offset_min = (oh * 60 + om) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad;
  }
  if (pos != s.size()) return bad;
  const int64_t days = DaysFromCivil(y, mo, d);
  return ((days * 86400 + h * 3600 + mi * 60 + se) - offset_min * 60) * 1000 + ms;
}

std::string EncodeSnapshotManifest(const SnapshotManifest& m) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("format");
  w.Int(1);
  w.Key("database_id");
  w.String(m.database_id.c_str(), static_cast<rapidjson::SizeType>(m.database_id.size()));
  w.Key("database");
  w.String(m.database.c_str(), static_cast<rapidjson::SizeType>(m.database.size()));
  const std::string version = std::to_string(m.version);
  w.Key("version");
  w.String(version.c_str(), static_cast<rapidjson::SizeType>(version.size()));
  const std::string stamp = VersionstampToHex(VersionToVersionstamp(m.version));
  w.Key("versionstamp");
  w.String(stamp.c_str(), static_cast<rapidjson::SizeType>(stamp.size()));
  w.Key("time_ms");
  w.Int64(m.time_ms);
  const std::string time = FormatRfc3339Utc(m.time_ms);
  w.Key("time");
  w.String(time.c_str(), static_cast<rapidjson::SizeType>(time.size()));
  w.Key("key_count");
  w.Int64(m.key_count);
  w.Key("bytes");
  w.Int64(m.bytes);
  w.Key("sha256");
  w.String(m.sha256.c_str(), static_cast<rapidjson::SizeType>(m.sha256.size()));
  w.Key("integrity");
  w.String("ok");
  w.Key("created_by");
  w.String("kvconnect");
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<SnapshotManifest> DecodeSnapshotManifest(std::string_view json) {
  rapidjson::Document d;
  JsonParseFailure failure;
  if (!ParseJsonDocument(json, kDefaultMaxJsonDepth, &d, &failure)) {
    if (failure.too_deep) {
      return Corruption(JsonTooDeepText("snapshot manifest", kDefaultMaxJsonDepth));
    }
    return Corruption("snapshot manifest is not JSON");
  }
  if (!d.IsObject()) return Corruption("snapshot manifest is not JSON");
  auto str = [&](const char* k, std::string* out) {
    if (!d.HasMember(k) || !d[k].IsString()) return false;
    *out = std::string(d[k].GetString(), d[k].GetStringLength());
    return true;
  };
  auto i64 = [&](const char* k, int64_t* out) {
    if (!d.HasMember(k) || !d[k].IsInt64()) return false;
    *out = d[k].GetInt64();
    return true;
  };
  SnapshotManifest m;
  int64_t format = 0;
  std::string version;
  if (!i64("format", &format) || format != 1 || !str("database_id", &m.database_id) ||
      !str("database", &m.database) || !str("version", &version) || !i64("time_ms", &m.time_ms) ||
      !i64("key_count", &m.key_count) || !i64("bytes", &m.bytes) || !str("sha256", &m.sha256)) {
    return Corruption("snapshot manifest lacks a field or has one of the wrong type");
  }
  if (version.empty() || version.size() > 19 ||
      version.find_first_not_of("0123456789") != std::string::npos) {
    return Corruption("snapshot manifest has a bad version");
  }
  m.version = std::stoll(version);
  return m;
}

}  // namespace kvc::codec
