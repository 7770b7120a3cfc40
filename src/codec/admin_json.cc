#include "codec/admin_json.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>

#include "codec/json_schema.h"
#include "codec/json_text.h"
#include "codec/key_codec.h"
#include "codec/v8/v8_json.h"
#include "codec/versionstamp.h"
#include "common/random.h"

namespace kvc::codec {
namespace {

constexpr const char* kSchemaFile = "admin-api.schema.json";

// Parses `body` and validates it against `definition`. An empty body is `{}` when
// `empty_is_object`.
Status ParseBody(std::string_view body, std::string_view definition, rapidjson::Document* d,
                 bool empty_is_object = false) {
  bool blank = true;
  for (char c : body) blank = blank && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
  if (blank && empty_is_object) {
    d->SetObject();
  } else {
    KVC_RETURN_IF_ERROR(ParseJsonText(body, "The request body", d));
  }
  const rapidjson::SchemaDocument* schema = CompiledSchema(kSchemaFile, definition);
  if (schema == nullptr)
    return Internal("admin schema definition missing: " + std::string(definition));
  return ValidateJson(*schema, *d, "The request body");
}

std::string TextOf(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string StringOf(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// Prefixes errors with the member they are about.
Status About(const char* member, const Status& s) {
  if (s.ok()) return s;
  return Status(s.code(), "'" + std::string(member) + "': " + s.message());
}

// A KvKeyJSON member as key bytes (raw parts included, so every stored key can be named).
Result<std::string> KeyMember(const rapidjson::Value& obj, const char* member) {
  auto key = KeyBytesFromJson(TextOf(obj[member]));
  if (!key.ok()) return About(member, key.status());
  return key;
}

// The versionstamp check of a set or delete: absent, null (must not exist) or 20 hex digits.
Result<AdminCheck> CheckMember(const rapidjson::Value& obj) {
  auto it = obj.FindMember("versionstamp");
  if (it == obj.MemberEnd()) return AdminCheck();
  if (it->value.IsNull()) return AdminCheck(std::string());
  const std::string hex = StringOf(it->value);
  std::string bytes;
  bool ok = hex.size() == 20;
  for (size_t i = 0; ok && i < hex.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    ok = hi >= 0 && lo >= 0;
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  if (!ok) {
    return InvalidArgument("'versionstamp': expected 20 lowercase hex digits or null, got '" + hex +
                           "'.");
  }
  return AdminCheck(std::move(bytes));
}

// The range a Selector names, as Deno.Kv.list computes it.
Result<AdminRange> RangeOf(const rapidjson::Value& obj) {
  const bool has_prefix = obj.HasMember("prefix");
  const bool has_start = obj.HasMember("start");
  const bool has_end = obj.HasMember("end");
  AdminRange r;
  if (has_prefix) {
    KVC_ASSIGN_OR_RETURN(const std::string prefix, KeyMember(obj, "prefix"));
    r.start = prefix;
    r.start.push_back('\x00');
    r.end = prefix;
    r.end.push_back('\xff');
    if (has_start) {
      KVC_ASSIGN_OR_RETURN(r.start, KeyMember(obj, "start"));
      if (r.start.compare(0, prefix.size(), prefix) != 0) {
        return InvalidArgument("'start' must be inside 'prefix'.");
      }
    }
    if (has_end) {
      KVC_ASSIGN_OR_RETURN(r.end, KeyMember(obj, "end"));
      if (r.end.compare(0, prefix.size(), prefix) != 0) {
        return InvalidArgument("'end' must be inside 'prefix'.");
      }
    }
    if (has_start && has_end) {
      return InvalidArgument("Give a prefix with at most one of 'start' and 'end'.");
    }
  } else if (has_start && has_end) {
    KVC_ASSIGN_OR_RETURN(r.start, KeyMember(obj, "start"));
    KVC_ASSIGN_OR_RETURN(r.end, KeyMember(obj, "end"));
  } else if (has_start || has_end) {
    return InvalidArgument("Without 'prefix', give both 'start' and 'end'.");
  } else {
    // Every key: the empty prefix.
    r.start.assign(1, '\x00');
    r.end.assign(1, '\xff');
  }
  if (r.start > r.end) return InvalidArgument("'start' is after 'end'.");
  return r;
}

}  // namespace

Status ValidateAdminJson(std::string_view definition, std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(json, "The document", &d));
  const rapidjson::SchemaDocument* schema = CompiledSchema(kSchemaFile, definition);
  if (schema == nullptr)
    return Internal("admin schema definition missing: " + std::string(definition));
  return ValidateJson(*schema, d, "The document");
}

Result<AdminDatabaseRequest> ParseAdminDatabaseRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "DatabaseCreateRequest", &d));
  return AdminDatabaseRequest{StringOf(d["name"])};
}

