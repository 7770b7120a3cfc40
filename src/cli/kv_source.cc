#include "cli/kv_source.h"

#include <algorithm>
#include <ostream>
#include <thread>
#include <utility>

#include "codec/backup_manifest.h"
#include "codec/client_codec.h"
#include "common/clock.h"

namespace kvc::cli {
namespace {

using Clock = std::chrono::steady_clock;

// At most `n` bytes of a server's text, control characters replaced, for messages.
std::string Excerpt(std::string_view text, size_t n = 300) {
  std::string out;
  for (char c : text.substr(0, n)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (text.size() > n) out += "...";
  if (out.empty()) out = "(empty body)";
  return out;
}

bool ContainsAuthorization(std::string_view body) {
  return client::AsciiLower(body).find("authorization") != std::string::npos;
}

// Transport failures, the 5xx answers of an overloaded, restarting or proxied server (500, 502,
// 503, 504) and a rate limit (429) are worth another attempt; nothing else is (501: not a KV
// Connect server).
bool Retryable(int http_status) {
  return http_status == 429 || http_status == 500 || http_status == 502 || http_status == 503 ||
         http_status == 504;
}

}  // namespace

bool IsHttpUrl(std::string_view spec) {
  const std::string lower = client::AsciiLower(spec.substr(0, 8));
  return lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0;
}

Result<client::Url> ParseKvConnectUrl(std::string_view text) {
  if (!IsHttpUrl(text)) {
    return InvalidArgument("'" + std::string(text) +
                           "' is not a KV Connect URL: give the URL you give Deno.openKv, "
                           "http(s)://HOST[:PORT][/databases/NAME/connect]");
  }
  Result<client::Url> url = client::ParseUrl(text);
  if (!url.ok()) return InvalidArgument("--from: " + url.status().message());
  if (url->host.empty()) return InvalidArgument("--from: the URL names no host");
  return url;
}

std::optional<std::string> ConnectPathFallback(std::string_view path) {
  std::string_view rest = path;
  if (rest.rfind("/v2", 0) == 0) rest.remove_prefix(3);
  constexpr std::string_view kPrefix = "/databases/";
  if (rest.rfind(kPrefix, 0) != 0) return std::nullopt;
  rest.remove_prefix(kPrefix.size());
  if (rest.empty() || rest.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(path) + "/connect";
}

KvSource::KvSource(KvSourceOptions options, std::ostream* log)
    : options_(std::move(options)), log_(log) {}

KvSource::~KvSource() = default;

Result<std::unique_ptr<KvSource>> KvSource::Open(KvSourceOptions options, std::ostream* log) {
  if (options.token.empty()) {
    return InvalidArgument(
        "the source needs an access token: --from-token TOKEN, --from-token-file PATH or the "
        "environment variable DENO_KV_ACCESS_TOKEN");
  }
  std::unique_ptr<KvSource> source(new KvSource(std::move(options), log));
  KVC_RETURN_IF_ERROR(source->ExchangeMetadata(/*initial=*/true));
  return source;
}

Result<client::BlockingClient*> KvSource::ClientFor(const client::Url& origin) {
  const bool metadata_origin = origin.SameOrigin(options_.url);
  std::unique_ptr<client::BlockingClient>& slot = metadata_origin ? metadata_client_ : data_client_;
  if (!slot) {
    client::BlockingClientOptions o;
    o.origin = origin;
    o.version = options_.http;
    o.ca_file = options_.ca_file;
    o.insecure = options_.insecure;
    o.connect_timeout = options_.connect_timeout;
    o.keep_headers = false;
    o.max_response_bytes = options_.max_response_bytes;
    KVC_ASSIGN_OR_RETURN(slot, client::BlockingClient::Connect(o));
  }
  return slot.get();
}

void KvSource::DropClient(const client::Url& origin) {
  if (origin.SameOrigin(options_.url)) {
    metadata_client_.reset();
  } else {
    data_client_.reset();
  }
}

Status KvSource::Backoff(const Status& why, Clock::time_point first_failure, int attempt) {
  auto delay = options_.retry_first * (int64_t{1} << std::min(attempt, 16));
  delay = std::min<std::chrono::milliseconds>(delay, options_.retry_max);
  if (Clock::now() + delay - first_failure > options_.retry_for) {
    return Unavailable(why.message() + " (gave up after retrying for " +
                       std::to_string(options_.retry_for.count() / 1000) + " s)");
  }
  ++retries_;
  if (log_ != nullptr) {
    *log_ << "source: " << why.message() << "; retrying in " << delay.count() << " ms" << std::endl;
  }
  std::this_thread::sleep_for(delay);
  return Status::Ok();
}

Status KvSource::ExchangeMetadata(bool initial) {
  std::string path = options_.url.path;
  const auto first_failure = Clock::now();
  for (int attempt = 0;; ++attempt) {
    bool retry = false;
    Status s = TryMetadata(path, initial, &retry);
    if (s.ok()) return s;
    if (s.code() == StatusCode::kNotFound) {
      if (auto fallback = ConnectPathFallback(path); fallback) {
        path = *fallback;
        continue;
      }
    }
    if (!retry) return s;
    KVC_RETURN_IF_ERROR(Backoff(s, first_failure, attempt));
  }
}

Status KvSource::TryMetadata(const std::string& path, bool initial, bool* retry) {
  client::Url url = options_.url;
  url.path = path;
  const std::string where = "the metadata exchange with " + url.ToString();
  Result<client::BlockingClient*> http = ClientFor(url);
  if (!http.ok()) {
    *retry = !initial && http.status().code() == StatusCode::kUnavailable;
    const bool h2c = options_.http == client::HttpVersion::kHttp2 && !url.tls();
    return Status(http.status().code(),
                  where + " failed: " + http.status().message() +
                      (h2c ? " (a server that does not speak HTTP/2 without TLS (h2c)? try "
                             "--from-http1)"
                           : ""));
  }
  ++exchanges_;
  Result<client::Response> answer = (*http)->Call(
      loadgen::MetadataRequest(url, options_.token, options_.user_agent), options_.call_timeout);
  if (!answer.ok()) {
    DropClient(url);
    *retry = true;
    return Status(answer.status().code(), where + " failed: " + answer.status().message());
  }
  const int status = answer->status;
  const std::string text = Excerpt(answer->body);
  if (status == 200) {
    Result<loadgen::DataPath> parsed =
        loadgen::DataPathFromMetadata(url, answer->body, options_.user_agent);
    if (!parsed.ok()) {
      return InvalidArgument(url.ToString() + " is not a KV Connect server: it answered the " +
                             "metadata exchange with HTTP 200 (content-type '" +
                             answer->content_type + "') that is not KV Connect metadata (" +
                             parsed.status().message() + "): " + text);
    }
    path_ = std::move(*parsed);
    return Status::Ok();
  }
  if (Retryable(status)) {
    *retry = true;
    return Unavailable(where + " failed: HTTP " + std::to_string(status) + ": " + text);
  }
  if (status == 401) {
    return Status(StatusCode::kUnauthenticated,
                  "the source refused the access token (HTTP 401): " + text);
  }
  if (status == 403) {
    return Status(StatusCode::kPermissionDenied,
                  "the source refused the access token (HTTP 403): " + text);
  }
  if (status == 404) {
    return NotFound(url.ToString() + " is not a KV Connect metadata URL (HTTP 404: " + text +
                    "); give the URL you give Deno.openKv");
  }
  return InvalidArgument(where + " failed: HTTP " + std::to_string(status) + ": " + text);
}

Result<std::vector<Entry>> KvSource::Read(const std::string& start, const std::string& end,
                                          int32_t limit) {
  limit = std::clamp(limit, int32_t{1}, kMaxReadEntries);
  // A data-path token past its expiresAt: a new one first, as Deno >= 2.9.1 does.
  if (Result<int64_t> expires = codec::ParseRfc3339Ms(path_.expires_at);
      expires.ok() && NowUnixMs() >= *expires) {
    if (log_ != nullptr)
      *log_ << "source: the data-path token expired; exchanging metadata again\n";
    KVC_RETURN_IF_ERROR(ExchangeMetadata(/*initial=*/false));
  }
  bool refreshed = false;
  auto first_failure = Clock::now();
  int attempt = 0;
  for (;;) {
    const std::string body = codec::EncodeSnapshotReadRequest({ReadRange{start, end, limit}});
    bool retry = false;
    bool refresh = false;
    Result<std::vector<Entry>> page = TryRead(body, start, end, limit, &retry, &refresh);
    if (page.ok()) return page;
    if (page.status().code() == StatusCode::kPayloadTooLarge && limit > 1) {
      limit /= 2;  // values near the limit: ask for fewer per page
      continue;
    }
    if (refresh && !refreshed) {
      // An expired data-path token: one new metadata exchange, then the call once more (as
      // Deno >= 2.9.1 does).
      refreshed = true;
      if (log_ != nullptr) {
        *log_ << "source: " << page.status().message() << "; exchanging metadata again"
              << std::endl;
      }
      KVC_RETURN_IF_ERROR(ExchangeMetadata(/*initial=*/false));
      continue;
    }
    if (!retry) return page.status();
    KVC_RETURN_IF_ERROR(Backoff(page.status(), first_failure, attempt++));
  }
}

Result<std::vector<Entry>> KvSource::TryRead(const std::string& body, const std::string& start,
                                             const std::string& end, int32_t limit, bool* retry,
                                             bool* refresh) {
  const client::Url& endpoint = path_.endpoint;
  Result<client::BlockingClient*> http = ClientFor(endpoint);
  if (!http.ok()) {
    *retry = http.status().code() == StatusCode::kUnavailable;
    return http.status();
  }
  Result<client::Response> answer = (*http)->Call(
      client::Request{.path = path_.read_path, .headers = path_.headers, .body = body},
      options_.call_timeout);
  if (!answer.ok()) {
    DropClient(endpoint);
    *retry = answer.status().code() != StatusCode::kPayloadTooLarge;
    return Status(answer.status().code(), "snapshot_read at " + endpoint.ToString() +
                                              " failed: " + answer.status().message());
  }
  const int status = answer->status;
  if (status != 200) {
    const std::string text = "snapshot_read at " + endpoint.ToString() + " answered HTTP " +
                             std::to_string(status) + ": " + Excerpt(answer->body);
    *retry = Retryable(status);
    *refresh =
        status == 401 || status == 403 || (status == 400 && ContainsAuthorization(answer->body));
    if (status == 401) return Status(StatusCode::kUnauthenticated, text);
    if (status == 403) return Status(StatusCode::kPermissionDenied, text);
    return *retry ? Unavailable(text) : InvalidArgument(text);
  }
  auto bad = [&](const std::string& why) {
    return Internal("the source's answer to snapshot_read is not KV Connect: " + why);
  };
  Result<codec::SnapshotReadResult> read = codec::DecodeSnapshotReadOutput(answer->body);
  if (!read.ok()) return bad(read.status().message());
  if (read->read_disabled || read->status == codec::ReadStatus::kReadDisabled) {
    return InvalidArgument("the source says reads are disabled for this database");
  }
  if (path_.version >= 3 && read->status != codec::ReadStatus::kSuccess) {
    return bad("status " + std::to_string(static_cast<int>(read->status)) + ", not SR_SUCCESS");
  }
  if (read->ranges.size() != 1) {
    return bad(std::to_string(read->ranges.size()) + " ranges for one asked");
  }
  std::vector<Entry>& entries = read->ranges[0];
  if (entries.size() > static_cast<size_t>(limit)) {
    return bad(std::to_string(entries.size()) + " entries for at most " + std::to_string(limit));
  }
  const std::string* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.key < start || e.key >= end || (previous != nullptr && e.key <= *previous)) {
      return bad("keys out of order or outside the range asked for");
    }
    previous = &e.key;
  }
  return std::move(entries);
}

}  // namespace kvc::cli