Result<std::string> ParseAdminBackupRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "BackupRequest", &d, /*empty_is_object=*/true));
  return d.HasMember("to") ? StringOf(d["to"]) : std::string();
}

Result<AdminTokenRequest> ParseAdminTokenRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "TokenCreateRequest", &d));
  AdminTokenRequest r;
  const bool one = d.HasMember("database");
  const bool list = d.HasMember("databases");
  r.all_databases = d.HasMember("all_databases") && d["all_databases"].GetBool();
  if (int{one} + int{list} + int{r.all_databases} != 1) {
    return InvalidArgument(
        "Name the token's databases with exactly one of 'database' (one name or id), "
        "'databases' (a list) or 'all_databases': true.");
  }
  if (one) r.databases.push_back(StringOf(d["database"]));
  if (list) {
    for (const auto& v : d["databases"].GetArray()) r.databases.push_back(StringOf(v));
  }
  r.scope = StringOf(d["scope"]);
  if (d.HasMember("expires")) r.expires = StringOf(d["expires"]);
  if (d.HasMember("name")) r.name = StringOf(d["name"]);
  if (d.HasMember("rate_limit") && d["rate_limit"].IsNumber()) {
    r.rate_limit = d["rate_limit"].GetDouble();
  }
  return r;
}

Result<AdminListRequest> ParseAdminListRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "ListRequest", &d, /*empty_is_object=*/true));
  AdminListRequest r;
  KVC_ASSIGN_OR_RETURN(r.range, RangeOf(d));
  if (d.HasMember("limit")) r.limit = d["limit"].GetInt();
  if (d.HasMember("reverse")) r.reverse = d["reverse"].GetBool();
  if (d.HasMember("raw")) r.raw = d["raw"].GetBool();
  if (d.HasMember("cursor")) {
    std::string last;
    if (!Base64UrlDecode(StringOf(d["cursor"]), &last) || last.empty()) {
      return InvalidArgument("'cursor': not a cursor this server gave.");
    }
    // Continue after `last`, in the listing's direction, without leaving the range.
    AdminRange& range = r.range;
    if (r.reverse) {
      if (last < range.end) range.end = last;
    } else {
      last.push_back('\x00');
      if (last > range.start) range.start = std::move(last);
    }
    if (range.start > range.end) range.start = range.end;
  }
  return r;
}

Result<AdminChildrenRequest> ParseAdminChildrenRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "ChildrenRequest", &d, /*empty_is_object=*/true));
  AdminChildrenRequest r;
  if (d.HasMember("prefix")) {
    KVC_ASSIGN_OR_RETURN(r.prefix, KeyMember(d, "prefix"));
  }
  r.range.start = r.prefix + '\x00';
  r.range.end = r.prefix + '\xff';
  if (d.HasMember("limit")) r.limit = d["limit"].GetInt();
  if (d.HasMember("cursor")) {
    std::string next;
    if (!Base64UrlDecode(StringOf(d["cursor"]), &next) || next.empty()) {
      return InvalidArgument("'cursor': not a cursor this server gave.");
    }
    // Never outside the prefix, whatever the cursor says.
    if (next > r.range.start) r.range.start = std::move(next);
    if (r.range.start > r.range.end) r.range.start = r.range.end;
  }
  return r;
}

Result<AdminGetRequest> ParseAdminGetRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "GetRequest", &d));
  AdminGetRequest r;
  KVC_ASSIGN_OR_RETURN(r.key, KeyMember(d, "key"));
  if (d.HasMember("raw")) r.raw = d["raw"].GetBool();
  return r;
}

Result<AdminGetManyRequest> ParseAdminGetManyRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "GetManyRequest", &d));
  AdminGetManyRequest r;
  const rapidjson::Value& keys = d["keys"];
  for (rapidjson::SizeType i = 0; i < keys.Size(); ++i) {
    auto key = KeyBytesFromJson(TextOf(keys[i]));
    if (!key.ok()) return About(("keys[" + std::to_string(i) + "]").c_str(), key.status());
    r.keys.push_back(std::move(*key));
  }
  if (d.HasMember("raw")) r.raw = d["raw"].GetBool();
  return r;
}

Result<AdminSetRequest> ParseAdminSetRequest(std::string_view body, uint32_t v8_format) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "SetRequest", &d));
  AdminSetRequest r;
  KVC_ASSIGN_OR_RETURN(r.key, KeyMember(d, "key"));
  auto value = KvValueFromJson(TextOf(d["value"]), v8_format);
  if (!value.ok()) return About("value", value.status());
  r.value = std::move(*value);
  KVC_ASSIGN_OR_RETURN(r.check, CheckMember(d));
  if (d.HasMember("expire_in")) r.expire_in_ms = d["expire_in"].GetInt64();
  if (d.HasMember("expires_at")) {
    if (d.HasMember("expire_in")) {
      return InvalidArgument("Give at most one of 'expire_in' and 'expires_at'.");
    }
    if (d["expires_at"].IsString()) {
      auto at = ExpiryFromJsonTime(StringOf(d["expires_at"]));
      if (!at.ok()) return About("expires_at", at.status());
      r.expire_at_ms = *at;
    }
  }
  return r;
}

Result<AdminDeleteRequest> ParseAdminDeleteRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "DeleteRequest", &d));
  AdminDeleteRequest r;
  KVC_ASSIGN_OR_RETURN(r.key, KeyMember(d, "key"));
  KVC_ASSIGN_OR_RETURN(r.check, CheckMember(d));
  return r;
}

Result<AdminRangeRequest> ParseAdminRangeRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "RangeRequest", &d, /*empty_is_object=*/true));
  AdminRangeRequest r;
  KVC_ASSIGN_OR_RETURN(r.range, RangeOf(d));
  if (d.HasMember("batch")) r.batch = d["batch"].GetInt();
  return r;
}

Result<AdminRange> ParseAdminExportRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "ExportRequest", &d, /*empty_is_object=*/true));
  return RangeOf(d);
}

Result<AdminRange> AdminPrefixRange(std::string_view prefix_json, std::string* encoded_prefix) {
  auto key = KeyBytesFromJson(prefix_json);
  if (!key.ok()) return About("prefix", key.status());
  std::string prefix = std::move(*key);
  AdminRange r;
  r.start = prefix + '\x00';
  r.end = prefix + '\xff';
  if (encoded_prefix != nullptr) *encoded_prefix = std::move(prefix);
  return r;
}

std::string ImportStatsMembers(const ImportStats& st) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", st.seconds);
  return "\"entries\":" + std::to_string(st.entries) + ",\"bytes\":" + std::to_string(st.bytes) +
         ",\"batches\":" + std::to_string(st.batches) +
         ",\"deleted\":" + std::to_string(st.deleted) +
         ",\"last_line\":" + std::to_string(st.last_line) +
         ",\"skipped\":" + std::to_string(st.skipped) + ",\"seconds\":" + seconds;
}

Result<AdminImportAnswer> ParseAdminImportAnswer(std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(json, "The answer", &d));
  if (!d.IsObject()) return InvalidArgument("The answer is not a JSON object.");
  AdminImportAnswer a;
  auto integer = [&](const char* name, int64_t* out) {
    if (d.HasMember(name) && d[name].IsInt64()) *out = d[name].GetInt64();
  };
  integer("entries", &a.stats.entries);
  integer("bytes", &a.stats.bytes);
  integer("batches", &a.stats.batches);
  integer("deleted", &a.stats.deleted);
  integer("last_line", &a.stats.last_line);
  integer("skipped", &a.stats.skipped);
  integer("line", &a.line);
  if (d.HasMember("seconds") && d["seconds"].IsNumber()) {
    a.stats.seconds = d["seconds"].GetDouble();
  }
  if (d.HasMember("error") && d["error"].IsString()) a.error = StringOf(d["error"]);
  return a;
}

Result<AdminWatchRequest> ParseAdminWatchRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "WatchRequest", &d));
  AdminWatchRequest r;
  if (d.HasMember("prefix")) {
    KVC_ASSIGN_OR_RETURN(r.prefix, KeyMember(d, "prefix"));
    return r;
  }
  for (const auto& k : d["keys"].GetArray()) {
    auto key = KeyBytesFromJson(TextOf(k));
    if (!key.ok()) return About("keys", key.status());
    r.keys.push_back(std::move(*key));
  }
  return r;
}

std::string AdminCursor(std::string_view last_key) {
  return Base64UrlEncode(std::string(last_key));
}

Result<std::string> AdminEntryJson(const Entry& entry, bool raw) {
  auto json = EntryToJson(entry);
  if (!json.ok()) return Corruption("stored entry has no JSON view: " + json.status().message());
  if (!raw) return json;
  // Splice the raw member in before the closing brace of the entry object.
  std::string out = std::move(*json);
  out.pop_back();
  const char* encoding = entry.encoding == ValueEncoding::kV8     ? "v8"
                         : entry.encoding == ValueEncoding::kLe64 ? "le64"
                                                                  : "bytes";
  out += ",\"raw\":{\"encoding\":\"";
  out += encoding;
  out += "\",\"bytes\":";
  AppendJsonQuoted(Base64UrlEncode(entry.value), &out);
  out += "}}";
  return out;
}

Result<std::string> AdminEntryListJson(const std::vector<Entry>& entries, bool more, bool raw) {
  std::string out = "{\"entries\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out.push_back(',');
    KVC_ASSIGN_OR_RETURN(const std::string e, AdminEntryJson(entries[i], raw));
    out += e;
  }
  out += "],\"cursor\":";
  if (more && !entries.empty()) {
    AppendJsonQuoted(AdminCursor(entries.back().key), &out);
  } else {
    out += "null";
  }
  out.push_back('}');
  return out;
}

// `json` with every \uD800-\uDFFF escape made \uFFFD. The JSON views of values may hold lone
// surrogates (JS strings can), which RapidJSON refuses; keys never do (they are UTF-8, written as
// is), and the raw members are base64, so the bytes read from an answer do not change.
std::string WithoutSurrogateEscapes(std::string_view json) {
  std::string out(json);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] != '\\') continue;
    if (out[i + 1] == 'u' && i + 5 < out.size() && (out[i + 2] == 'd' || out[i + 2] == 'D') &&
        std::string_view("89abcdefABCDEF").find(out[i + 3]) != std::string_view::npos) {
      out.replace(i + 2, 4, "fffd");
    }
    ++i;  // the escaped character
  }
  return out;
}

Result<AdminEntryListAnswer> ParseAdminEntryListAnswer(std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(WithoutSurrogateEscapes(json), "The answer", &d));
  if (!d.IsObject() || !d.HasMember("entries") || !d["entries"].IsArray()) {
    return InvalidArgument("The answer is not an EntryList.");
  }
  AdminEntryListAnswer a;
  for (const auto& e : d["entries"].GetArray()) {
    if (!e.IsObject() || !e.HasMember("key") || !e.HasMember("raw") || !e["raw"].IsObject()) {
      return InvalidArgument("An entry of the answer has no key or no raw member.");
    }
    const rapidjson::Value& raw = e["raw"];
    if (!raw.HasMember("encoding") || !raw["encoding"].IsString() || !raw.HasMember("bytes") ||
        !raw["bytes"].IsString()) {
      return InvalidArgument("An entry's raw member has no encoding or bytes.");
    }
    Entry entry;
    KVC_ASSIGN_OR_RETURN(entry.key, KeyMember(e, "key"));
    const std::string encoding = StringOf(raw["encoding"]);
    if (encoding == "v8") {
      entry.encoding = ValueEncoding::kV8;
    } else if (encoding == "le64") {
      entry.encoding = ValueEncoding::kLe64;
    } else if (encoding == "bytes") {
      entry.encoding = ValueEncoding::kBytes;
    } else {
      return InvalidArgument("An entry's raw encoding '" + encoding + "' is unknown.");
    }
    if (!Base64UrlDecode(StringOf(raw["bytes"]), &entry.value)) {
      return InvalidArgument("An entry's raw bytes are not base64.");
    }
    a.entries.push_back(std::move(entry));
  }
  if (d.HasMember("cursor") && d["cursor"].IsString()) a.cursor = StringOf(d["cursor"]);
  return a;
}

Result<std::string> AdminExactImportLine(const Entry& entry) {
  std::string out = "{\"key\":" + KeyToJson(entry.key) + ",\"value\":";
  if (entry.encoding == ValueEncoding::kV8) {
    out += "{\"type\":\"v8\",\"value\":";
    AppendJsonQuoted(Base64UrlEncode(entry.value), &out);
    out += "}";
  } else {
    KVC_ASSIGN_OR_RETURN(const std::string value,
                         KvValueToJson(KvValue{entry.value, entry.encoding}));
    out += value;
  }
  out += ",\"versionstamp\":\"" + VersionstampToHex(VersionToVersionstamp(entry.version)) + "\"";
  if (entry.expire_at_ms >= 0) {
    out += ",\"expires_at\":\"" + ExpiryToJsonTime(entry.expire_at_ms) + "\"";
  }
  out += "}\n";
  return out;
}

Result<std::string> AdminWatchItemJson(std::string_view key, const Entry* entry) {
  if (entry != nullptr) return AdminEntryJson(*entry, false);
  return "{\"key\":" + KeyToJson(key) + ",\"value\":null,\"versionstamp\":null}";
}

Result<std::vector<Enqueue>> ParseQueueEnqueueRequest(std::string_view body, uint32_t v8_format,
                                                      int64_t now_ms) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "QueueEnqueueRequest", &d));
  std::vector<Enqueue> out;
  for (const auto& m : d["messages"].GetArray()) {
    Enqueue e;
    auto value = KvValueFromJson(TextOf(m["value"]), v8_format);
    if (!value.ok()) return About("value", value.status());
    if (value->encoding != ValueEncoding::kV8) {
      return InvalidArgument(
          "'value': a queue message is a V8 value; a top-level Uint8Array or KvU64 cannot be "
          "one (wrap it in an object).");
    }
    e.payload = std::move(value->data);
    int64_t delay = 0;
    if (m.HasMember("delay")) {
      // As Deno's kv.enqueue: a number of ms (a fraction is cut off), 0 to 30 days.
      const double d = m["delay"].GetDouble();
      if (!(d >= 0)) return InvalidArgument("'delay': Delay must be >= 0.");
      if (d > static_cast<double>(kMaxQueueDelayMs)) {
        return InvalidArgument("'delay': Delay cannot be greater than 30 days.");
      }
      delay = static_cast<int64_t>(d);
    }
    e.deadline_ms = now_ms + delay;
    if (m.HasMember("backoff_schedule")) {
      e.backoff_given = true;
      for (const auto& b : m["backoff_schedule"].GetArray()) {
        if (!b.IsUint()) {
          return InvalidArgument("'backoff_schedule': each interval is at most 4294967295 ms.");
        }
        e.backoff_schedule.push_back(b.GetUint());
      }
    }
    if (m.HasMember("keys_if_undelivered")) {
      for (const auto& k : m["keys_if_undelivered"].GetArray()) {
        auto key = KeyBytesFromJson(TextOf(k));
        if (!key.ok()) return About("keys_if_undelivered", key.status());
        e.keys_if_undelivered.push_back(std::move(*key));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<QueuePullJson> ParseQueuePullRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "QueuePullRequest", &d, /*empty_is_object=*/true));
  QueuePullJson r;
  if (d.HasMember("max_messages")) r.max_messages = d["max_messages"].GetInt64();
  if (d.HasMember("visibility_timeout")) r.visibility_ms = d["visibility_timeout"].GetInt64();
  if (d.HasMember("wait")) r.wait_ms = d["wait"].GetInt64();
  if (d.HasMember("format")) r.v8 = StringOf(d["format"]) == "v8";
  return r;
}

Result<QueueSettleJson> ParseQueueSettleRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "QueueSettleRequest", &d));
  QueueSettleJson r;
  for (const auto& l : d["leases"].GetArray()) r.leases.push_back(StringOf(l));
  if (d.HasMember("delay")) r.delay_ms = d["delay"].GetInt64();
  if (d.HasMember("error")) r.error = StringOf(d["error"]);
  if (d.HasMember("visibility_timeout")) r.visibility_ms = d["visibility_timeout"].GetInt64();
  return r;
}

Result<QueueDeadListJson> ParseQueueDeadListRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "QueueDeadListRequest", &d, /*empty_is_object=*/true));
  QueueDeadListJson r;
  if (d.HasMember("limit")) r.limit = d["limit"].GetInt64();
  if (d.HasMember("cursor")) r.cursor = StringOf(d["cursor"]);
  return r;
}

Result<QueueDeadJson> ParseQueueDeadRequest(std::string_view body) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseBody(body, "QueueDeadRequest", &d));
  QueueDeadJson r;
  if (d.HasMember("ids")) {
    for (const auto& id : d["ids"].GetArray()) r.ids.push_back(StringOf(id));
  }
  r.all = d.HasMember("all") && d["all"].GetBool();
  if (r.all == d.HasMember("ids")) {
    return InvalidArgument("Name the dead letters with \"ids\", or give \"all\": true.");
  }
  return r;
}

Result<std::string> QueueValueJson(const std::string& payload, bool v8) {
  if (v8) return std::string("{\"type\":\"v8\",\"value\":\"") + Base64UrlEncode(payload) + "\"}";
  auto json = KvValueToJson(KvValue{payload, ValueEncoding::kV8});
  if (!json.ok())
    return Corruption("stored queue message has no JSON view: " + json.status().message());
  return json;
}

Result<QueueCountsAnswer> ParseQueueCountsAnswer(std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(json, "The answer", &d));
  if (!d.IsObject()) return InvalidArgument("The answer is not a JSON object.");
  QueueCountsAnswer a;
  for (auto [name, out] :
       {std::pair{"ready", &a.counts.ready}, std::pair{"delayed", &a.counts.delayed},
        std::pair{"leased", &a.counts.leased}, std::pair{"dead", &a.counts.dead},
        std::pair{"undelivered", &a.undelivered}, std::pair{"count", &a.count}}) {
    if (d.HasMember(name) && d[name].IsInt64()) *out = d[name].GetInt64();
  }
  return a;
}

std::string QueueCountsJson(const storage::QueueTableCounts& c, int64_t undelivered) {
  return "{\"ready\":" + std::to_string(c.ready) + ",\"delayed\":" + std::to_string(c.delayed) +
         ",\"leased\":" + std::to_string(c.leased) + ",\"dead\":" + std::to_string(c.dead) +
         ",\"undelivered\":" + std::to_string(undelivered) + "}";
}

Result<QueueDeadListAnswer> ParseQueueDeadListAnswer(std::string_view json) {
  rapidjson::Document d;
  KVC_RETURN_IF_ERROR(ParseJsonText(json, "The answer", &d));
  if (!d.IsObject() || !d.HasMember("dead_letters") || !d["dead_letters"].IsArray()) {
    return InvalidArgument("The answer is not a list of dead letters.");
  }
  QueueDeadListAnswer a;
  for (const auto& item : d["dead_letters"].GetArray()) {
    if (!item.IsObject()) return InvalidArgument("A dead letter is not a JSON object.");
    QueueDeadLetterAnswer l;
    if (item.HasMember("id") && item["id"].IsString()) l.id = StringOf(item["id"]);
    if (item.HasMember("value")) l.value_json = TextOf(item["value"]);
    if (item.HasMember("keys_if_undelivered") && item["keys_if_undelivered"].IsArray()) {
      for (const auto& k : item["keys_if_undelivered"].GetArray()) l.keys_json.push_back(TextOf(k));
    }
    if (item.HasMember("attempts") && item["attempts"].IsInt64()) {
      l.attempts = item["attempts"].GetInt64();
    }
    if (item.HasMember("last_error") && item["last_error"].IsString()) {
      l.last_error = StringOf(item["last_error"]);
    }
    if (item.HasMember("dead_at") && item["dead_at"].IsInt64()) {
      l.dead_at_ms = item["dead_at"].GetInt64();
    }
    a.dead_letters.push_back(std::move(l));
  }
  if (d.HasMember("cursor") && d["cursor"].IsString()) a.cursor = StringOf(d["cursor"]);
  return a;
}

}  // namespace kvc::codec
